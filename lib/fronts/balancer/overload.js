'use strict'

// Overload control of the queue (--overload-control; docs/guide/embedded-balancer.md). Each class's
// queue stays a FIFO until more arrives than the workers take in every quarter of the window AND a
// FIFO could no longer answer within `maxWait`. Then the queue "stands": those already waiting are
// served oldest first, later arrivals newest first, and a queued request that can no longer be
// answered in time gets 503 at once, except those one round of the workers serves next (adaptive
// LIFO with a queue timeout: Maurer, "Fail at Scale", ACM Queue 2015). Neither test depends on the
// order of service, so the requests newest-first leaves waiting cannot keep the queue standing.
// `maxWait` when not given: max(1 s, 100 paces), never past --queue-timeout.

const MAX_WAIT_FLOOR_MS = 1000
const MAX_WAIT_PACES = 100

// The pace: the mean gap between two requests leaving a never-empty queue, over the last
// GAPS_PER_PLACE gaps per place (at least MIN_GAPS). Counted in gaps, so a burst is soon outweighed.
const GAPS_PER_PLACE = 16
const MIN_GAPS = 32
const MAX_GAPS = 1024

class Pace {
  constructor () {
    this.ring = []
    this.held = [] // beside each gap, the requests the workers held as it ended (see heldOn())
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

  // The requests the workers held on average over the same gaps (--worker-concurrency above 1).
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

// The durations overload control works with, in ms: given (`given`: { maxWait, interval }) or scaled
// with the pace. Until the pace is known, or with no worker in rotation, maxWait is endless.
// `ceiling`: --queue-timeout (Infinity: none), past which the balancer turns a request away itself.
// Returns { maxWait, window, render, places } for `places` places and a pace of `pace` ms (null: unknown).
function overloadLimits (given, ceiling, places, pace) {
  const render = places > 0 && pace !== null ? pace * places : null
  const maxWait = given.maxWait !== undefined
    ? given.maxWait
    : render === null
      ? Infinity
      : Math.min(ceiling, Math.max(MAX_WAIT_FLOOR_MS, MAX_WAIT_PACES * pace))
  const window = given.interval !== undefined
    ? given.interval
    : Number.isFinite(maxWait)
      ? maxWait
      : MAX_WAIT_FLOOR_MS
  return { maxWait, window, render, places }
}

// Counts of arrived / served / gaveUp requests over a sliding window, in SLICES slices.
const SLICES = 16
const QUARTERS = 4

class Flow {
  constructor () {
    this.slices = [] // { start, arrived, served, gaveUp }, oldest first
  }

  // Old slices go as a new one begins: until then they are at most SLICES + 1, and sum() forgets too.
  add (now, window, what) {
    let s = this.slices[this.slices.length - 1]
    if (!s || now - s.start >= window / SLICES) {
      this.forget(now, window)
      s = { start: now, arrived: 0, served: 0, gaveUp: 0 }
      this.slices.push(s)
    }
    s[what]++
  }

  forget (now, window) {
    while (this.slices.length > 0 && this.slices[0].start < now - window) this.slices.shift()
  }

  // Over the last `window` ms: the counts, and `excess` (arrived − served) per quarter, oldest first.
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

  // Whether the queue stands now. It begins to once `late` and each quarter's excess is above a
  // quarter of a `round`; it stops once the last half window's excess is ≤ 0 and not `tooLong`.
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

  emptied () {
    this.standing = false
  }
}

// Overload control of the Dispatcher's queue: per-class state, the pace, the limits and police().
class Overload {
  // `turnAway(request)`: the queued `request` leaves unserved (queue_shed); `onShed()`: a police() pass shed.
  constructor ({ given, ceiling, queue, workers, clock, turnAway, onShed }) {
    this.queue = queue
    this.workers = workers
    this.clock = clock
    this.turnAway = turnAway
    this.onShed = onShed
    this.pace = new Pace()
    this.busySince = null // when the queue last stopped being empty (null: it is empty)
    this.lastTakenAt = null // when a worker last took a request from the queue
    this.given = given
    this.ceiling = ceiling
    this.byClass = queue.classes.map(() => new OverloadControl())
    this.newestFirst = (c) => this.servesNewest(c)
    this.lastServed = (c) => this.lastServedOf(c)
    this.timer = null
    this.timerAt = Infinity
    this.window = this.currentLimits().window // the flows' window as of the last pace sample or police()
  }

  // Counts for the flow; a long-lived request is not counted (its pace is not the renders').
  arrived (request) { this.count(request, 'arrived') }
  served (request) { this.count(request, 'served') }
  gaveUp (request) { this.count(request, 'gaveUp') }

  count (request, what) {
    if (!request.longLived) this.byClass[request.priority].flow.add(this.clock.now(), this.window, what)
  }

  enqueued (now) {
    if (this.queue.length === 1) this.busySince = now
  }

  left (request) {
    if (this.queue.length === 0) this.busySince = null
    if (this.queue.classes[request.priority].length === 0) this.byClass[request.priority].emptied()
  }

  // The gap since the last take is a pace sample if the queue stayed non-empty meanwhile.
  taken () {
    const now = this.clock.now()
    if (this.lastTakenAt !== null && this.busySince !== null && this.lastTakenAt >= this.busySince) {
      this.pace.add(now - this.lastTakenAt, this.workers.byCpu > 0 ? this.workers.rendering() + 1 : null)
      this.window = this.currentLimits().window
    }
    this.lastTakenAt = now
  }

  stop () {
    this.clock.clearTimeout(this.timer)
    this.timer = null
  }

  // The limits as of now. The places: the workers' maxconn; with --worker-concurrency above 1, what
  // they held on average while the queue waited (Little's law; counting K for a rendering worker
  // would shed in-time requests). The pace: over all their places.
  currentLimits () {
    const all = this.workers.places()
    if (all === 0) return overloadLimits(this.given, this.ceiling, 0, null)
    const held = this.workers.byCpu === 0 ? all : Math.min(all, this.pace.heldOn(all) ?? all)
    return overloadLimits(this.given, this.ceiling, held, this.pace.ms(all))
  }

  // Judge each class; where it stands, turn away who can no longer be answered in time. Runs after
  // each arrival, and from a timer while the queue is not empty (a queue nobody leaves is judged too).
  police () {
    if (this.queue.length === 0) return
    const now = this.clock.now()
    const limits = this.currentLimits()
    this.window = limits.window
    let next = Infinity
    let shed = false
    for (let c = 0; c < this.byClass.length; c++) {
      if (this.queue.classes[c].length === 0) continue
      const beyond = this.beyondOneRound(c, limits.places)
      const stood = this.byClass[c].standing
      // A queue that just stopped standing sheds its late requests first, or FIFO would serve them, late.
      if ((this.judge(c, now, limits) || stood) && beyond > 0) {
        const late = this.tooLate(c, now, limits, beyond)
        for (const request of late) this.turnAway(request)
        if (late.length > 0) this.judge(c, now, limits)
        shed = shed || late.length > 0
      }
      next = Math.min(next, this.nextJudgedAt(c, limits))
    }
    if (next < Infinity) this.armTimer(next)
    if (shed) this.onShed()
  }

  judge (c, now, limits) {
    const flow = Flow.total(this.byClass.slice(0, c + 1).map((o) => o.flow), now, limits.window)
    const judged = limits.render !== null && this.beyondOneRound(c, limits.places) > 0
    const tooLong = judged && this.fifoTooLong(c, now, limits)
    const late = tooLong || (judged && (this.oldestLate(c, now, limits) || flow.gaveUp >= limits.places))
    return this.byClass[c].update(now, { flow, round: limits.places, tooLong, late })
  }

  // Newest first while the queue stands, once those waiting when it began to stand are gone.
  servesNewest (c) {
    const head = this.queue.classes[c].head
    return head !== null && this.byClass[c].standing && !this.servedInOrder(c, head)
  }

  servedInOrder (c, node) {
    return node.servedNext || arrivalOf(node.item) <= this.byClass[c].since
  }

  // The node of class `c` served last: the tail, or while standing, the oldest served newest first.
  lastServedOf (c) {
    const q = this.queue.classes[c]
    if (!this.byClass[c].standing) return q.tail
    for (let node = q.head; node; node = node.next) if (!this.servedInOrder(c, node)) return node
    return q.tail
  }

  // Whether a FIFO would answer the newest request of class `c` after `maxWait` (order-independent).
  fifoTooLong (c, now, limits) {
    const newest = this.newestArrival(c)
    return newest !== null &&
      now - newest + (this.queuedAhead(c) - 1) * limits.render / limits.places > lastStart(limits)
  }

  oldestLate (c, now, limits) {
    const oldest = this.oldestArrival(c)
    return oldest !== null && now - oldest > lastStart(limits)
  }

  // Up to `max` requests of class `c` past lastStart, oldest first; the walk stops at the first young
  // enough one, except past redispatched requests put back in front (they may be younger).
  tooLate (c, now, limits, max) {
    const late = []
    for (let node = this.queue.classes[c].head; node && late.length < max; node = node.next) {
      if (now - arrivalOf(node.item) > lastStart(limits)) late.push(node.item)
      else if (!node.servedNext) break
    }
    return late
  }

  // When the judgment of class `c` may change unprompted: its oldest turns late, or a slice is forgotten.
  nextJudgedAt (c, limits) {
    let at = Infinity
    const oldest = this.oldestArrival(c)
    if (oldest !== null && limits.render !== null) at = oldest + lastStart(limits)
    const { window } = limits
    for (let k = 0; k <= c; k++) at = Math.min(at, this.byClass[k].flow.nextForgetAt(window))
    return at
  }

  // Queued requests of class `c` and those ahead beyond one round of the workers. A queue one round
  // serves is not judged (its wait is the workers' own), nor is more than that shed in one pass.
  beyondOneRound (c, places) {
    return Math.max(0, this.queuedAhead(c) - places)
  }

  queuedAhead (c) {
    let n = 0
    for (let k = 0; k <= c; k++) n += this.queue.classes[k].length
    return n
  }

  // Arrival of the newest request of class `c` (null: none); redispatched ones put back came earlier.
  newestArrival (c) {
    let newest = null
    for (let node = this.queue.classes[c].tail; node; node = node.prev) {
      const at = arrivalOf(node.item)
      if (newest === null || at > newest) newest = at
      if (!node.servedNext) break
    }
    return newest
  }

  oldestArrival (c) {
    let oldest = null
    for (let node = this.queue.classes[c].head; node; node = node.next) {
      const at = arrivalOf(node.item)
      if (oldest === null || at < oldest) oldest = at
      if (!node.servedNext) break
    }
    return oldest
  }

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

// The longest a request may have waited and still be answered within `maxWait` by a typical render.
function lastStart ({ maxWait, render, places }) {
  return maxWait - render - render / places
}

// When the client began to wait: arrival at the balancer (request.js), else when it was queued.
function arrivalOf (request) {
  return request.arrivedAt ?? request.queuedAt
}

module.exports = { Overload, OverloadControl, overloadLimits, Pace, Flow }
