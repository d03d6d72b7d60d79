'use strict'

// An app that listens on $PORT itself (Express's `app.listen(port)`, Koa's, Fastify's, hapi's
// `server.start()`, Next's custom server, `.next/standalone/server.js`) runs unchanged: the
// worker watches every listen() in its process, and the first server that listens on the slot's
// port is taken over by the runtime, which listens with it as it would with an exported server
// (its host, the render guard, low fds, ready), if it is one the pool can serve
// (servable.js). Any other listen() is the app's own.

const net = require('node:net')

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

// The TCP port a listen() call asks for, as Node's own listen() reads its arguments (its
// normalizeArgs, then listen()), so that the worker adopts exactly what Node would bind to a
// port: 0 for any port ((), (cb), (null), ({ port: undefined })), the port for every TCP form
// ((port[, host][, backlog][, cb]), a port as a string, ({ port, ... }[, cb]), where a port wins
// over a `path` beside it, falsy or not: SvelteKit's adapter-node passes { path: false, host,
// port }), and null for what Node serves elsewhere (a pipe path, a handle, a file descriptor) or
// refuses (it throws on its own).
function requestedPort (args) {
  if (args.length === 0 || typeof args[0] === 'function') return 0
  let options = optionsOf(args[0])
  options = options._handle || options.handle || options
  if (options === null || (typeof options !== 'object' && typeof options !== 'function')) return null
  if (options.constructor?.name === 'TCP') return null // a listening handle: listen(server), listen(server._handle)
  if (typeof options.fd === 'number' && options.fd >= 0) return null
  if (options.port === null || (options.port === undefined && 'port' in options)) return 0
  return toPort(options.port)
}

// listen()'s first argument as options: an object is one; a string that is not a number >= 0
// is a pipe path ('-1' and '/tmp/app.sock' alike); anything else is a port.
function optionsOf (first) {
  if (typeof first === 'object' && first !== null) return first
  if (typeof first === 'string' && !(Number(first) >= 0)) return { path: first }
  return { port: first }
}

// A port as Node validates one (validatePort): a number, or a string of one (' 8080', '0x1f90'),
// integral, 0 to 65535. Null for anything else, which Node refuses by throwing ERR_SOCKET_BAD_PORT.
function toPort (value) {
  if (typeof value !== 'number' && typeof value !== 'string') return null
  if (typeof value === 'string' && value.trim() === '') return null
  const port = Number(value)
  return port === port >>> 0 && port <= 0xffff ? port : null
}

function callbackOf (args) {
  const last = args[args.length - 1]
  return typeof last === 'function' ? last : null
}

// As Node reports a port in use: asynchronously, as the server's 'error'. node:os (for the
// errno) is loaded here, on this rare path, not by every worker.
function refuse (server, port) {
  const err =
    new Error(`listen EADDRINUSE: address already in use :${port} (another server of this worker already serves the ` +
      'pool\'s port)')
  Object.assign(err,
    { code: 'EADDRINUSE', errno: -require('node:os').constants.errno.EADDRINUSE, syscall: 'listen', port })
  process.nextTick(() => server.emit('error', err))
}

module.exports = { interceptListen, requestedPort }
