'use strict'

// What the front refuses before a request may queue, beyond Node's strict parser (400/431); none of
// these reaches a worker. An absolute-form target decides the host, not Host (RFC 9112 §3.2.2).

// The replies.js reason a request is refused for, or null.
function refusalOf (req) {
  if (countHeader(req.rawHeaders, 'host') > 1) return 'duplicate_host'
  const host = req.headers.host
  if (host !== undefined && !AUTHORITY.test(host) && !isAbsolute(req.url)) return 'invalid_host'
  if (targetOf(req) === null) return 'invalid_target'
  // Chunked is the only coding served (others, "identity, chunked" included: 501, as nginx).
  const coding = req.headers['transfer-encoding']
  if (coding !== undefined && String(coding).trim().toLowerCase() !== 'chunked') return 'transfer_coding'
  // A WebSocket handshake reaching here is malformed or this Node cannot route upgrades. Other
  // upgrades (h2c) are ignored, as RFC 9110 §7.8 allows.
  if (!req.upgrade && upgradesTo(req, 'websocket')) {
    return req.socket.server?.upgradesWebSockets ? 'bad_upgrade' : 'websocket'
  }
  return null
}

// A WebSocket opening handshake (RFC 6455 §4.1): a GET asking to upgrade the connection to it.
function isWebSocketUpgrade (req) {
  return req.method === 'GET' && upgradesTo(req, 'websocket') && listsToken(req.headers.connection, 'upgrade')
}

function listsToken (value, token) {
  return value !== undefined && String(value).toLowerCase().split(',').some((t) => t.trim() === token)
}

// host[:port]: a name, IPv4 or a bracketed IPv6 address.
const AUTHORITY = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/
const ABSOLUTE = /^[a-z][a-z0-9+.-]*:/i

function isAbsolute (url) { return ABSOLUTE.test(url) }

// { url: path and query, host } as the worker gets it: for an absolute form, its authority and
// origin form, as nginx does. null: a target not served.
function targetOf (req) {
  if (!isAbsolute(req.url)) return { url: req.url, host: req.headers.host }
  if (!/^https?:\/\/[^/\\]/i.test(req.url)) return null // the URL parser would mend `http:///x` into a host
  let url
  try { url = new URL(req.url) } catch { return null }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.host === '' || url.username || url.password) {
    return null
  }
  return { url: `${url.pathname}${url.search}`, host: url.host }
}

function countHeader (raw, lowerName) {
  let n = 0
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length === lowerName.length && raw[i].toLowerCase() === lowerName) n++
  }
  return n
}

function upgradesTo (req, protocol) {
  const value = req.headers.upgrade
  if (value === undefined) return false
  return String(value).toLowerCase().split(',').some((p) => p.trim().split('/')[0] === protocol)
}

module.exports = { refusalOf, targetOf, isWebSocketUpgrade }
