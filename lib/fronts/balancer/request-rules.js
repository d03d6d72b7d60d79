'use strict'

// What the front refuses before a request may take a place in the queue, beyond what Node's
// strict HTTP parser already refuses (malformed syntax, conflicting lengths, oversized heads:
// 400 or 431). Each answer is the front's own; none of these requests reaches a worker.

// The reason (one of replies.js's) a request is refused for, or null if it may go on.
function refusalOf (req) {
  if (countHeader(req.rawHeaders, 'host') > 1) return 'duplicate_host'
  // Node hands an Upgrade request to 'request' when nothing listens for 'upgrade'. Other
  // upgrades (h2c) are ignored, as RFC 9110 §7.8 allows: the header is hop-by-hop and dropped,
  // and the request is served over HTTP/1.1. A WebSocket client would take such an answer as a
  // failed handshake anyway, after a render; it is told at once instead.
  if (upgradesTo(req, 'websocket')) return 'websocket'
  return null
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

module.exports = { refusalOf }
