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
// Each class's queue is judged on its own (a busy high class must not hide a low class that
// stands behind it), with the classes served before it. Overload (at the end) holds the state and
// the decisions: the Dispatcher tells it what its queue does (the requests that arrive, are given
// to workers, are given up by their clients, leave it: the gaps between them are the pace), asks
// it which end of a class to serve, and lets it turn away whoever can no longer be answered in time.

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

// Overload control of the Dispatcher's queue: the state above, per class (byClass) and for the
// pool (the pace, the limits), and the judgment on it. The Dispatcher tells it what happens to
// its queue, and asks it which end of a class to serve (newestFirst, lastServed: the callbacks of
// ClassQueues) and, through police(), whom to turn away.
class Overload {
  // `given`: { interval, maxWait } (./options.js); `ceiling`: see OverloadLimits; `queue`: the
  // Dispatcher's ClassQueues; `workers`: its WorkerSet; `clock`: its clock. `turnAway(job)`: the
  // queued `job` leaves unserved (queue_shed); `onShed()`: a pass of police() turned some away.
  constructor ({ given, ceiling, queue, workers, clock, turnAway, onShed }) {
    this.queue = queue
    this.workers = workers
    this.clock = clock
    this.turnAway = turnAway
    this.onShed = onShed
    this.pace = new Pace()
    this.busySince = null // when the queue last stopped being empty (null: it is empty)
    this.lastTakenAt = null // when a worker last took a request from the queue
    this.limits = new OverloadLimits(given, {
      pace: () => this.pace.ms(this.workers.places()),
      places: () => this.places(),
      ceiling
    })
    this.byClass = queue.classes.map(() => new OverloadControl())
    this.newestFirst = (c) => this.servesNewest(c)
    this.lastServed = (c) => this.lastServedOf(c)
    this.timer = null
    this.timerAt = Infinity
  }

  // ---- what happened --------------------------------------------------------------------------

  // `job` arrived (a first arrival or a redispatch), was given to a worker, or was given up by
  // its client while it waited. A long-lived request is not counted: its pace is not the renders'.
  arrived (job) { this.count(job, 'arrived') }
  served (job) { this.count(job, 'served') }
  gaveUp (job) { this.count(job, 'gaveUp') }

  count (job, what) {
    if (!job.longLived) this.byClass[job.priority][what](this.clock.now(), this.limits.current())
  }

  // A request joined the queue (not a stream's FIFO): the first one makes it busy.
  enqueued (now) {
    if (this.queue.length === 1) this.busySince = now
  }

  // `job` left the queue: a class left empty is judged afresh.
  left (job) {
    if (this.queue.length === 0) this.busySince = null
    if (this.queue.classes[job.priority].length === 0) this.byClass[job.priority].emptied()
  }

  // A worker takes a request from the queue: the gap since the last one is the pace, if the
  // queue has not been empty meanwhile (so that every place was busy all along).
  // Beside it, the requests the workers hold once this one is given (this one counted), where
  // their places are not fixed (places()).
  taken () {
    const now = this.clock.now()
    if (this.lastTakenAt !== null && this.busySince !== null && this.lastTakenAt >= this.busySince) {
      this.pace.add(now - this.lastTakenAt, this.workers.byCpu > 0 ? this.workers.rendering() + 1 : null)
    }
    this.lastTakenAt = now
  }

  // The Dispatcher stops: no timer is left.
  stop () {
    this.clock.clearTimeout(this.timer)
    this.timer = null
  }

  // ---- the judgment ---------------------------------------------------------------------------

  // The places that serve the queue: a worker's maxconn; but a worker admitted by CPU
  // (--worker-concurrency above 1) holds up to K while its requests await I/O and one while it
  // renders, so there it is what the workers held on average while the queue waited (Little's
  // law: a request holds its place a pace per place). Counting K for a worker that renders would
  // take a render for K times its length, and turn away requests a FIFO answers in time. Until
  // that is known, every place.
  places () {
    const places = this.workers.places()
    if (this.workers.byCpu === 0 || places === 0) return places
    return Math.min(places, this.pace.heldOn(places) ?? places)
  }

  // Decide, class by class, whether the queue stands; where it does, turn away whoever can no
  // longer be answered in time. Runs after each arrival in the queue, and from a timer while the
  // queue is not empty, so that a queue nobody leaves (every worker on a long render) is judged
  // too, and a queue that stands goes back to FIFO once the workers keep up.
  police () {
    if (this.queue.length === 0) return
    const now = this.clock.now()
    const limits = this.limits.current()
    let next = Infinity
    let shed = false
    for (let c = 0; c < this.byClass.length; c++) {
      if (this.queue.classes[c].length === 0) continue
      const beyond = this.beyondOneRound(c, limits.places)
      const stood = this.byClass[c].standing
      // A queue that stood until now sheds what can no longer be answered in time before it is
      // handed back to FIFO order, which would answer those first, and late.
      if ((this.judge(c, now, limits) || stood) && beyond > 0) {
        const late = this.tooLate(c, now, limits, beyond)
        for (const job of late) this.turnAway(job)
        if (late.length > 0) this.judge(c, now, limits)
        shed = shed || late.length > 0
      }
      next = Math.min(next, this.nextJudgedAt(c, limits))
    }
    if (next < Infinity) this.armTimer(next)
    if (shed) this.onShed()
  }

  // Whether the queue of class `c` stands now (OverloadControl.update, with what it is judged by).
  judge (c, now, limits) {
    const flow = Flow.total(this.byClass.slice(0, c + 1).map((o) => o.flow), now, limits.window)
    const judged = limits.render !== null && this.beyondOneRound(c, limits.places) > 0
    const tooLong = judged && this.fifoTooLong(c, now, limits)
    const late = tooLong || (judged && (this.oldestLate(c, now, limits) || flow.gaveUp >= limits.places))
    return this.byClass[c].update(now, { flow, round: limits.places, tooLong, late })
  }

  // Whether class `c` is served newest first now: while its queue stands, once the requests
  // that were waiting when it began to stand are gone (served oldest first, as a FIFO would have
  // served them, or turned away). A redispatched request put back in front is served next either
  // way.
  servesNewest (c) {
    const head = this.queue.classes[c].head
    return head !== null && this.byClass[c].standing && !this.servedInOrder(c, head)
  }

  // Whether the queued `node` of class `c`, whose queue stands, is served in arrival order: it was
  // waiting when the queue began to stand, or it was put back in front.
  servedInOrder (c, node) {
    return node.servedNext || arrivalOf(node.item) <= this.byClass[c].since
  }

  // The node of class `c` (not empty) that would be served last: the newest, or while the queue
  // stands, the oldest of those served newest first.
  lastServedOf (c) {
    const q = this.queue.classes[c]
    if (!this.byClass[c].standing) return q.tail
    for (let node = q.head; node; node = node.next) if (!this.servedInOrder(c, node)) return node
    return q.tail
  }

  // Whether a FIFO would answer the newest request of class `c` after `maxWait`: it has waited
  // this long, the requests ahead of it leave one pace apart, then it renders. The queue's length
  // decides, and the newest request's age, neither of which the order of service changes.
  fifoTooLong (c, now, limits) {
    const newest = this.newestArrival(c)
    return newest !== null &&
      now - newest + (this.queuedAhead(c) - 1) * limits.render / limits.places > lastStart(limits)
  }

  // Whether the longest-waiting request of class `c` can no longer be answered within `maxWait`.
  oldestLate (c, now, limits) {
    const oldest = this.oldestArrival(c)
    return oldest !== null && now - oldest > lastStart(limits)
  }

  // The requests of class `c` that can no longer be answered within `maxWait` (lastStart), the
  // longest waiting first, at most `max` of them. The class is walked from its oldest end and the
  // walk stops at the first request young enough (those behind it are younger), except for
  // redispatched requests put back in front, which may be younger than those behind them.
  tooLate (c, now, limits, max) {
    const late = []
    for (let node = this.queue.classes[c].head; node && late.length < max; node = node.next) {
      if (now - arrivalOf(node.item) > lastStart(limits)) late.push(node.item)
      else if (!node.servedNext) break
    }
    return late
  }

  // When the judgment of class `c` may change with nothing arriving or leaving: its oldest
  // request becomes late, or a slice of what the window counts (for it and the classes before
  // it) is forgotten.
  nextJudgedAt (c, limits) {
    let at = Infinity
    const oldest = this.oldestArrival(c)
    if (oldest !== null && limits.render !== null) at = oldest + lastStart(limits)
    const { window } = limits
    for (let k = 0; k <= c; k++) at = Math.min(at, this.byClass[k].flow.nextForgetAt(window))
    return at
  }

  // How many requests of class `c` and of the classes ahead of it are more than one round of the
  // workers serves. A queue that one round serves is not judged: its wait is the workers' own
  // (long renders, a restart), not too many arrivals, and turning it away would shorten nobody's.
  // Nor does a shedding pass turn away more than that: requests that all waited too long together
  // (a late timer, a burst) must not take the last round's with them.
  beyondOneRound (c, places) {
    return Math.max(0, this.queuedAhead(c) - places)
  }

  // How many requests of class `c` and of the classes served before it are queued.
  queuedAhead (c) {
    let n = 0
    for (let k = 0; k <= c; k++) n += this.queue.classes[k].length
    return n
  }

  // When the request of class `c` that arrived last arrived (null: none is queued). Redispatched
  // requests, put back at the end served next, arrived before it.
  newestArrival (c) {
    let newest = null
    for (let node = this.queue.classes[c].tail; node; node = node.prev) {
      const at = arrivalOf(node.item)
      if (newest === null || at > newest) newest = at
      if (!node.servedNext) break
    }
    return newest
  }

  // When the longest-waiting request of class `c` arrived (null: none is queued).
  oldestArrival (c) {
    let oldest = null
    for (let node = this.queue.classes[c].head; node; node = node.next) {
      const at = arrivalOf(node.item)
      if (oldest === null || at < oldest) oldest = at
      if (!node.servedNext) break
    }
    return oldest
  }

  // One timer, at the earliest moment police() has something to do.
  armTimer (at) {
    if (this.timer && this.timerAt <= at) return
    this.clock.clearTimeout(this.timer)
    this.timerAt = at
    this.timer = this.clock.setTimeout(() => {
      this.timer = null
      this.timerAt = Infinity
      this.police()
    }, Math.max(0, at - this.clock.now()) + 1) // +1: a timer may fire a fraction of a ms early
    this.timer.unref()
  }
}

// How long a request may have waited and still be answered within `maxWait`: if the next worker
// to come free takes it (a pace from now) and its render is typical.
function lastStart ({ maxWait, render, places }) {
  return maxWait - render - render / places
}

// When a request's client began to wait for it: its arrival at the balancer (request.js), or,
// for a request without one, when it was queued.
function arrivalOf (job) {
  return job.arrivedAt ?? job.queuedAt
}

module.exports = { Overload, OverloadControl, OverloadLimits, Pace, Flow }
