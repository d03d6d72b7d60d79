'use strict'

// The answers the balancer writes itself. Each error body says who failed and what to do,
// with the request id so that a user's report can be matched with the logs.

const RETRY_AFTER_SECONDS = 1

const REASONS = {
  queue_timeout: { status: 503, text: 'every worker stayed busy while this request waited in the queue; retry shortly', retryAfter: true },
  queue_full: { status: 503, text: 'the queue is full (--max-queue); retry shortly', retryAfter: true },
  stopping: { status: 503, text: 'the pool is stopping', retryAfter: true },
  body_too_large: { status: 413, text: 'the request body is larger than the limit (--max-body)', close: true },
  worker_refused: { status: 502, text: 'no worker accepted the connection (tried --retries times)' },
  worker_died: { status: 502, text: 'the worker closed the connection before answering; a request that is not GET/HEAD is never replayed' },
  worker_died_twice: { status: 502, text: 'the worker closed the connection before answering, and so did the one it was retried on' },
  worker_broken_response: { status: 502, text: 'the worker closed the connection in the middle of its response' },
  worker_timeout: { status: 504, text: 'the worker did not answer within --proxy-timeout' }
}

const STATUS_TEXT = { 413: 'Payload Too Large', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout' }

// Write the error answer for `reason` unless the response has started or the client is gone.
// Returns the status written (or that would have been).
function replyError (res, reason, { id, close = false } = {}) {
  const r = REASONS[reason]
  if (res.headersSent || res.destroyed) return r.status
  const body = `${r.status} ${STATUS_TEXT[r.status]}: ${r.text}.` + (id ? ` Request id: ${id}.` : '') + '\n'
  const headers = {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store'
  }
  if (id) headers['X-Request-Id'] = id
  if (r.retryAfter) headers['Retry-After'] = String(RETRY_AFTER_SECONDS)
  if (r.close || close) headers.Connection = 'close'
  res.writeHead(r.status, headers)
  res.end(body)
  return r.status
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

module.exports = { replyError, replyPing, REASONS, RETRY_AFTER_SECONDS }
