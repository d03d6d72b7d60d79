'use strict'

// Form (a) of the pool API: the module exports a plain request listener and `pool start`
// creates the server around it, so the app never deals with ports.
//
//   npx pool start examples/handler.js -n 2

module.exports = function handler (req, res) {
  const body = `hello from pid ${process.pid}, worker ${process.env.POOL_WORKER_ID || '(not under pool)'}\n`
  res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

// Run directly (`node examples/handler.js`), serve on $PORT like any app. Under `pool start`
// this module is required, not run, so the supervisor's own listen is the only one.
// (In a project that installed the package as `pool`, npm i pool@npm:pool-supervisor: require('pool').)
if (require.main === module) require('pool-supervisor').listen(module.exports)
