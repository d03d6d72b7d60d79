'use strict'

// The balancer's limits on a request under way, on one sweep timer that runs only while something
// is watched: --read-timeout (no worker byte while the balancer wants some: not while it holds off
// for a slow client, as nginx's proxy_read_timeout), --max-request-time (0: off), both on an
// attempt; and --send-timeout (nginx's send_timeout) on a response whose client takes nothing of
// the bytes waiting for it. The sweep runs every quarter of the shortest limit, within 10 ms and
// 1 s: each limit is acted on at most that period past it.

const SWEEP_MIN_MS = 10
const SWEEP_MAX_MS = 1000

class Deadlines {
  // Limits in ms, 0 for none. onSendTimeout(): a client was cut off for --send-timeout.
  constructor ({ read = 0, total = 0, send = 0 }, { onSendTimeout = () => {} } = {}) {
    this.read = read
    this.total = total
    this.send = send
    this.onSendTimeout = onSendTimeout
    const shortest = Math.min(...[read, total, send].filter((ms) => ms > 0))
    this.period = Math.max(SWEEP_MIN_MS, Math.min(SWEEP_MAX_MS, Math.ceil(shortest / 4)))
    this.attempts = new Set() // they have startedAt, readSince (null while paused) and timedOut(which, ms)
    this.sends = new Set() // response relays with bytes waiting: progressAt, and res to cut off
    this.timer = null
  }

  watchAttempt (attempt) {
    if (this.read === 0 && this.total === 0) return
    this.attempts.add(attempt)
    this.arm()
  }

  unwatchAttempt (attempt) {
    this.attempts.delete(attempt)
  }

  // `relay` has bytes waiting for its client: its clock runs from now.
  watchSend (relay) {
    if (this.send === 0) return
    relay.progressAt = performance.now()
    this.sends.add(relay)
    this.arm()
  }

  unwatchSend (relay) {
    this.sends.delete(relay)
  }

  arm () {
    if (this.timer !== null) return
    this.timer = setTimeout(() => this.sweep(), this.period)
    this.timer.unref()
  }

  // A throw from one expiry must not stop the sweep for the rest: it re-arms regardless.
  sweep () {
    this.timer = null
    try {
      this.expire(performance.now())
    } finally {
      if (this.attempts.size > 0 || this.sends.size > 0) this.arm()
    }
  }

  expire (now) {
    for (const attempt of this.attempts) {
      const which = this.total > 0 && now - attempt.startedAt >= this.total
        ? 'total'
        : this.read > 0 && attempt.readSince !== null && now - attempt.readSince >= this.read ? 'read' : null
      if (which === null) continue
      this.attempts.delete(attempt)
      attempt.timedOut(which, which === 'total' ? this.total : this.read)
    }
    for (const relay of this.sends) {
      if (now - relay.progressAt < this.send) continue
      this.sends.delete(relay)
      this.onSendTimeout()
      relay.res.destroy()
    }
  }
}

module.exports = { Deadlines }
