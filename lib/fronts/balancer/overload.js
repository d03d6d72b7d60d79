'use strict'

// Overload control for the queue (--overload-control): when does the queue stand?
//
// A FIFO queue under a standing backlog serves every request just before its client gives up
// (a browser, an upstream proxy): the workers stay busy and almost nothing they render is still
// wanted. Two known cures, combined here (Maurer, "Fail at Scale", ACM Queue 2015; CoDel,
// Nichols & Jacobson 2012):
//
//   - Watch how long requests wait, not how many wait. A queue is good while it empties now and
//     then, or still serves some request within `target`. Once it has gone `interval` doing
//     neither, it stands: the pool is taking in more than it can render.
//   - While it stands, requests queued longer than `maxWait` are answered 503 at once (cheap,
//     and retryable elsewhere), and the newest request is served first (LIFO): its client is
//     still there, and an old one's may not be.
//
// Serving newest first keeps the waits of those served short, so they can no longer tell when
// the pressure is over. The queue stops standing once, for a whole `interval`, no request in it
// has waited longer than `target` (none turned away, none served late, the oldest one waiting
// younger): a mirror of how it began. A queue that merely empties for a moment under a steady
// overload keeps standing, so it is not handed back to FIFO order between two bursts.
//
// This module holds the state and the decision; the Dispatcher applies it.

class OverloadControl {
  // interval, target, maxWait: milliseconds.
  constructor ({ interval, target, maxWait }) {
    this.interval = interval
    this.target = target
    this.maxWait = maxWait
    this.standing = false
    this.goodAt = performance.now() // not standing: the last moment the queue was empty or kept up
    this.badAt = 0 // standing: the last moment a request in it had waited longer than `target`
    this.stands = 0 // how many times the queue began to stand
  }

  // The queue is empty, as of `now`.
  emptied (now) {
    if (!this.standing) this.goodAt = now
  }

  // A request left the queue after `waited` ms; `how`: served, turned-away, or cancelled (its
  // client went away).
  left (waited, now, how) {
    if (this.standing) {
      if (waited > this.target || how === 'turned-away') this.badAt = now
    } else if (how === 'served' && waited <= this.target) {
      this.goodAt = now
    }
  }

  // Whether the queue stands now, given when its oldest request was queued (null: it is empty).
  update (now, oldestQueuedAt) {
    if (!this.standing) {
      if (oldestQueuedAt === null || now - this.goodAt < this.interval) return false
      this.standing = true
      this.badAt = now
      this.stands++
      return true
    }
    if (oldestQueuedAt !== null && now - oldestQueuedAt > this.target) this.badAt = now
    if (now - this.badAt < this.interval) return true
    this.standing = false
    this.goodAt = now
    return false
  }

  // When update() may next change its answer, if nothing else happens meanwhile.
  nextChangeAt () {
    return (this.standing ? this.badAt : this.goodAt) + this.interval
  }

  // Whether a request queued at `queuedAt` has waited too long, the queue standing.
  tooOld (queuedAt, now) { return now - queuedAt > this.maxWait }
}

module.exports = { OverloadControl }
