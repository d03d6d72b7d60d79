'use strict'

// What an app may hand to the pool, and the http.Server that serves each kind, told apart by shape.
const http = require('node:http')
const net = require('node:net')

const errors = () => require('../errors')

// `address` tells a server from an EventEmitter with listen(), such as a Koa app.
function isServer (x) {
  return x instanceof net.Server ||
    (isObject(x) && typeof x.listen === 'function' && typeof x.listeners === 'function' &&
      typeof x.address === 'function')
}

const KINDS = [
  {
    name: 'a request listener (req, res) => {}',
    is: (x) => typeof x === 'function',
    serve: (listener) => ({ server: http.createServer(listener) })
  },
  { name: 'an http.Server that is not listening yet', is: isServer, serve: (server) => ({ server }) },
  // Has its routes once ready(); thenable too, so it must not be awaited as a promise of an app.
  {
    name: 'a Fastify instance',
    is: (x) => isObject(x) && isServer(x.server) && typeof x.ready === 'function',
    serve: (app) => ({ server: app.server, prepare: () => app.ready() })
  },
  {
    name: 'a hapi server',
    is: (x) => isObject(x) && isServer(x.listener) && typeof x.initialize === 'function',
    serve: (app) => ({ server: app.listener, prepare: () => app.initialize() })
  },
  {
    name: 'a Koa app',
    is: (x) => isObject(x) && typeof x.callback === 'function',
    serve: (app) => ({ server: http.createServer(app.callback()) })
  }
]

const names = KINDS.map((k) => k.name)
const WHAT_TO_EXPORT = `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`

function kindOf (x) {
  return KINDS.find((kind) => kind.is(x)) || null
}

function isServable (x) {
  return kindOf(x) !== null
}

// { server, prepare? }: prepare()'s promise must resolve before it listens.
function servingOf (target) {
  const kind = kindOf(target)
  if (kind) return kind.serve(target)
  throw errors().poolError(errors().codes.BAD_OPTION, `listen() takes ${WHAT_TO_EXPORT}; got ${describeExport(target)}`)
}

function unwrapDefault (exported) {
  return isObject(exported) && !isServable(exported) && 'default' in exported ? exported.default : exported
}

function noListenError (app) {
  return appError(`the app exported ${describeExport(app)} and did not call listen(): export ${WHAT_TO_EXPORT} ` +
    '(module.exports = app, or export default app), call require(\'pool\').listen(app), or listen on process.env.PORT')
}

// 'http', 'tls', 'http2' (in clear) or 'tcp', by class; null for an object shaped like a server.
function protocolOf (server) {
  if (!(server instanceof net.Server)) return null
  if (server instanceof http.Server) return 'http'
  // Required here, not at load: it would cost every worker some 5 MB.
  if (server instanceof require('node:tls').Server) return 'tls'
  if (server.constructor?.name === 'Http2Server') return 'http2'
  return 'tcp'
}

const INSTEAD = 'create it with http.createServer, or export the request handler'
const NOT_HTTP = {
  tls: 'a TLS server (https.createServer, tls.createServer), and the balancer speaks plain HTTP to each worker: ' +
    `terminate TLS in front of the pool (nginx, HAProxy) and ${INSTEAD}`,
  http2: `an HTTP/2 server (http2.createServer), and the balancer speaks HTTP/1.1 to each worker: ${INSTEAD}`,
  tcp: `a net.Server, not an HTTP server, and the balancer speaks HTTP/1.1 to each worker: ${INSTEAD}`
}

// Null when the server can be served; else the boot failure.
function unservableError (server, port) {
  const problem = NOT_HTTP[protocolOf(server)]
  return problem ? appError(`the app's server on PORT (${port}) is ${problem}`) : null
}

// The app's to fix: one line, no stack.
function appError (message) {
  const err = errors().poolError(errors().codes.BOOT_FAILED, message)
  err.stack = `${err.name}: ${err.message}`
  return err
}

function isThenable (x) {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof x.then === 'function'
}

function isObject (x) {
  return x !== null && typeof x === 'object'
}

function describeExport (x) {
  if (x === undefined) return 'undefined'
  if (x === null) return 'null'
  if (typeof x === 'string') return `the string ${JSON.stringify(x.length > 40 ? `${x.slice(0, 40)}…` : x)}`
  if (typeof x !== 'object') return `the ${typeof x} ${String(x)}`
  if (Array.isArray(x)) return `an array of ${x.length}`
  const keys = Object.keys(x)
  if (x[Symbol.toStringTag] === 'Module') {
    return `an ES module without a default export${keys.length ? ` (its exports: ${list(keys)})` : ''}`
  }
  if (keys.length === 0) return 'an empty object (nothing was assigned to module.exports)'
  return `an object (keys: ${list(keys)}) that is no request listener, server or app`
}

function list (keys) {
  return keys.length > 5 ? `${keys.slice(0, 5).join(', ')}, …` : keys.join(', ')
}

module.exports = {
  isServable,
  isThenable,
  servingOf,
  unwrapDefault,
  noListenError,
  protocolOf,
  unservableError,
  appError
}
