'use strict'

// The answers the balancer writes itself. Each error body says who failed and what to do,
// with the request id so that a user's report can be matched with the logs.

const { STATUS_CODES } = require('node:http')

const RETRY_AFTER_SECONDS = 1

const REASONS = {
  duplicate_host: { status: 400, text: 'the request has more than one Host header (RFC 9112 §3.2)', close: true },
  invalid_host: { status: 400, text: 'the request\'s Host header names no host (RFC 9112 §3.2)', close: true },
  invalid_target: {
    status: 400,
    text: 'the request\'s target is in absolute form with no http or https authority (RFC 9112 §3.2.2)',
    close: true
  },
  transfer_coding: {
    status: 501,
    text: 'the request\'s Transfer-Encoding is not chunked, the one transfer coding served here',
    close: true
  },
  websocket: {
    status: 501,
    text: 'WebSocket needs a Node.js whose HTTP server routes upgrades by protocol (shouldUpgradeCallback: 22.21, ' +
      '24.9 and later)',
    close: true
  },
  bad_upgrade: {
    status: 400,
    text: 'a WebSocket handshake is a GET with Connection: upgrade (RFC 6455 §4.1)',
    close: true
  },
  body_too_large: { status: 413, text: 'the request body is larger than the limit (--max-body)', close: true },
  queue_timeout: {
    status: 503,
    text: 'every worker stayed busy while this request waited in the queue; retry shortly',
    retryAfter: true
  },
  queue_full: { status: 503, text: 'the queue is full (--max-queue); retry shortly', retryAfter: true },
  body_budget: {
    status: 503,
    text: 'the balancer holds as many request bodies as its memory budget allows (--body-budget); retry shortly',
    retryAfter: true,
    close: true
  },
  queue_shed: {
    status: 503,
    text: 'the pool is overloaded: this request was turned away at once rather than served too late; retry shortly',
    retryAfter: true
  },
  stopping: { status: 503, text: 'the pool is stopping', retryAfter: true },
  worker_refused: { status: 502, text: 'no worker accepted the connection (tried --retries times)' },
  worker_died: {
    status: 502,
    text: 'the worker closed the connection before answering; a request that is not GET/HEAD is never replayed'
  },
  worker_died_twice: {
    status: 502,
    text: 'the worker closed the connection before answering, and so did the one it was retried on'
  },
  bad_response: { status: 502, text: 'the worker answered with a malformed HTTP response, which was not passed on' },
  worker_broken_response: { status: 502, text: 'the worker closed the connection in the middle of its response' },
  worker_timeout: {
    status: 504,
    text: 'the app sent no answer within the read timeout (--read-timeout) or the request time limit ' +
      '(--max-request-time)'
  },
  out_of_descriptors: {
    status: 503,
    text: 'the pool could not open a connection to a worker: it is out of file descriptors (raise ulimit -n); retry ' +
      'shortly',
    retryAfter: true
  },
  internal_error: {
    status: 500,
    text: 'the balancer failed while handling this request; its error log has the details'
  }
}

// Write the error answer for `reason` unless the response has started or the client is gone.
// Returns the status written (or that would have been). end: false writes it whole without
// ending the response (lingering.js ends it).
function replyError (res, reason, { id, close = false, end = true } = {}) {
  const r = REASONS[reason]
  if (res.headersSent || res.destroyed) return r.status
  const body = `${r.status} ${STATUS_CODES[r.status]}: ${r.text}.` + (id ? ` Request id: ${id}.` : '') + '\n'
  const headers = {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store'
  }
  if (id) headers['X-Request-Id'] = id
  if (r.retryAfter) headers['Retry-After'] = String(RETRY_AFTER_SECONDS)
  if (r.close || close) headers.Connection = 'close'
  // The reason phrase is given: a worker's refused one may still be on `res`.
  res.writeHead(r.status, STATUS_CODES[r.status], headers)
  if (end) res.end(body)
  else res.write(body)
  return r.status
}

// How long a refused CONNECT's socket may take to receive its answer before it is cut.
const CONNECT_ANSWER_MS = 1000

// CONNECT arrives as a bare socket (Node's 'connect' event), not a request/response pair, and
// Node lets go of it: no 'error' listener any more (a reset would be an uncaught exception), and
// the server no longer counts it (it would keep a stop waiting for ever). So it gets its own
// error listener, and is destroyed once answered, or after CONNECT_ANSWER_MS at the latest.
function refuseConnect (socket) {
  socket.on('error', () => socket.destroy())
  const cut = setTimeout(() => socket.destroy(), CONNECT_ANSWER_MS)
  cut.unref()
  socket.once('close', () => clearTimeout(cut))
  const body = '501 Not Implemented: the pool is not a forward proxy; CONNECT is not served.\n'
  socket.end('HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`, () => socket.destroy())
  return socket
}

// Whether `req` asks the balancer's own health check (--ping-path), with or without a query.
function isPing (req, pingPath) {
  return req.url === pingPath || req.url.startsWith(pingPath + '?')
}

function replyPing (req, res, { stopping }) {
  const status = stopping ? 503 : 200
  const body = stopping ? 'stopping\n' : 'OK\n'
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store'
  })
  res.end(req.method === 'HEAD' ? undefined : body)
}

module.exports = { replyError, replyPing, isPing, refuseConnect, REASONS, RETRY_AFTER_SECONDS }
