'use strict'

// Overload control for the queue (--overload-control, on by default): when is the pool
// overloaded, and what changes then?
//
// The rule: never answer a request later, nor turn one away, where a first-come first-served
// queue (a FIFO) would answer it within what clients wait (`maxWait`). So each class's queue stays
// a FIFO until both of these hold (OverloadControl.update):
//
//   - More arrives than the workers take: in each quarter of the last window, more requests of
//     the class (and of the classes served before it) arrived than were given to workers.
//     Closed-loop clients never do that, however many: each sends its next request once the last
//     one is answered, so the queue they make keeps its length, and a FIFO serves them in turn.
//     Nor does a one-off burst: it fills one quarter.
//   - A FIFO can no longer answer in time: its newest request would be answered after `maxWait`
//     (it has waited so long, the requests ahead of it leave a pace apart, then it renders), its
//     oldest has waited too long to be, or a round of the workers' worth of clients gave up
//     waiting over the window (they wait less than `maxWait`).
//
// Then the queue stands. The requests already waiting are still served oldest first, as a FIFO
// would have served them; the requests that arrive later are served newest first (their clients
// are still there; an old one's may not be), and any queued request that can no longer be
// answered within `maxWait` gets 503 at once (cheap, and retryable elsewhere), except the requests
// one round of the workers serves next (Maurer, "Fail at Scale", ACM Queue 2015: adaptive LIFO
// with a queue timeout). It goes back to FIFO once the workers have taken as many as arrived over
// the last half window and a FIFO would answer its newest request in time again, or once it is
// empty. None of these depends on the order of service, so the requests that newest-first leaves
// waiting cannot keep it standing, as they would a judgment on waits: under newest-first those
// served wait little and those left wait long whatever the load, so CoDel's minimum wait over an
// interval would end the overload at once, and the longest wait never.
//
// What clients wait, when not given: a second, since pages are read by people, or 100 paces if
// longer, since a healthy queue at 80% load waits a few dozen paces; never longer than
// --queue-timeout, past which the balancer turns a request away itself. A pace is the time
// between two requests leaving a busy queue (Pace); a typical render, a pace per place.
//
// This module holds the state and the decisions; the Dispatcher applies them.

const MAX_WAIT_FLOOR_MS = 1000
const MAX_WAIT_PACES = 100

// The pace: the mean of the last GAPS_PER_PLACE gaps per place between two requests leaving the
// queue while it was never empty (so every place was busy), at least MIN_GAPS of them. What the
// queue did, rather than a model of it: renders of every length, a worker stuck on one render
// (its place just stops counting), time spent outside the app, all weigh as they slowed the
// queue. Counted in gaps, so that a burst of fast requests is forgotten after GAPS_PER_PLACE
// rounds of the workers whatever the time it took, and outweighed long before: one gap of the
// slow renders after it weighs as much as hundreds of its own.
const GAPS_PER_PLACE = 16
const MIN_GAPS = 32
const MAX_GAPS = 1024

class Pace {
  constructor () {
    this.ring = []
    this.held = [] // beside each gap, the requests the workers held as it ended (see held())
    this.next = 0
    this.cached = null // { count, ms, held }
  }

  add (gapMs, held = null) {
    if (this.ring.length < MAX_GAPS) {
      this.ring.push(gapMs)
      this.held.push(held)
    } else {
      this.ring[this.next] = gapMs
      this.held[this.next] = held
    }
    this.next = (this.next + 1) % MAX_GAPS
    this.cached = null
  }

  // Ms between two requests leaving a busy queue served by `places` places; null until known.
  ms (places) {
    return this.mean(places)?.ms ?? null
  }

  // The requests the workers held on average over the same gaps: the places that really served
  // the queue, where a worker's places are not fixed (--worker-concurrency above 1: it holds more
  // while its requests await I/O, one while it renders). Null until known.
  heldOn (places) {
    return this.mean(places)?.held ?? null
  }

  mean (places) {
    if (this.ring.length === 0) return null
    const count = Math.min(this.ring.length, Math.max(MIN_GAPS, GAPS_PER_PLACE * places), MAX_GAPS)
    if (this.cached && this.cached.count === count) return this.cached
    let sum = 0
    let held = 0
    let heldCount = 0
    for (let k = 1; k <= count; k++) {
      const i = (this.next - k + MAX_GAPS) % MAX_GAPS
      sum += this.ring[i]
      if (this.held[i] !== null) { held += this.held[i]; heldCount++ }
    }
    this.cached = { count, ms: sum / count, held: heldCount > 0 ? held / heldCount : null }
    return this.cached
  }
}

// The durations overload control works with, in milliseconds: each one the user gave (`given`:
// { maxWait, interval }), or else scaled with the pace. `pace(places)`: the pace in ms (null:
// unknown yet); `places()`: the places that serve the queue (workers.places(), the one count of
// capacity). Until the pace is known, and while no worker is in rotation, the scaled maximum wait
// is endless and nothing is judged.
class OverloadLimits {
  // `ceiling`: the longest a request may wait at all (--queue-timeout; Infinity: no limit). Past
  // it the balancer turns a request away itself, so clients cannot be taken to wait longer.
  constructor (given, { pace, places, ceiling = Infinity }) {
    this.given = given
    this.pace = pace
    this.places = places
    this.ceiling = ceiling
  }

  // { maxWait, window, render, places } as of now. `render`: the typical render (null: unknown),
  // a pace per place; `window`: how far back arrivals and services are compared, maxWait unless
  // given (its floor while maxWait is endless).
  current () {
    const places = this.places()
    const pace = places > 0 ? this.pace(places) : null
    const render = pace === null ? null : pace * places
    const maxWait = this.given.maxWait !== undefined
      ? this.given.maxWait
      : pace === null
        ? Infinity
        : Math.min(this.ceiling, Math.max(MAX_WAIT_FLOOR_MS, MAX_WAIT_PACES * pace))
    const window = this.given.interval !== undefined
      ? this.given.interval
      : Number.isFinite(maxWait)
        ? maxWait
        : MAX_WAIT_FLOOR_MS
    return { maxWait, window, render, places }
  }
}

// Counts over a sliding window, kept in SLICES slices: how many requests arrived, how many were
// given to a worker, how many were given up by their clients while they waited.
const SLICES = 16
const QUARTERS = 4

class Flow {
  constructor () {
    this.slices = [] // { start, arrived, served, gaveUp }, oldest first
  }

  add (now, window, what) {
    let s = this.slices[this.slices.length - 1]
    if (!s || now - s.start >= window / SLICES) {
      s = { start: now, arrived: 0, served: 0, gaveUp: 0 }
      this.slices.push(s)
    }
    s[what]++
    this.forget(now, window)
  }

  forget (now, window) {
    while (this.slices.length > 0 && this.slices[0].start < now - window) this.slices.shift()
  }

  // Over the last `window` ms: { arrived, served, gaveUp }, and `excess`: the arrivals not served
  // in each of its QUARTERS, the oldest first.
  sum (now, window) {
    this.forget(now, window)
    const total = { arrived: 0, served: 0, gaveUp: 0, excess: new Array(QUARTERS).fill(0) }
    for (const s of this.slices) {
      total.arrived += s.arrived
      total.served += s.served
      total.gaveUp += s.gaveUp
      const q = Math.min(QUARTERS - 1, Math.max(0, Math.floor((s.start - (now - window)) / window * QUARTERS)))
      total.excess[q] += s.arrived - s.served
    }
    return total
  }

  // Flow#sum of several flows (a class and those served before it), added up.
  static total (flows, now, window) {
    const total = flows[0].sum(now, window)
    for (const flow of flows.slice(1)) {
      const f = flow.sum(now, window)
      total.arrived += f.arrived
      total.served += f.served
      total.gaveUp += f.gaveUp
      f.excess.forEach((e, q) => { total.excess[q] += e })
    }
    return total
  }

  // When the oldest slice leaves the window (Infinity: none is kept).
  nextForgetAt (window) {
    return this.slices.length > 0 ? this.slices[0].start + window : Infinity
  }
}

// The state of one class's queue.
class OverloadControl {
  constructor () {
    this.flow = new Flow()
    this.standing = false
    this.since = null // when the queue began to stand
    this.stands = 0 // how many times the queue began to stand
  }

  // A request of this class arrived (a first arrival or a redispatch), was given to a worker,
  // or was given up by its client while it waited.
  arrived (now, { window }) { this.flow.add(now, window, 'arrived') }
  served (now, { window }) { this.flow.add(now, window, 'served') }
  gaveUp (now, { window }) { this.flow.add(now, window, 'gaveUp') }

  // Whether the queue stands now. `flow`: Flow#sum over the window for this class and those
  // served before it; `round`: the places that serve the queue; `tooLong`: a FIFO would answer
  // the newest request in it too late (its length, whatever the order); `late`: tooLong, or its
  // oldest request can no longer be answered in time, or clients gave up on it.
  // It begins to stand once `late` and more arrived than the workers took in each quarter of the
  // window, by more than a quarter of a round: a burst, or closed-loop clients arriving together,
  // fill one quarter only. It stops once the workers took as many as arrived over the last half
  // of the window and the queue is no longer `tooLong`, or once it is empty: none of these depends
  // on the order of service, so the requests left waiting by newest-first do not keep it standing.
  update (now, { flow, round, tooLong, late }) {
    if (!this.standing && late && flow.excess.every((e) => e > round / QUARTERS)) {
      this.standing = true
      this.since = now
      this.stands++
    } else if (this.standing && flow.excess.slice(QUARTERS / 2).reduce((a, b) => a + b, 0) <= 0 && !tooLong) {
      this.standing = false
    }
    return this.standing
  }

  // The queue is empty: nobody waits to be served in any order. Whatever comes next is judged
  // afresh, as a FIFO first.
  emptied () {
    this.standing = false
  }
}

module.exports = { OverloadControl, OverloadLimits, Pace, Flow }
