'use strict'

// What the balancer changes in the headers it passes on, both ways. A request's body is always
// buffered, so the worker receives one Content-Length and never Transfer-Encoding: nothing a
// worker's parser could read differently from the front's strict one. A response keeps its
// framing (proxy.js writes it through): its Content-Length, or chunked.

const { randomUUID, randomBytes } = require('node:crypto')
const { STREAM_HEADER } = require('../../protocol/long-lived')

// Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, not the message. Expect is
// handled by the front (Node answers 100-continue) and the body is complete by now.
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer',
  'upgrade', 'http2-settings', 'expect'
])

// Request headers the balancer writes itself (below), so the client's copies are dropped.
// X-Pool-Request names one exchange with a worker: the pool's own, never a client's.
const EXCHANGE_HEADER = 'x-pool-request'
// A long-lived request is declared so to the worker's guard; a client's own is dropped.
const LONG_LIVED_LINE = `${STREAM_HEADER}: 1\r\n`
const REWRITTEN = new Set(['content-length', 'x-forwarded-for', 'x-forwarded-proto', 'x-request-id', 'host',
  EXCHANGE_HEADER, STREAM_HEADER.toLowerCase()])

// Headers by which a proxy tells the app who the client is. Only a peer in --trust-proxy may
// send them; from anyone else they are dropped, and the app sees what the front saw.
const FORWARDING = new Set(['forwarded', 'x-forwarded-host', 'x-forwarded-port', 'x-real-ip'])

// Response headers meant for the balancer, never for the client: X-Accel-Buffering is the app
// asking how its response is relayed (proxy.js), as nginx reads it.
const FOR_THE_BALANCER = new Set(['x-accel-buffering'])

// An incoming X-Request-Id is kept, from a peer in --trust-proxy, if it looks like an id and not
// like an injection: what the app and the access log call the request. Anyone else's is replaced.
const REQUEST_ID = /^[\w\-.:/+=@]{1,128}$/

function requestId (req, trusted) {
  const given = req.headers['x-request-id']
  return trusted && typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
}

// The id of one exchange with a worker (X-Pool-Request): what the balancer and the worker match
// a request by (its `awaiting` word, a request let go of), unique per balancer and attempt.
const EXCHANGE_PREFIX = randomBytes(6).toString('base64url')
let exchanges = 0
function exchangeId () {
  return `${EXCHANGE_PREFIX}.${++exchanges}`
}

// Header names that the Connection header declares hop-by-hop for this message.
function connectionListed (value) {
  if (!value || value === 'close' || value === 'keep-alive') return null // the usual, nothing listed
  const names = new Set()
  for (const token of String(value).split(',')) names.add(token.trim().toLowerCase())
  return names
}

function clientAddress (req) {
  const a = req.socket.remoteAddress || ''
  return a.startsWith('::ffff:') ? a.slice(7) : a
}

// The request line and headers for the worker, as one string (written as latin1: header bytes
// pass through unchanged). Header names keep the client's spelling. `trusted`: the peer is a
// proxy in --trust-proxy, whose forwarding headers are believed. `upgrade`: a WebSocket
// handshake, whose Upgrade goes on, on a connection of its own.
function requestHead (req, { id, body, trusted = false, proto = 'http', upgrade = false }) {
  const listed = connectionListed(req.headers.connection)
  const raw = req.rawHeaders
  let head = `${req.method} ${req.url} HTTP/1.1\r\n`
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase()
    if (HOP_BY_HOP.has(lower) || REWRITTEN.has(lower) || (listed && listed.has(lower))) continue
    if (!trusted && FORWARDING.has(lower)) continue
    head += `${raw[i]}: ${raw[i + 1]}\r\n`
  }
  // One Host, as the client sent it (the front refuses two); HTTP/1.0 may have none.
  head += `Host: ${req.headers.host !== undefined
    ? req.headers.host
    : `${req.socket.localAddress}:${req.socket.localPort}`}\r\n`
  // A trusted proxy's chain is kept and the peer appended, as nginx's
  // $proxy_add_x_forwarded_for does; anyone else's is replaced by the peer's address.
  const prior = trusted ? req.headers['x-forwarded-for'] : undefined
  const ip = clientAddress(req)
  head += `X-Forwarded-For: ${prior ? `${prior}, ${ip}` : ip}\r\n`
  head += `X-Forwarded-Proto: ${(trusted && req.headers['x-forwarded-proto']) || proto}\r\n`
  head += `X-Request-Id: ${id}\r\n`
  if (body || req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined) {
    head += `Content-Length: ${body ? body.length : 0}\r\n`
  }
  if (upgrade) return head + `Connection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\n`
  return head + 'Connection: keep-alive\r\n'
}

// The worker's 101 for the client, as the worker wrote it (its Upgrade and Connection are the
// handshake's), but for what is meant for the balancer; with the request's id.
function switchingHead (head, id) {
  const raw = head.rawHeaders
  let text = `HTTP/1.1 101 ${head.statusMessage || 'Switching Protocols'}\r\n`
  let hasId = false
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase()
    if (FOR_THE_BALANCER.has(lower)) continue
    if (lower === 'x-request-id') hasId = true
    text += `${raw[i]}: ${raw[i + 1]}\r\n`
  }
  if (!hasId) text += `X-Request-Id: ${id}\r\n`
  return text + '\r\n'
}

// The head of one attempt: the request's, with the exchange's id (and a stream's mark), ended.
function attemptHead (head, exchange, longLived = false) {
  return `${head}X-Pool-Request: ${exchange}\r\n${longLived ? LONG_LIVED_LINE : ''}\r\n`
}

// Response headers for the client, as a flat [name, value, ...] list that keeps the worker's
// spelling and repeated headers (Set-Cookie). `bodyLength` is set when the whole body was stored
// before it goes out (X-Accel-Buffering: yes): it then goes out with a Content-Length.
function toClient (head, { id, bodyLength, close }) {
  const raw = head.rawHeaders
  const listed = connectionListed(headerValue(raw, 'connection'))
  const out = []
  let hasId = false
  let hasLength = false
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase()
    if (HOP_BY_HOP.has(lower) || FOR_THE_BALANCER.has(lower) || (listed && listed.has(lower))) continue
    if (lower === 'x-request-id') hasId = true
    else if (lower === 'content-length') {
      // The parser says when the worker's length must not go out (chunked framing, a 204);
      // a duplicate goes out once.
      if (head.dropLength || hasLength) continue
      hasLength = true
    }
    out.push(raw[i], raw[i + 1])
  }
  if (!hasId) out.push('X-Request-Id', id)
  if (bodyLength !== undefined && !hasLength && head.hasBody) out.push('Content-Length', String(bodyLength))
  if (close) out.push('Connection', 'close')
  return out
}

// How the app asks its response to be relayed (X-Accel-Buffering, as nginx reads it): 'no'
// (no read-ahead), 'yes' (store and forward), or null: the default, write-through with
// read-ahead. Any other value is ignored, as nginx does.
function accelBuffering (head) {
  const value = headerValue(head.rawHeaders, 'x-accel-buffering')
  if (value === undefined) return null
  const word = value.toLowerCase()
  return word === 'yes' || word === 'no' ? word : null
}

// The hints of a worker's 103 Early Hints for res.writeEarlyHints(): { link: [...], name: value }.
// Null without a Link, which Node requires (and a 103 without one hints nothing).
function earlyHints (head) {
  const raw = head.rawHeaders
  const hints = { link: [] }
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase()
    if (lower === 'link') hints.link.push(...splitLinks(raw[i + 1]))
    else if (!HOP_BY_HOP.has(lower) && !FOR_THE_BALANCER.has(lower) &&
      lower !== 'content-length') {
      hints[lower] = hints[lower] === undefined
        ? raw[i + 1]
        : `${hints[lower]}, ${raw[i + 1]}`
    }
  }
  return hints.link.length > 0 ? hints : null
}

// A Link field value may list several links (RFC 8288 §3): split at the commas between them,
// not inside <...> or a quoted parameter.
function splitLinks (value) {
  const links = []
  let start = 0
  let inUri = false
  let inQuote = false
  for (let i = 0; i < value.length; i++) {
    const c = value[i]
    if (inQuote) {
      if (c === '\\') i++
      else if (c === '"') inQuote = false
    } else if (c === '"') inQuote = true
    else if (c === '<') inUri = true
    else if (c === '>') inUri = false
    else if (c === ',' && !inUri) {
      links.push(value.slice(start, i).trim())
      start = i + 1
    }
  }
  links.push(value.slice(start).trim())
  return links.filter((l) => l !== '')
}

function headerValue (raw, lowerName) {
  let value
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length === lowerName.length && raw[i].toLowerCase() === lowerName) {
      value = value === undefined ? raw[i + 1] : `${value}, ${raw[i + 1]}`
    }
  }
  return value
}

module.exports = {
  requestId,
  exchangeId,
  requestHead,
  attemptHead,
  switchingHead,
  toClient,
  accelBuffering,
  earlyHints,
  clientAddress,
  HOP_BY_HOP,
  EXCHANGE_HEADER
}
