'use strict'

// Form (b) of the pool API: the module exports an http.Server that is NOT listening, for apps
// that build their own server object (to attach 'upgrade' or 'clientError' handlers, say).
// `pool start` binds it to the slot's port.
//
//   npx pool start examples/server-export.js -n 2

const http = require('node:http')

const server = http.createServer((req, res) => {
  const body = JSON.stringify({ form: 'server-export', pid: process.pid, slot: process.env.POOL_WORKER_ID || null, url: req.url }) + '\n'
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
  res.end(body)
})

module.exports = server

// Run directly (`node examples/server-export.js`), serve on $PORT like any app. Under
// `pool start` this module is required, not run, so the supervisor's own listen is the only one.
// (In a project that installed the package as `pool`, npm i pool@npm:pool-supervisor: require('pool').)
if (require.main === module) require('pool-supervisor').listen(module.exports)
