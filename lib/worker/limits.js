'use strict'

// The limits on one response that the worker itself enforces where no front of the pool's relays
// it: --read-timeout (`read`: the longest the app may leave its response without a new byte while
// its client takes what it was sent) with --balancer none, and --max-request-time (`total`: the
// longest a response may last) with none and behind HAProxy, whose `timeout server` is the read
// limit there. Either ends that request alone: 504 when nothing was sent yet, the response cut
// otherwise; the app sees its response's 'close'; the worker and its other requests go on. One
// sweep timer for every open request, running only while some are open.

const SWEEP_MAX_MS = 1000

class RequestLimits {
  // limits: { read, total } in ms (0: none). open(): the guard's open requests, { req, res,
  // startedAt }. onCut(req, which): told for each request a limit ended ('read' or 'total').
  constructor ({ read, total }, { open, onCut = () => {} }) {
    this.read = read
    this.total = total
    this.open = open
    this.onCut = onCut
    this.period = Math.max(10, Math.min(SWEEP_MAX_MS, Math.ceil(Math.min(...[read, total].filter((ms) => ms > 0)) / 4)))
    this.progress = new WeakMap() // res → { bytes, at }: what its socket had been given, and when that last grew
    this.timer = null
  }

  get enabled () { return this.read > 0 || this.total > 0 }

  // A request began: the sweep runs while any is open.
  watch () {
    if (!this.enabled || this.timer !== null) return
    this.timer = setTimeout(() => this.sweep(), this.period)
    this.timer.unref()
  }

  sweep () {
    this.timer = null
    const now = performance.now()
    let any = false
    for (const { req, res, startedAt } of this.open()) {
      any = true
      const which = this.overdue(res, startedAt, now)
      if (which) this.cut(req, res, which)
    }
    if (any) this.watch()
  }

  // 'total', 'read' or null. The read clock runs only while the socket has nothing left to send:
  // a client that does not take what it was sent is the send timeout's business, not the app's.
  overdue (res, startedAt, now) {
    if (this.total > 0 && now - startedAt >= this.total) return 'total'
    if (this.read === 0) return null
    const socket = res.socket
    const bytes = socket ? socket.bytesWritten : 0
    const seen = this.progress.get(res) ?? { bytes: 0, at: startedAt }
    this.progress.set(res, seen)
    if (bytes !== seen.bytes || socket?.writableLength > 0) {
      seen.bytes = bytes
      seen.at = now
      return null
    }
    return now - seen.at >= this.read ? 'read' : null
  }

  // The response is destroyed either way, so that the app sees it close unfinished (its request's
  // signal aborts); before its head, the client first gets a 504 of the worker's own, written on
  // the connection itself.
  cut (req, res, which) {
    this.onCut(req, which)
    const socket = res.socket
    if (!res.headersSent && socket && !socket.destroyed && socket.writableLength === 0) {
      const body =
        'the app sent no answer within ' +
          `the ${which === 'read' ? 'read timeout (--read-timeout)' : 'request time limit (--max-request-time)'}\n`
      socket.write('HTTP/1.1 504 Gateway Timeout\r\ncontent-type: text/plain; ' +
        `charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
    }
    res.destroy()
  }
}

module.exports = { RequestLimits }
