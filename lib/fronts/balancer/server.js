'use strict'

// The client-facing HTTP server, hardened; listened on and closed like every port of the pool's.

const http = require('node:http')
const { trackClose } = require('../../net/listen')

// How often Node checks headersTimeout/requestTimeout. Its default (30 s) would let a slowloris
// connection live up to 30 s past the timeout.
const TIMEOUT_CHECK_INTERVAL_MS = 1000

// The largest request head the front accepts (431 above it): Node's default, said out loud.
// Workers are forked with twice this (--max-http-header-size), so that what the front adds
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

module.exports = { MAX_HEADER_BYTES, createFrontServer }
