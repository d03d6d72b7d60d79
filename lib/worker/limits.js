'use strict'

// Limits the worker enforces on one response where no front does: --read-timeout (`read`, with --balancer
// none) and --max-request-time (`total`, also behind HAProxy). Either ends that request alone: 504 before
// its head, cut after. One sweep timer, running only while requests are open.

const SWEEP_MAX_MS = 1000

class RequestLimits {
  // { read, total } in ms (0: none). open(): the guard's { req, res, startedAt }. onCut(req, 'read'|'total').
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

  // The read clock runs only while the socket has nothing left to send: a slow client is not the app's fault.
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

  // Destroyed either way, so the app sees it close; before its head, a 504 is written on the socket first.
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
