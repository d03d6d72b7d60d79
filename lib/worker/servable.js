'use strict'

// What an app may hand to the pool: a request listener `(req, res) => {}` (Express apps are
// one), a Koa-style app with `.callback()`, or an http.Server that is not listening yet.
const http = require('node:http')
const net = require('node:net')
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

// ESM namespaces and transpiled modules put the app on `default`.
function unwrapDefault (exported) {
  if (exported && typeof exported === 'object' && !isServable(exported) && 'default' in exported) return exported.default
  return exported
}

module.exports = { isServable, toServer, unwrapDefault }
