'use strict'

// Overload control for the queue (--overload-control, on by default): when does the queue stand?
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
//     and retryable elsewhere), except those one round of the workers serves next, and the
//     newest request is served first (LIFO): its client is still there, and an old one's may
//     not be.
//
// Serving newest first keeps the waits of those served short, so they can no longer tell when
// the pressure is over. The queue stops standing once, for a whole `interval`, no request in it
// has waited longer than `target` (none turned away, none served late, the oldest one waiting
// younger): a mirror of how it began. A queue that merely empties for a moment under a steady
// overload keeps standing, so it is not handed back to FIFO order between two bursts.
//
// How long is too long depends on the pool. A queue moves at its pace: the typical render
// divided by the workers sharing the queue. At 80% load the waits of a healthy queue are a few
// dozen paces, so a pool of one worker rendering for a second waits seconds in normal operation,
// and fixed limits of a few hundred milliseconds would take it for overloaded and turn requests
// away far below capacity. So each duration the user left unset is a multiple of the pace
// (OverloadLimits), never less than its floor: for a pool of many workers rendering in tens of
// milliseconds the floors hold. And a queue that one round of the workers serves is not judged
// at all (Dispatcher.judgedOldest): its wait is the workers' own, not too many arrivals.
//
// This module holds the state and the decisions; the Dispatcher applies them.

// Each duration left unset: PACES × the pace, at least FLOOR_MS. The floors are the limits for
// renders of tens of milliseconds on a dozen workers (a pace of about 2 ms); the multiples keep
// a healthy queue from standing at 80% load whatever the pool's size and renders (the dispatcher
// on a simulated clock: bench/overload-sim.js; measured for real in bench/overload.js).
const FLOOR_MS = { interval: 400, target: 100, maxWait: 200 }
const PACES = { interval: 100, target: 50, maxWait: 100 }

// How long a worker typically holds a request: the geometric mean of recent renders (an
// exponentially weighted mean of their logarithms), which a rare render of seconds among
// renders of milliseconds moves little.
const RENDER_WEIGHT = 1 / 32

class RenderTime {
  constructor () {
    this.logMean = null
  }

  add (ms) {
    const x = Math.log(Math.max(ms, 1))
    this.logMean = this.logMean === null ? x : this.logMean + (x - this.logMean) * RENDER_WEIGHT
  }

  // null until a render was seen.
  get ms () { return this.logMean === null ? null : Math.exp(this.logMean) }
}

// The durations overload control works with, in milliseconds: each one the user gave (`given`),
// or else scaled with `pace()` (ms between two requests leaving the queue when every worker is
// busy) and no less than its floor.
class OverloadLimits {
  constructor (given, pace) {
    this.given = given
    this.pace = pace
  }

  // { interval, target, maxWait } as of now, from one measure of the pace.
  current () {
    const pace = this.pace()
    const scaled = (name) => this.given[name] !== undefined ? this.given[name] : Math.max(FLOOR_MS[name], PACES[name] * pace)
    return { interval: scaled('interval'), target: scaled('target'), maxWait: scaled('maxWait') }
  }
}

// The state of one class's queue. `limits` in each call: OverloadLimits#current().
class OverloadControl {
  constructor () {
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
  left (waited, now, how, { target }) {
    if (this.standing) {
      if (waited > target || how === 'turned-away') this.badAt = now
    } else if (how === 'served' && waited <= target) {
      this.goodAt = now
    }
  }

  // Whether the queue stands now, given when its oldest request was queued (null: it is empty).
  update (now, oldestQueuedAt, { interval, target }) {
    if (!this.standing) {
      if (oldestQueuedAt === null || now - this.goodAt < interval) return false
      this.standing = true
      this.badAt = now
      this.stands++
      return true
    }
    if (oldestQueuedAt !== null && now - oldestQueuedAt > target) this.badAt = now
    if (now - this.badAt < interval) return true
    this.standing = false
    this.goodAt = now
    return false
  }

  // When update() may next change its answer, if nothing else happens meanwhile (the limits
  // may have changed by then: update() is simply asked again).
  nextChangeAt ({ interval }) {
    return (this.standing ? this.badAt : this.goodAt) + interval
  }

  // Whether a request queued at `queuedAt` has waited too long, the queue standing.
  tooOld (queuedAt, now, { maxWait }) { return now - queuedAt > maxWait }
}

module.exports = { OverloadControl, OverloadLimits, RenderTime, FLOOR_MS, PACES }
