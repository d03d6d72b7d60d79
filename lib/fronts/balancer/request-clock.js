'use strict'

// The limits on each exchange with a worker, as the balancer relays it: --read-timeout, the
// longest a worker may leave its response without a byte (before the head, or between two reads)
// while the balancer is reading it, and --max-request-time, the longest the exchange may last at
// all (0: each off). As with nginx's proxy_read_timeout, the read clock runs only while the
// balancer wants the worker's bytes: not while it holds off a worker for a slow client (that is
// --send-timeout's, relay.js). One sweep timer watches every attempt (a timer each would cost
// 10,000 streams 10,000 timers), running only while some are watched; an attempt is ended between
// its limit and a quarter of it later (at most a second).

const SWEEP_MAX_MS = 1000

class RequestClock {
  // read, total: ms (0: none).
  constructor ({ read, total }) {
    this.read = read
    this.total = total
    const shortest = Math.min(...[read, total].filter((ms) => ms > 0))
    this.period = Math.max(10, Math.min(SWEEP_MAX_MS, Math.ceil(shortest / 4)))
    this.watched = new Set()
    this.timer = null
  }

  // A clock for these limits, or null when both are off.
  static of (limits) {
    return limits.read > 0 || limits.total > 0 ? new RequestClock(limits) : null
  }

  // `attempt` began: it has `startedAt`, `readSince` (null while paused) and timedOut(which, ms).
  watch (attempt) {
    this.watched.add(attempt)
    if (this.timer === null) this.arm()
  }

  unwatch (attempt) {
    this.watched.delete(attempt)
  }

  arm () {
    this.timer = setTimeout(() => this.sweep(), this.period)
    this.timer.unref()
  }

  sweep () {
    this.timer = null
    const now = performance.now()
    for (const attempt of this.watched) {
      const which = this.total > 0 && now - attempt.startedAt >= this.total
        ? 'total'
        : this.read > 0 && attempt.readSince !== null && now - attempt.readSince >= this.read ? 'read' : null
      if (!which) continue
      this.watched.delete(attempt)
      attempt.timedOut(which, which === 'total' ? this.total : this.read)
    }
    if (this.watched.size > 0) this.arm()
  }
}

module.exports = { RequestClock }
