'use strict'

// Closing the connection of a request answered before its body was read (413, 503), as nginx's
// lingering close: closing at once would make the kernel reset it and could destroy the unread
// answer (the client sees EPIPE/ECONNRESET). So the answer (Connection: close) is written, then
// what the client sends is dropped until the body ends, the client goes, LINGER_MS passes, or
// LINGER_IDLE_MS passes without a byte; past lingerBytes() reading stops (TCP holds the client
// back) and the idle bound closes it. Requests pipelined behind are never served (isLingering).

const MiB = 1024 * 1024
const LINGER_MS = 5000
const LINGER_IDLE_MS = 1000
const MIN_LINGER_BYTES = MiB

const lingering = new WeakSet() // the sockets of connections closing this way

function lingerBytes (maxBody) {
  return Math.max(maxBody, MIN_LINGER_BYTES)
}

function isLingering (socket) {
  return lingering.has(socket)
}

// `res` carries the whole answer, not ended yet: ended at the first bound.
function lingerThenClose (req, res, { maxBytes, ms = LINGER_MS, idleMs = LINGER_IDLE_MS }) {
  lingering.add(req.socket)
  let bytes = 0
  const onData = (chunk) => {
    bytes += chunk.length
    idle.refresh()
    if (bytes <= maxBytes) return
    req.removeListener('data', onData)
    req.pause()
  }
  const close = () => {
    clearTimeout(all)
    clearTimeout(idle)
    req.removeListener('data', onData)
    req.removeListener('end', close)
    res.removeListener('close', close)
    if (!res.writableEnded && !res.destroyed) res.end()
  }
  const all = setTimeout(close, ms)
  const idle = setTimeout(close, idleMs)
  req.on('data', onData)
  req.once('end', close)
  res.once('close', close)
  if (req.readableEnded) return close()
  req.resume()
}

module.exports = { lingerThenClose, isLingering, lingerBytes, LINGER_MS, LINGER_IDLE_MS, MIN_LINGER_BYTES }
