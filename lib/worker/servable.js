'use strict'

// What an app may hand to the pool, and the http.Server that serves each kind. Kinds are told
// apart by shape, not by class: the app's copy of a framework is not ours to require.
const http = require('node:http')
const net = require('node:net')

// The pool's errors (lib/errors.js) only for an app that cannot be served: loaded then.
const errors = () => require('../errors')

// A net.Server, or an object shaped like one. `address` is what tells a server from an app that
// is merely an EventEmitter with a listen() method: a Koa app is one, and served as a server it
// crashed every worker once it listened.
function isServer (x) {
  return x instanceof net.Server ||
    (isObject(x) && typeof x.listen === 'function' && typeof x.listeners === 'function' &&
      typeof x.address === 'function')
}

// Each kind: its name (for messages), how it is recognised, and how it is served: the server
// whose 'request' events the pool takes over, and what must finish before it may listen.
const KINDS = [
  // Express apps are request listeners.
  {
    name: 'a request listener (req, res) => {}',
    is: (x) => typeof x === 'function',
    serve: (listener) => ({ server: http.createServer(listener) })
  },
  { name: 'an http.Server that is not listening yet', is: isServer, serve: (server) => ({ server }) },
  // A Fastify instance owns its server, and has its routes only once ready() has loaded its
  // plugins. It is thenable too: awaited, it would be mistaken for a promise of an app.
  {
    name: 'a Fastify instance',
    is: (x) => isObject(x) && isServer(x.server) && typeof x.ready === 'function',
    serve: (app) => ({ server: app.server, prepare: () => app.ready() })
  },
  // A hapi server owns its `listener`; initialize() starts its caches and runs onPreStart.
  {
    name: 'a hapi server',
    is: (x) => isObject(x) && isServer(x.listener) && typeof x.initialize === 'function',
    serve: (app) => ({ server: app.listener, prepare: () => app.initialize() })
  },
  // Koa, and any app whose callback() gives a request listener.
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

// { server, prepare? }: the server to listen with, and, if set, a function whose promise must
// resolve before it listens.
function servingOf (target) {
  const kind = kindOf(target)
  if (kind) return kind.serve(target)
  throw errors().poolError(errors().codes.BAD_OPTION, `listen() takes ${WHAT_TO_EXPORT}; got ${describeExport(target)}`)
}

// What the app module exported, as the runtime serves it: ESM namespaces and transpiled modules
// put the app on `default`.
function unwrapDefault (exported) {
  return isObject(exported) && !isServable(exported) && 'default' in exported ? exported.default : exported
}

// The boot failure of a worker whose app exported `app`, nothing it can serve, and whose event
// loop emptied without a listen(): none can come any more.
function noListenError (app) {
  return appError(`the app exported ${describeExport(app)} and did not call listen(): export ${WHAT_TO_EXPORT} ` +
    '(module.exports = app, or export default app), call require(\'pool\').listen(app), or listen on process.env.PORT')
}

// What speaks on a server's port, told by its class: 'http' (HTTP/1.1 in clear, what the
// balancer speaks to every worker), 'tls' (https, tls, HTTP/2 over TLS), 'http2' (in clear) or
// 'tcp' (a net.Server of the app's own protocol). Null for an object only shaped like a server
// (from another realm, say): it is taken at its word, as before.
function protocolOf (server) {
  if (!(server instanceof net.Server)) return null
  if (server instanceof http.Server) return 'http'
  // node:tls only here: a TLS server was made by the app, which loaded it. Loaded with this
  // module, it would cost every worker some 5 MB (Node.js 24) that an HTTP app never needs.
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

// The boot failure of a worker whose server on the slot's port cannot be served (taken over,
// it would be reported ready and then fail every request), or null when it can.
function unservableError (server, port) {
  const problem = NOT_HTTP[protocolOf(server)]
  return problem ? appError(`the app's server on PORT (${port}) is ${problem}`) : null
}

// A boot failure that is the app's to fix, said in one line: where the pool noticed is no help
// to the app's author.
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
