'use strict'

// --read-timeout (no worker byte while the balancer wants some: not while it holds off for a slow
// client, as nginx's proxy_read_timeout) and --max-request-time (0: off). One sweep timer for all
// attempts, run only while some are watched; an attempt ends within a quarter limit (≤ 1 s) past it.

const SWEEP_MAX_MS = 1000

class RequestClock {
  constructor ({ read, total }) {
    this.read = read
    this.total = total
    const shortest = Math.min(...[read, total].filter((ms) => ms > 0))
    this.period = Math.max(10, Math.min(SWEEP_MAX_MS, Math.ceil(shortest / 4)))
    this.watched = new Set()
    this.timer = null
  }

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
