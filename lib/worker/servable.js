'use strict'

// What an app may hand to the pool: a request listener `(req, res) => {}` (Express apps are
// one), a Koa-style app with `.callback()`, or an http.Server that is not listening yet.
const http = require('node:http')
const net = require('node:net')
const path = require('node:path')
const { poolError, codes } = require('../errors')

function isServer (x) {
  return x instanceof net.Server || (x !== null && typeof x === 'object' && typeof x.listen === 'function' && typeof x.listeners === 'function')
}

function isServable (x) {
  return typeof x === 'function' || isServer(x) || (x !== null && typeof x === 'object' && typeof x.callback === 'function')
}

function toServer (target) {
  if (isServer(target)) return target
  if (typeof target === 'function') return http.createServer(target)
  if (target !== null && typeof target === 'object' && typeof target.callback === 'function') return http.createServer(target.callback())
  const got = target === null ? 'null' : typeof target
  throw poolError(codes.BAD_OPTION, `listen() takes a request listener (req, res) => {}, an http.Server or an app with .callback(); got ${got}`)
}

// What the app module exported, as the runtime serves it: ESM namespaces and transpiled modules
// put the app on `default`. This is where the worker first sees the export, so an export that
// can never serve is refused here: one that is no app, from a module that did not even load
// pool's listen(), so it cannot call it later either. Without this the worker would wait for a
// listen() that never comes until --boot-timeout, five times over; refused, the boot fails at
// once and says why.
function unwrapDefault (exported) {
  const app = exported && typeof exported === 'object' && !isServable(exported) && 'default' in exported ? exported.default : exported
  if (isServable(app) || isThenable(app) || loadedListen()) return app
  const err = poolError(codes.BOOT_FAILED, `the app exported ${describeExport(app)} and did not call listen(): export a request listener (req, res) => {}, an http.Server that is not listening yet, or an app with .callback() (module.exports = app, or export default app), or call require('pool').listen(app)`)
  err.stack = `${err.name}: ${err.message}` // where the pool noticed is no help to the app's author
  throw err
}

function isThenable (x) {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof x.then === 'function'
}

// Any copy of pool (this one, or the app's own in its node_modules), loaded by require() or
// import: either way it is in require.cache once loaded.
const LISTEN_MODULE = path.join(path.sep, 'lib', 'worker', 'listen.js')

function loadedListen () {
  return Object.keys(require.cache).some((file) => file.endsWith(LISTEN_MODULE))
}

function describeExport (x) {
  if (x === undefined) return 'undefined'
  if (x === null) return 'null'
  if (typeof x === 'string') return `the string ${JSON.stringify(x.length > 40 ? `${x.slice(0, 40)}…` : x)}`
  if (typeof x !== 'object') return `the ${typeof x} ${String(x)}`
  if (Array.isArray(x)) return `an array of ${x.length}`
  const keys = Object.keys(x)
  if (x[Symbol.toStringTag] === 'Module') return `an ES module without a default export${keys.length ? ` (its exports: ${list(keys)})` : ''}`
  if (keys.length === 0) return 'an empty object (nothing was assigned to module.exports)'
  return `an object (keys: ${list(keys)}) that is no request listener, server or app`
}

function list (keys) {
  return keys.length > 5 ? `${keys.slice(0, 5).join(', ')}, …` : keys.join(', ')
}

module.exports = { isServable, toServer, unwrapDefault }
