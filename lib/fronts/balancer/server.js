'use strict'

// The client-facing HTTP server, hardened; listened on and closed like every port of the pool's.

const http = require('node:http')
const { trackClose } = require('../../net/listen')
const { isWebSocketUpgrade } = require('./request-rules')

// How often Node checks headersTimeout/requestTimeout. Its default (30 s) would let a slowloris
// connection live up to 30 s past the timeout. The check runs only while connections are open
// (checkOnlyWhileConnected): an idle pool is not woken for it.
const TIMEOUT_CHECK_INTERVAL_MS = 1000

// The largest request head the front accepts (431 above it): Node's default, said out loud.
// Workers are forked with twice this (--max-http-header-size), so that what the front adds
// (X-Forwarded-For, X-Request-Id...) never makes a worker refuse what the front accepted.
const MAX_HEADER_BYTES = 16 * 1024

// handlers: onRequest(req, res); onCheckContinue(req, res) for `Expect: 100-continue` (Node
// then sends no 100 by itself); onConnect(req, socket) for CONNECT, which Node would otherwise
// drop without an answer; onUpgrade(req, socket, head) for a WebSocket handshake, and only that
// (other upgrades are served as requests), where Node can tell them apart.
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
  // Node answers a malformed or timed-out request itself (400/408/431) and closes.
  return trackClose(server)
}

// Node checks its connections' timeouts on an interval that runs from the server's listen to
// its close, connections or not. Once Node has set it up (its own 'listening' listener runs
// first), its timer is stopped and its check run on a timer of ours, started by a connection and
// stopped by the first check that finds none open (net.Server counts them): an idle pool is woken
// once after its last connection, and a client that opens a connection per request costs no
// timer of its own. The server's close clears it as it would Node's. Should a version of Node not
// keep either where this looks, its own interval is left to run.
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
