'use strict'

// Matches requests to workers: one queue for the whole pool, at most `maxconn` requests per
// worker. A request goes straight to a free worker only when nobody is waiting, so the order of
// arrival is the order of service, within each priority class (lib/fronts/balancer/priority.js; a
// higher class is always served first). Whoever frees a worker calls release(), which hands it
// the next queued request at once.
//
// The invariant, checked by the tests through stuck(): whenever the queue is not empty, no
// worker can take a request. Every way a worker becomes able to take one ends in pump(), in the
// same step: a release, a worker in rotation, the end of a bench (its own timer lifts it).
//
// With overload control (lib/fronts/balancer/overload.js), each class's queue is watched on its own
// (a busy high class must not hide a low class that stands behind it): one that stands is served
// newest first, and whoever in it has waited longer than the limit is turned away at once, but
// for the requests one round of the workers serves next. The limits not given scale with the
// pool's pace, which the dispatcher measures: how long workers hold their requests, and how many
// share the queue.

// A worker that refused or reset a connection gets no request for this long, unless the
// supervisor reports it ready again sooner: the supervisor's word on a dying worker may be a few
// milliseconds behind the socket's.
const BENCH_AFTER_FAILURE_MS = 1000

const { ClassQueues } = require('./queue')
const { CLASSES, NORMAL } = require('./priority')
const { OverloadControl, OverloadLimits, RenderTime } = require('./overload')

class Dispatcher {
  // onAssign(job, record): the job now owns one of record's maxconn places; it must call
  //   release(record) exactly once when done with it.
  // onTurnedAway(job, reason): the job has left the queue unserved, for `reason`: queue_timeout
  //   (it waited past its deadline), queue_shed (the queue stands and it waited too long), or
  //   queue_full (the queue was full and a request of a higher class took its place).
  // priorityOf(req): the request's class (lib/fronts/balancer/priority.js); every request is normal
  //   without it.
  // overload: { interval, target, maxWait } turns overload control on; a duration left
  //   undefined scales with the pool's pace (lib/fronts/balancer/overload.js).
  constructor ({ workers, queueTimeout, maxQueue, overload, priorityOf, onAssign, onTurnedAway }) {
    this.workers = workers
    this.queueTimeout = queueTimeout
    this.maxQueue = maxQueue
    this.priorityOf = priorityOf || (() => NORMAL)
    this.onAssign = onAssign
    this.onTurnedAway = onTurnedAway
    this.queue = new ClassQueues(CLASSES.length)
    this.renders = new RenderTime()
    this.limits = overload ? new OverloadLimits(overload, () => this.pace()) : null
    this.overload = overload ? CLASSES.map(() => new OverloadControl()) : null
    this.newestFirst = (cls) => this.overload !== null && this.overload[cls].standing
    this.overloadTimer = null
    this.overloadTimerAt = Infinity
    this.drains = new Set()
  }

  get queued () { return this.queue.length }

  // The classes whose queue stands now (none without overload control).
  standingClasses () {
    if (!this.overload) return []
    const now = performance.now()
    const limits = this.limits.current()
    const places = this.workers.places()
    return CLASSES.filter((_, c) => this.overload[c].update(now, this.judgedOldest(c, places), limits))
  }

  // Returns 'assigned', 'queued', or 'full' (the caller answers 503; the job was not kept).
  // The queue deadline starts here, whether the job waits or goes straight to a worker, and it
  // is kept if the job comes back after a redispatch: its client has been waiting since.
  submit (job) {
    this.classify(job)
    if (this.queueTimeout > 0) job.deadline = performance.now() + this.queueTimeout
    if (this.queue.length === 0) {
      const record = this.workers.pickFree()
      if (record) { this.assign(job, record); return 'assigned' }
    }
    if (this.isFull() && !this.makeRoom(job)) return 'full'
    this.enqueue(job, false)
    this.police()
    return 'queued'
  }

  classify (job) {
    if (job.priority === undefined) job.priority = this.priorityOf(job.req)
  }

  isFull () {
    return this.maxQueue !== undefined && this.queue.length >= this.maxQueue
  }

  // Whether submit(job) would take `job` now, without changing anything: asked before a
  // request's body is read, so that a full queue refuses the body unread.
  wouldTake (job) {
    this.classify(job)
    if (this.queue.length === 0 && this.workers.anyFree()) return true
    return !this.isFull() || this.queue.lastBelow(job.priority, this.newestFirst) !== null
  }

  // A full queue still takes a request of a higher class than some queued one: the lower one
  // that would be served last gives way.
  makeRoom (job) {
    const node = this.queue.lastBelow(job.priority, this.newestFirst)
    if (!node) return false
    this.turnAway(node.item, 'queue_full')
    return true
  }

  // A request that must try another worker (redispatch) goes back to where its class is served
  // next: it has waited longer than anyone behind it. Its queue deadline still runs from arrival
  // (submit): past it, the request is turned away unless a worker is free at once.
  requeue (job) {
    this.enqueue(job, true)
    this.pump()
    this.police()
  }

  enqueue (job, servedNext) {
    const now = performance.now()
    const cls = job.priority
    // Until now this class's queue was empty: overload control counts from here.
    if (this.overload && this.queue.classes[cls].length === 0) this.overload[cls].emptied(now)
    job.queuedAt = now
    job.queueNode = servedNext
      ? this.queue.addNext(job, cls, this.newestFirst(cls))
      : this.queue.add(job, cls)
    if (this.queueTimeout > 0) job.queueTimer = setTimeout(() => this.expire(job), Math.max(0, job.deadline - now))
  }

  // `how` the job leaves: served, turned-away, or cancelled (for overload control).
  dequeue (job, how) {
    this.queue.remove(job.queueNode)
    job.queueNode = null
    clearTimeout(job.queueTimer)
    job.queueTimer = null
    const now = performance.now()
    const waited = now - job.queuedAt
    job.queueMs = (job.queueMs || 0) + waited
    if (!this.overload) return
    const o = this.overload[job.priority]
    o.left(waited, now, how, this.limits.current())
    if (this.queue.classes[job.priority].length === 0) o.emptied(now)
  }

  expire (job) {
    if (!job.queueNode) return
    this.turnAway(job, 'queue_timeout')
    this.checkDrains()
  }

  turnAway (job, reason) {
    this.dequeue(job, 'turned-away')
    this.onTurnedAway(job, reason)
  }

  // The client went away: a queued job leaves without ever reaching a worker.
  cancel (job) {
    if (!job.queueNode) return false
    this.dequeue(job, 'cancelled')
    this.checkDrains()
    return true
  }

  assign (job, record) {
    record.inFlight++
    this.onAssign(job, record)
  }

  // `heldMs`: how long the request held the worker, when known. It paces overload control,
  // unless the attempt failed (the worker was benched just before): a refused connection is no
  // render.
  release (record, heldMs) {
    if (heldMs !== undefined && !record.benched) this.renders.add(heldMs)
    record.inFlight--
    this.pump()
    this.checkDrains()
  }

  // Give free workers to the queue, for as long as both last: the highest class first; within
  // it the oldest request, or the newest while that class's queue stands.
  pump () {
    while (this.queue.length > 0) {
      const record = this.workers.pickFree()
      if (!record) break
      const job = this.queue.next(this.newestFirst).item
      this.dequeue(job, 'served')
      this.assign(job, record)
    }
  }

  // ---- overload control (lib/fronts/balancer/overload.js) ---------------------------------------

  // Decide, class by class, whether the queue stands; where it does, turn away whoever has
  // waited too long. Runs after each arrival in the queue, and from a timer while the queue is
  // not empty, so that a queue nobody leaves (every worker on a long render) is noticed too.
  police () {
    if (!this.overload || this.queue.length === 0) return
    const now = performance.now()
    const limits = this.limits.current()
    const places = this.workers.places()
    let next = Infinity
    let shed = false
    for (let c = 0; c < CLASSES.length; c++) {
      if (this.queue.classes[c].length === 0) continue
      const o = this.overload[c]
      const judged = this.judgedOldest(c, places)
      if (judged === null) o.emptied(now)
      if (o.update(now, judged, limits) && judged !== null) {
        const old = this.tooOld(c, now, limits, this.beyondOneRound(c, places))
        for (const job of old) this.turnAway(job, 'queue_shed')
        shed = shed || old.length > 0
        const oldest = this.oldestQueuedAt(c)
        if (oldest !== null) next = Math.min(next, oldest + limits.maxWait)
      }
      next = Math.min(next, o.nextChangeAt(limits))
    }
    if (next < Infinity) this.armOverloadTimer(next)
    if (shed) this.checkDrains()
  }

  // The requests of class `c` that have waited past the overload limit, the oldest first, at
  // most `max` of them. The class is walked from its oldest end and the walk stops at the first
  // request young enough (those behind it are younger), except for redispatched requests put
  // back in front, which may be younger than those behind them.
  tooOld (c, now, limits, max) {
    const o = this.overload[c]
    const old = []
    for (let node = this.queue.classes[c].head; node && old.length < max; node = node.next) {
      if (o.tooOld(node.item.queuedAt, now, limits)) old.push(node.item)
      else if (!node.servedNext) break
    }
    return old
  }

  // When the longest-waiting request of class `c` was queued, as overload control sees it: null
  // when none is, and also when one round of the workers serves every request of this class and
  // of those ahead of it. Such a queue counts as empty: its wait is the workers' own (long
  // renders, a restart), not too many arrivals, and turning it away would shorten nobody's.
  // `places`: this.workers.places(), measured once by the caller.
  judgedOldest (c, places) {
    return this.beyondOneRound(c, places) > 0 ? this.oldestQueuedAt(c) : null
  }

  // How many requests of class `c` and of the classes ahead of it are more than one round of the
  // workers serves. A shedding pass turns away no more than that: requests that all waited too
  // long together (a late timer, a burst) must not take the last round's with them.
  beyondOneRound (c, places) {
    let ahead = 0
    for (let k = 0; k <= c; k++) ahead += this.queue.classes[k].length
    return Math.max(0, ahead - places)
  }

  // When the longest-waiting request of class `c` was queued (null: none is).
  oldestQueuedAt (c) {
    let oldest = null
    for (let node = this.queue.classes[c].head; node; node = node.next) {
      if (oldest === null || node.item.queuedAt < oldest) oldest = node.item.queuedAt
      if (!node.servedNext) break
    }
    return oldest
  }

  // Milliseconds between two requests leaving the queue while every worker is busy: the typical
  // render shared among the places that serve the queue. Unknown (Infinity: the scaled limits
  // judge nothing) until a render has finished, and while no worker is in rotation.
  pace () {
    const places = this.workers.places()
    if (places === 0 || this.renders.ms === null) return Infinity
    return this.renders.ms / places
  }

  // One timer, at the earliest moment police() has something to do.
  armOverloadTimer (at) {
    if (this.overloadTimer && this.overloadTimerAt <= at) return
    clearTimeout(this.overloadTimer)
    this.overloadTimerAt = at
    this.overloadTimer = setTimeout(() => {
      this.overloadTimer = null
      this.overloadTimerAt = Infinity
      this.police()
    }, Math.max(0, at - performance.now()) + 1) // +1: a timer may fire a fraction of a ms early
    this.overloadTimer.unref()
  }

  // ---- workers ---------------------------------------------------------------------------------

  // Take `record` out of the choice for a moment. Called before the failed attempt's release,
  // so that the release cannot hand it the next request.
  bench (record) {
    clearTimeout(record.benchTimer)
    record.benched = true
    record.benchTimer = setTimeout(() => this.unbench(record), BENCH_AFTER_FAILURE_MS)
    record.benchTimer.unref()
  }

  unbench (record) {
    clearTimeout(record.benchTimer)
    record.benchTimer = null
    if (!record.benched) return
    record.benched = false
    this.pump()
  }

  // True when the invariant above is broken: requests wait while a worker could take one.
  stuck () {
    return this.queue.length > 0 && this.workers.anyFree()
  }

  // Resolve once `record` holds nothing in flight and, with `untilQueueEmpty` (the pool is
  // stopping), once nothing is left in the queue either. Until then a stopping pool's workers
  // keep serving the queue; a reloading one's drained worker gets nothing new.
  drain (record, { untilQueueEmpty }) {
    if (!untilQueueEmpty) record.draining = true
    return new Promise((resolve) => {
      this.drains.add({ record, untilQueueEmpty, resolve })
      this.checkDrains()
    })
  }

  checkDrains () {
    if (this.drains.size === 0) return
    for (const d of this.drains) {
      const done = d.record.gone || (d.record.inFlight === 0 && (!d.untilQueueEmpty || this.queue.length === 0))
      if (!done) continue
      d.record.draining = true
      this.drains.delete(d)
      d.resolve()
    }
  }

  // Stop: every queued job leaves through `fn`, every drain resolves.
  clear (fn) {
    clearTimeout(this.overloadTimer)
    this.overloadTimer = null
    let node
    while ((node = this.queue.next(() => false))) {
      this.dequeue(node.item, 'cancelled')
      fn(node.item)
    }
    for (const d of this.drains) d.resolve()
    this.drains.clear()
  }
}

module.exports = { Dispatcher, BENCH_AFTER_FAILURE_MS }
