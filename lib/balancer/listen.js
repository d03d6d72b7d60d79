'use strict'

// The client-facing HTTP server, hardened, and a listen() that turns a busy port into the
// pool's usual error.

const http = require('node:http')
const { poolError, codes } = require('../errors')

// How often Node checks headersTimeout/requestTimeout. Its default (30 s) would let a slowloris
// connection live up to 30 s past the timeout.
const TIMEOUT_CHECK_INTERVAL_MS = 1000

// The largest request head the front accepts (431 above it): Node's default, said out loud.
// Workers are forked with twice this (lib/supervisor.js), so that what the front adds
// (X-Forwarded-For, X-Request-Id...) never makes a worker refuse what the front accepted.
const MAX_HEADER_BYTES = 16 * 1024

// handlers: onRequest(req, res); onCheckContinue(req, res) for `Expect: 100-continue` (Node
// then sends no 100 by itself); onConnect(req, socket) for CONNECT, which Node would otherwise
// drop without an answer.
function createFrontServer (opts, { onRequest, onCheckContinue, onConnect }) {
  const server = http.createServer({
    insecureHTTPParser: false, // strict parsing: no request smuggling past the front
    requireHostHeader: true,
    maxHeaderSize: MAX_HEADER_BYTES,
    headersTimeout: opts.headersTimeout,
    requestTimeout: opts.requestTimeout,
    keepAliveTimeout: opts.keepAliveTimeout,
    connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS
  }, onRequest)
  server.on('checkContinue', onCheckContinue)
  server.on('connect', onConnect)
  // Node answers a malformed or timed-out request itself (400/408/431) and closes.
  return trackClose(server)
}

function listen (server, { port, host, flag }) {
  return new Promise((resolve, reject) => {
    const onError = (err) => {
      server.removeListener('listening', onListening)
      if (err.code === 'EADDRINUSE') reject(poolError(codes.PORT_IN_USE, `port ${port} on ${host} is already in use (--${flag})`, { cause: err }))
      else reject(poolError(codes.PORT_IN_USE, `cannot listen on ${host}:${port} (--${flag}): ${err.message}`, { cause: err }))
    }
    const onListening = () => {
      server.removeListener('error', onError)
      resolve()
    }
    server.once('error', onError)
    server.once('listening', onListening)
    server.listen({ port, host, exclusive: true })
  })
}

// Stop accepting connections; open ones end on their own (idle keep-alive ones at once).
function beginClose (server) {
  if (!server.listening) return
  server.closeRequested = true
  server.close()
}

// Resolves once the server is closed and its last connection has ended.
function closeServer (server) {
  if (server.isClosed || (!server.listening && !server.closeRequested)) return Promise.resolve()
  return new Promise((resolve) => {
    server.once('close', resolve)
    beginClose(server)
  })
}

function trackClose (server) {
  server.once('close', () => { server.isClosed = true })
  return server
}

function urlOf (host, port) {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}

module.exports = { MAX_HEADER_BYTES, createFrontServer, listen, beginClose, closeServer, trackClose, urlOf }
