'use strict'

// How the connection of a request answered before its body was read closes (413 over
// --max-body, 503 over --body-budget or a full queue): as nginx's lingering close does. Closing
// at once while the body still arrives makes the kernel reset the connection, and a reset can
// destroy the answer in the client's socket before the client has read it: Node's http client
// then sees EPIPE or ECONNRESET instead of the 413 or the 503 and its Retry-After.
//
// So the answer is written whole (it says Connection: close), and the balancer then reads and
// drops whatever the client still sends, until the body has ended or the client has gone, and
// within these bounds:
//   LINGER_MS        5 s in all
//   LINGER_IDLE_MS   1 s without a byte closes it
//   lingerBytes()    --max-body, at least 1 MiB, is read and dropped at most: never more than an
//                    accepted body would have cost, and none of it kept (nothing is held on the
//                    body budget). Past it the balancer stops reading: TCP holds the client's
//                    sending back (no reset while it may still be reading the answer), and the
//                    connection closes LINGER_IDLE_MS later.
// Then the answer is ended and Node closes the connection. Requests a client pipelines behind
// the body are never served (isLingering).

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

// `res` carries the whole answer, not ended yet; it is ended at the first bound.
function lingerThenClose (req, res, { maxBytes, ms = LINGER_MS, idleMs = LINGER_IDLE_MS }) {
  lingering.add(req.socket)
  let bytes = 0
  const onData = (chunk) => {
    bytes += chunk.length
    idle.refresh()
    if (bytes <= maxBytes) return
    // Enough dropped: read no more, and close once the idle bound has passed.
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
