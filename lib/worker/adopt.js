'use strict'

// An app that listens on $PORT itself (`app.listen(port)`, Next's server) runs unchanged: the first server
// to listen on the slot's port is adopted by the runtime, as an exported one would be, if servable.js allows.

const net = require('node:net')

// Replaces net.Server's listen(): `decide(server, args)` says 'adopt' (calls `adopt(server, callback)`),
// 'refuse' (EADDRINUSE) or 'pass'. Returns the original listen(), for the runtime's own use.
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

// The TCP port a listen() call asks for, read as Node's normalizeArgs reads it: 0 for any port, null for
// a pipe, handle, fd or what Node refuses. A port wins over a `path` beside it (SvelteKit's { path: false }).
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

// A string that is not a number >= 0 is a pipe path ('-1' too).
function optionsOf (first) {
  if (typeof first === 'object' && first !== null) return first
  if (typeof first === 'string' && !(Number(first) >= 0)) return { path: first }
  return { port: first }
}

// As Node's validatePort (' 8080', '0x1f90' pass); null where Node throws ERR_SOCKET_BAD_PORT.
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

// As Node reports a port in use: asynchronously, as the server's 'error'.
function refuse (server, port) {
  const err =
    new Error(`listen EADDRINUSE: address already in use :${port} (another server of this worker already serves the ` +
      'pool\'s port)')
  Object.assign(err,
    { code: 'EADDRINUSE', errno: -require('node:os').constants.errno.EADDRINUSE, syscall: 'listen', port })
  process.nextTick(() => server.emit('error', err))
}

module.exports = { interceptListen, requestedPort }
