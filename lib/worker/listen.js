'use strict'

// `require('pool').listen(serverOrHandler)`: under `pool start` the pool's runtime binds the
// slot's port and reports readiness; run with plain `node app.js` it serves on $PORT (default
// 3000), one request rendering at a time (the guard with K=1), so local debugging looks like production.

const { currentRuntime } = require('./runtime')
const { servingOf } = require('./servable')
const { guardRequests } = require('./guard')

function listen (target, { port = Number(process.env.PORT) || 3000, host = process.env.HOST } = {}) {
  const runtime = currentRuntime()
  if (runtime) return runtime.serve(target)
  const { server, prepare } = servingOf(target)
  guardRequests(server)
  new Promise((resolve) => resolve(prepare?.())).then(() => {
    server.listen({ port, host }, () => {
      const a = server.address()
      process.stdout.write(`listening on http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port} (not ` +
        'under pool: one process)\n')
    })
  })
  return server
}

module.exports = { listen }
