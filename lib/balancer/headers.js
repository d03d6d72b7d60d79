'use strict'

// What the balancer changes in the headers it passes on, both ways. The body is always
// buffered, so the worker receives one Content-Length and never Transfer-Encoding: nothing a
// worker's parser could read differently from the front's strict one.

const { randomUUID } = require('node:crypto')

// Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, not the message. Expect is
// handled by the front (Node answers 100-continue) and the body is complete by now.
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer',
  'upgrade', 'http2-settings', 'expect'
])

// An incoming X-Request-Id is kept if it looks like an id and not like an injection.
const REQUEST_ID = /^[\w\-.:/+=@]{1,128}$/

function requestId (req) {
  const given = req.headers['x-request-id']
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
}

// Header names that the Connection header declares hop-by-hop for this message.
function connectionListed (value) {
  if (!value) return null
  const names = new Set()
  for (const token of String(value).split(',')) names.add(token.trim().toLowerCase())
  return names
}

function clientAddress (req) {
  const a = req.socket.remoteAddress || ''
  return a.startsWith('::ffff:') ? a.slice(7) : a
}

// Headers for the request to the worker. Host is kept as the client sent it.
function toWorker (req, { id, body, proto = 'http' }) {
  const listed = connectionListed(req.headers.connection)
  const out = {}
  for (const name in req.headers) {
    if (HOP_BY_HOP.has(name) || (listed && listed.has(name))) continue
    out[name] = req.headers[name]
  }
  delete out['content-length']
  if (body) out['content-length'] = String(body.length)
  else if (req.headers['content-length'] === '0') out['content-length'] = '0'
  const prior = out['x-forwarded-for']
  const ip = clientAddress(req)
  out['x-forwarded-for'] = prior ? `${prior}, ${ip}` : ip
  if (!out['x-forwarded-proto']) out['x-forwarded-proto'] = proto
  out['x-request-id'] = id
  return out
}

// Response headers for the client, as a flat [name, value, ...] list that keeps the worker's
// spelling and repeated headers (Set-Cookie). `bodyLength` is set when the whole body was
// buffered: it then goes out with a Content-Length instead of chunked.
function toClient (upstreamRes, { id, bodyLength, close }) {
  const raw = upstreamRes.rawHeaders
  const listed = connectionListed(upstreamRes.headers.connection)
  const out = []
  let hasId = false
  let hasLength = false
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase()
    if (HOP_BY_HOP.has(lower) || (listed && listed.has(lower))) continue
    if (lower === 'x-request-id') hasId = true
    if (lower === 'content-length') hasLength = true
    out.push(raw[i], raw[i + 1])
  }
  if (!hasId) out.push('X-Request-Id', id)
  if (bodyLength !== undefined && !hasLength && mayHaveBody(upstreamRes)) out.push('Content-Length', String(bodyLength))
  if (close) out.push('Connection', 'close')
  return out
}

function mayHaveBody (upstreamRes) {
  const s = upstreamRes.statusCode
  return upstreamRes.req.method !== 'HEAD' && s !== 204 && s !== 304 && !(s >= 100 && s < 200)
}

module.exports = { requestId, toWorker, toClient, HOP_BY_HOP }
