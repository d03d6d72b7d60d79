'use strict'

// An app that listens on $PORT itself (Express's `app.listen(port)`, Koa's, Fastify's, hapi's
// `server.start()`, Next's custom server, `.next/standalone/server.js`) runs unchanged: the
// worker watches every listen() in its process, and the first server that listens on the slot's
// port is taken over by the runtime, which listens with it as it would with an exported server
// (its host, the one-request guard, low fds, ready), if it is one the pool can serve
// (servable.js). Any other listen() is the app's own.

const net = require('node:net')
const os = require('node:os')

// Replace net.Server's listen(), which every server inherits, with one that asks
// `decide(server, args)` first: 'adopt' (the runtime listens instead: `adopt(server, callback)`),
// 'refuse' (the port is the pool's: EADDRINUSE, as from a port in use) or 'pass' (as without the
// pool). Returns the original listen(), for the runtime's own use.
function interceptListen ({ decide, adopt }) {
  const listen = net.Server.prototype.listen
  net.Server.prototype.listen = function listenUnderPool (...args) {
    switch (decide(this, args)) {
      case 'adopt': adopt(this, callbackOf(args)); return this
      case 'refuse': refuse(this, requestedPort(args)); return this
      default: return listen.apply(this, args)
    }
  }
  return listen
}

// The TCP port a listen() call asks for, in any of its forms: (port[, host][, backlog][, cb]),
// a port given as a string, ({ port, host, ... }[, cb]), or () and (cb) for any port (0). Null
// for a pipe path, a handle or a file descriptor.
function requestedPort (args) {
  const first = args[0]
  if (first === undefined || typeof first === 'function') return 0
  if (first !== null && typeof first === 'object') {
    if (first.path !== undefined || first.handle !== undefined || first._handle !== undefined || first.fd !== undefined) return null
    return first.port === undefined ? null : toPort(first.port)
  }
  return toPort(first)
}

function toPort (value) {
  if (typeof value !== 'number' && typeof value !== 'string') return null
  if (typeof value === 'string' && value.trim() === '') return null
  const port = Number(value)
  return Number.isInteger(port) && port >= 0 && port <= 65535 ? port : null
}

function callbackOf (args) {
  const last = args[args.length - 1]
  return typeof last === 'function' ? last : null
}

// As Node reports a port in use: asynchronously, as the server's 'error'.
function refuse (server, port) {
  const err = new Error(`listen EADDRINUSE: address already in use :${port} (another server of this worker already serves the pool's port)`)
  Object.assign(err, { code: 'EADDRINUSE', errno: -os.constants.errno.EADDRINUSE, syscall: 'listen', port })
  process.nextTick(() => server.emit('error', err))
}

module.exports = { interceptListen, requestedPort }
