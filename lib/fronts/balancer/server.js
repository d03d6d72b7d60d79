'use strict'

// The client-facing HTTP server, hardened; listened on and closed like every port of the pool's.

const http = require('node:http')
const { trackClose } = require('../../net/listen')
const { isWebSocketUpgrade } = require('./request-rules')

// How often Node checks headersTimeout/requestTimeout (its 30 s default lets slowloris overstay).
const TIMEOUT_CHECK_INTERVAL_MS = 1000

// The largest request head (431 above): Node's default. Workers get twice this, so that the
// front's added headers never make a worker refuse what the front accepted.
const MAX_HEADER_BYTES = 16 * 1024

// handlers: onRequest; onCheckContinue (`Expect: 100-continue`, Node sends no 100 itself);
// onConnect (CONNECT, else dropped unanswered); onUpgrade for WebSocket handshakes only.
function createFrontServer (opts, { onRequest, onCheckContinue, onConnect, onUpgrade }) {
  const server = http.createServer({
    shouldUpgradeCallback: isWebSocketUpgrade,
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
  // Older Node.js ignores shouldUpgradeCallback and would hand every upgrade to 'upgrade'.
  server.upgradesWebSockets = server.shouldUpgradeCallback === isWebSocketUpgrade && typeof onUpgrade === 'function'
  if (server.upgradesWebSockets) server.on('upgrade', onUpgrade)
  checkOnlyWhileConnected(server, TIMEOUT_CHECK_INTERVAL_MS)
  return trackClose(server)
}

// Replaces Node's always-running timeout-check interval with one that runs only while connections
// are open (net.Server counts them), so an idle pool is not woken. Left alone if Node's internals
// are not where this looks.
function checkOnlyWhileConnected (server, interval) {
  server.once('listening', () => {
    const key =
      Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connectionsCheckingInterval')
    const check = key && server[key]?._onTimeout
    if (typeof check !== 'function' || typeof server._connections !== 'number') return
    clearInterval(server[key])
    server[key] = null
    const tick = () => {
      check()
      if (server._connections > 0) return
      clearInterval(server[key])
      server[key] = null
    }
    server.on('connection', () => {
      if (server[key] === null) server[key] = setInterval(tick, interval).unref()
    })
  })
}

module.exports = { MAX_HEADER_BYTES, createFrontServer }
