'use strict'

// What the front refuses before a request may take a place in the queue, beyond what Node's
// strict HTTP parser already refuses (malformed syntax, conflicting lengths, oversized heads:
// 400 or 431; and, decided by probes of each, folded header lines, a bare LF ending a line, a
// version other than HTTP/1.0 and 1.1: 400). Each answer is the front's own; none of these
// requests reaches a worker. And where a request names its target in absolute form, the target
// decides which host is meant (RFC 9112 §3.2.2), not its Host header (targetOf).

// The reason (one of replies.js's) a request is refused for, or null if it may go on.
function refusalOf (req) {
  if (countHeader(req.rawHeaders, 'host') > 1) return 'duplicate_host'
  // A Host with no authority in it, for a target that has one (every http target): RFC 9112 §3.2.
  const host = req.headers.host
  if (host !== undefined && !AUTHORITY.test(host) && !isAbsolute(req.url)) return 'invalid_host'
  if (targetOf(req) === null) return 'invalid_target'
  // Chunked is the one transfer coding a request may carry here (anything else, "identity,
  // chunked" included, is one the front does not implement: 501, as nginx answers).
  const coding = req.headers['transfer-encoding']
  if (coding !== undefined && String(coding).trim().toLowerCase() !== 'chunked') return 'transfer_coding'
  // A WebSocket handshake goes to the 'upgrade' path (isWebSocketUpgrade, tunnel.js); one that
  // reaches a request here is malformed (not a GET, no Connection: upgrade), or this Node.js
  // cannot route upgrades by protocol. Other upgrades (h2c) are ignored, as RFC 9110 §7.8
  // allows: the header is hop-by-hop and dropped, and the request is served over HTTP/1.1.
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

// The request's target as the worker is given it: { url: path and query, host }. In absolute
// form (`GET http://shop.example/a HTTP/1.1`) the target's authority is the host, whatever Host
// says, and the worker gets the origin form, as nginx passes it on. null: a target the front
// does not serve (another scheme, no authority, an unparsable one).
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
