'use strict'

// Matches requests to workers: one queue for the whole pool, at most `maxconn` requests rendering
// per worker (with --worker-concurrency K above 1: at most K, and one more only while those it
// holds await I/O; a request whose response has begun renders no more: workers.js). A request
// goes straight to a free worker only when nobody is waiting, so the order of arrival is the
// order of service, within each priority class (a higher class is always served first).
// Whoever frees a place (release(), headArrived()) hands it the next queued request at once.
//
// A long-lived request (a stream: ../../protocol/long-lived.js) takes no render place: it goes at
// once to the worker in rotation holding fewest open requests, whatever renders wait, and waits
// only while none has room for one more open request (--worker-max-open, --max-open), in a FIFO
// of its own. Overload control neither counts nor sheds it: its pace is not the renders'.
//
// The invariant, checked by the tests through stuck(): whenever requests wait, the one served
// next cannot be given to any worker (a render finds no free place, a stream no open room, a
// replay no worker to render it alone), in the queue and in the streams' FIFO. Every way a
// worker becomes able to take one ends in pump(), in the same step: a release, a worker in
// rotation, the end of a bench (its own timer lifts it), a worker's word that its requests await
// I/O, a replay's wait to render alone running out.
//
// With overload control (./overload.js), each class's queue is watched on its own
// (a busy high class must not hide a low class that stands behind it): one that stands serves
// the requests that were waiting when it began to stand in order, then the newest first, and
// whoever in it can no longer be answered in time is turned away at once, but for the requests
// one round of the workers serves next. The dispatcher counts what that is judged by: the
// requests that arrive, are given to workers and are given up by their clients, and the gaps
// between requests leaving the queue (the pace).

// A worker that refused or reset a connection gets no request for this long, unless the
// supervisor reports it ready again sooner: the supervisor's word on a dying worker may be a few
// milliseconds behind the socket's.
const BENCH_AFTER_FAILURE_MS = 1000
// A request replayed after its worker died waits this long at most for a worker holding nothing
// (the dead one's successor, one whose streams ended); then one rendering nothing will do, its
// streams beside it (workers.js, suspects).
const REPLAY_ALONE_MS = 5000

// The time and the timers: the process's own, or a simulated clock's (bench/lib/dispatcher-sim.js).
const REAL_CLOCK = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer)
}

const { ClassQueues, FifoQueue } = require('./queue')
const { CLASSES, NORMAL } = require('./priority')
const { OverloadControl, OverloadLimits, Pace, Flow } = require('./overload')

class Dispatcher {
  // onAssign(job, record): the job now owns one of record's places; it must call
  //   release(record, job) exactly once when done with it (headArrived(record, job) before, when
  //   its response begins).
  // onTurnedAway(job, reason): the job has left the queue unserved, for `reason`: queue_timeout
  //   (it waited past its deadline), queue_shed (the queue stands and it waited too long), or
  //   queue_full (the queue was full and a request of a higher class took its place).
  // priorityOf(req): the request's class (an index into CLASSES); every request is normal
  //   without it.
  // overload: { interval, maxWait } turns overload control on; a duration left undefined scales
  //   with the pool's pace (./overload.js).
  // clock: { now, setTimeout, clearTimeout }, the process's own unless given.
  constructor ({ workers, queueTimeout, maxQueue, overload, priorityOf, onAssign, onTurnedAway, clock = REAL_CLOCK }) {
    this.clock = clock
    this.workers = workers
    this.queueTimeout = queueTimeout
    this.maxQueue = maxQueue
    this.priorityOf = priorityOf || (() => NORMAL)
    this.onAssign = onAssign
    this.onTurnedAway = onTurnedAway
    this.queue = new ClassQueues(CLASSES.length)
    this.streams = new FifoQueue() // long-lived requests waiting for room (see the top)
    this.pace = new Pace()
    this.busySince = null // when the queue last stopped being empty (null: it is empty)
    this.lastTakenAt = null // when a worker last took a request from the queue
    this.limits = overload
      ? new OverloadLimits(overload, {
        pace: () => this.pace.ms(this.workers.places()),
        places: () => this.places(),
        ceiling: queueTimeout > 0 ? queueTimeout : Infinity
      })
      : null
    this.overload = overload ? CLASSES.map(() => new OverloadControl()) : null
    this.newestFirst = (c) => this.servesNewest(c)
    this.lastServed = (c) => this.lastServedOf(c)
    this.overloadTimer = null
    this.overloadTimerAt = Infinity
    this.drains = new Set()
  }

  get queued () { return this.queue.length + this.streams.length }

  // Returns 'assigned', 'queued', or 'full' (the caller answers 503; the job was not kept).
  // The queue deadline starts here, whether the job waits or goes straight to a worker, and it
  // is kept if the job comes back after a redispatch: its client has been waiting since.
  submit (job) {
    this.classify(job)
    if (this.queueTimeout > 0) job.deadline = this.clock.now() + this.queueTimeout
    this.count(job, 'arrived')
    if (job.longLived || this.queue.length === 0) {
      const record = this.pick(job)
      if (record) { this.assign(job, record); return 'assigned' }
    }
    if (this.isFull() && (job.longLived || !this.makeRoom(job))) return 'full'
    this.enqueue(job, false)
    this.police()
    return 'queued'
  }

  classify (job) {
    if (job.priority === undefined) job.priority = this.priorityOf(job.req)
  }

  isFull () {
    return this.maxQueue !== undefined && this.queued >= this.maxQueue
  }

  // The worker `job` would go to now, if any: a replay renders alone (workers.js, suspects).
  pick (job) {
    if (job.pinned && this.workers.mayServe(job.pinned)) return job.pinned
    if (job.replayed && !job.longLived) {
      return this.workers.pickForSuspect({ besideStreams: this.clock.now() >= job.aloneUntil })
    }
    return job.longLived ? this.workers.pickForStream() : this.workers.pickFree()
  }

  // Whether submit(job) would take `job` now, without changing anything: asked before a
  // request's body is read, so that a full queue refuses the body unread.
  wouldTake (job) {
    this.classify(job)
    if (job.longLived) return !this.isFull() || this.workers.pickForStream() !== undefined
    if (this.queue.length === 0 && this.workers.anyFree()) return true
    return !this.isFull() || this.queue.lastBelow(job.priority, this.lastServed) !== null
  }

  // A full queue still takes a request of a higher class than some queued one: the lower one
  // that would be served last gives way.
  makeRoom (job) {
    const node = this.queue.lastBelow(job.priority, this.lastServed)
    if (!node) return false
    this.turnAway(node.item, 'queue_full')
    return true
  }

  // A request that must try another worker (redispatch) goes back to where its class is served
  // next: it has waited longer than anyone behind it. Its queue deadline still runs from arrival
  // (submit): past it, the request is turned away unless a worker is free at once.
  requeue (job) {
    if (job.replayed && job.aloneUntil === null) {
      job.aloneUntil = this.clock.now() + REPLAY_ALONE_MS
      this.clock.setTimeout(() => this.pump(), REPLAY_ALONE_MS + 1).unref()
    }
    this.count(job, 'arrived')
    this.enqueue(job, true)
    this.pump()
    this.police()
  }

  enqueue (job, servedNext) {
    const now = this.clock.now()
    const cls = job.priority
    job.queuedAt = now
    if (job.longLived) job.queueNode = servedNext ? this.streams.unshift(job) : this.streams.push(job)
    else {
      if (this.queue.length === 0) this.busySince = now
      job.queueNode = servedNext
        ? this.queue.addNext(job, cls, this.newestFirst(cls))
        : this.queue.add(job, cls)
    }
    if (this.queueTimeout > 0) {
      job.queueTimer = this.clock.setTimeout(() => this.expire(job), Math.max(0, job.deadline - now))
    }
  }

  dequeue (job) {
    if (job.longLived) this.streams.remove(job.queueNode)
    else {
      this.queue.remove(job.queueNode)
      if (this.queue.length === 0) this.busySince = null
      if (this.overload && this.queue.classes[job.priority].length === 0) this.overload[job.priority].emptied()
    }
    job.queueNode = null
    this.clock.clearTimeout(job.queueTimer)
    job.queueTimer = null
    job.queueMs = (job.queueMs || 0) + this.clock.now() - job.queuedAt
  }

  expire (job) {
    if (!job.queueNode) return
    this.turnAway(job, 'queue_timeout')
    this.checkDrains()
  }

  turnAway (job, reason) {
    this.dequeue(job)
    this.onTurnedAway(job, reason)
  }

  // The client went away: a queued job leaves without ever reaching a worker.
  cancel (job) {
    if (!job.queueNode) return false
    this.dequeue(job)
    this.count(job, 'gaveUp')
    this.checkDrains()
    return true
  }

  assign (job, record) {
    this.count(job, 'served')
    this.workers.take(record, job)
    job.rendering = !job.longLived
    this.onAssign(job, record)
  }

  // `record` said every request it holds awaits I/O: it may take one more.
  awaiting (record, open, last) {
    record.awaiting(open, last)
    this.pump()
  }

  // `job`'s response began on `record`: its render place is free, the queue has it at once.
  headArrived (record, job) {
    if (!job.rendering) return
    job.rendering = false
    record.headArrived(job)
    this.pump()
    this.checkDrains()
  }

  // `job` is over on `record`: its place is free again, the queue has it at once.
  release (record, job) {
    this.workers.release(record, job, job.rendering)
    job.rendering = false
    this.workers.forgetIfDone(record)
    this.pump()
    this.checkDrains()
  }

  // Give free workers to the queue, for as long as both last: the highest class first; within
  // it the oldest request, or the newest while that class's queue stands.
  pump () {
    while (this.streams.length > 0) {
      const job = this.streams.head.item
      const record = this.pick(job)
      if (!record) break
      this.dequeue(job)
      this.assign(job, record)
    }
    while (this.queue.length > 0) {
      const job = this.queue.next(this.newestFirst).item
      const record = this.pick(job)
      if (!record) break
      this.taken()
      this.dequeue(job)
      this.assign(job, record)
    }
  }

  // ---- overload control (./overload.js) -------------------------------------------------------

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

  // The places that serve the queue, for overload control: a worker's maxconn; but a worker
  // admitted by CPU (--worker-concurrency above 1) holds up to K while its requests await I/O and
  // one while it renders, so there it is what the workers held on average while the queue waited
  // (Little's law: a request holds its place a pace per place). Counting K for a worker that
  // renders would take a render for K times its length, and turn away requests a FIFO answers
  // in time. Until that is known, every place.
  places () {
    const places = this.workers.places()
    if (this.workers.byCpu === 0 || places === 0) return places
    return Math.min(places, this.pace.heldOn(places) ?? places)
  }

  // What overload control judges by, for the class of `job`: `what` is arrived, served or gaveUp.
  count (job, what) {
    if (!this.overload || job.longLived) return
    this.overload[job.priority][what](this.clock.now(), this.limits.current())
  }

  // Decide, class by class, whether the queue stands; where it does, turn away whoever can no
  // longer be answered in time. Runs after each arrival in the queue, and from a timer while the
  // queue is not empty, so that a queue nobody leaves (every worker on a long render) is judged
  // too, and a queue that stands goes back to FIFO once the workers keep up.
  police () {
    if (!this.overload || this.queue.length === 0) return
    const now = this.clock.now()
    const limits = this.limits.current()
    let next = Infinity
    let shed = false
    for (let c = 0; c < CLASSES.length; c++) {
      if (this.queue.classes[c].length === 0) continue
      const beyond = this.beyondOneRound(c, limits.places)
      const stood = this.overload[c].standing
      // A queue that stood until now sheds what can no longer be answered in time before it is
      // handed back to FIFO order, which would answer those first, and late.
      if ((this.judge(c, now, limits) || stood) && beyond > 0) {
        const late = this.tooLate(c, now, limits, beyond)
        for (const job of late) this.turnAway(job, 'queue_shed')
        if (late.length > 0) this.judge(c, now, limits)
        shed = shed || late.length > 0
      }
      next = Math.min(next, this.nextJudgedAt(c, limits))
    }
    if (next < Infinity) this.armOverloadTimer(next)
    if (shed) this.checkDrains()
  }

  // Whether the queue of class `c` stands now (OverloadControl.update, with what it is judged by).
  judge (c, now, limits) {
    const flow = Flow.total(this.overload.slice(0, c + 1).map((o) => o.flow), now, limits.window)
    const judged = limits.render !== null && this.beyondOneRound(c, limits.places) > 0
    const tooLong = judged && this.fifoTooLong(c, now, limits)
    const late = tooLong || (judged && (this.oldestLate(c, now, limits) || flow.gaveUp >= limits.places))
    return this.overload[c].update(now, { flow, round: limits.places, tooLong, late })
  }

  // Whether class `c` is served newest first now: while its queue stands, once the requests
  // that were waiting when it began to stand are gone (served oldest first, as a FIFO would have
  // served them, or turned away). A redispatched request put back in front is served next either
  // way.
  servesNewest (c) {
    const head = this.queue.classes[c].head
    return head !== null && this.overload?.[c].standing === true && !this.servedInOrder(c, head)
  }

  // Whether the queued `node` of class `c`, whose queue stands, is served in arrival order: it was
  // waiting when the queue began to stand, or it was put back in front.
  servedInOrder (c, node) {
    return node.servedNext || arrivalOf(node.item) <= this.overload[c].since
  }

  // The node of class `c` (not empty) that would be served last: the newest, or while the queue
  // stands, the oldest of those served newest first.
  lastServedOf (c) {
    const q = this.queue.classes[c]
    if (!this.overload?.[c].standing) return q.tail
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
    for (let k = 0; k <= c; k++) at = Math.min(at, this.overload[k].flow.nextForgetAt(window))
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
  armOverloadTimer (at) {
    if (this.overloadTimer && this.overloadTimerAt <= at) return
    this.clock.clearTimeout(this.overloadTimer)
    this.overloadTimerAt = at
    this.overloadTimer = this.clock.setTimeout(() => {
      this.overloadTimer = null
      this.overloadTimerAt = Infinity
      this.police()
    }, Math.max(0, at - this.clock.now()) + 1) // +1: a timer may fire a fraction of a ms early
    this.overloadTimer.unref()
  }

  // ---- workers ---------------------------------------------------------------------------------

  // Take `record` out of the choice for a moment. Called before the failed attempt's release,
  // so that the release cannot hand it the next request.
  bench (record) {
    const timer = this.clock.setTimeout(() => this.unbench(record), BENCH_AFTER_FAILURE_MS)
    timer.unref()
    record.bench(timer)
  }

  unbench (record) {
    if (record.unbench()) this.pump()
  }

  // True when the invariant above is broken: requests wait while a worker could take one.
  stuck () {
    const cursor = this.workers.rrCursor // asking moves --balance rr's cursor: put it back
    const next = this.queue.next(this.newestFirst)
    const stuck = (next !== null && this.pick(next.item) !== undefined) ||
      (this.streams.length > 0 && this.pick(this.streams.head.item) !== undefined)
    this.workers.rrCursor = cursor
    return stuck
  }

  // Resolve once nothing `record` was given still renders (what is left is long-lived: responses
  // under way) and, with `untilQueueEmpty` (the pool is stopping), once nothing is left in the
  // queue either. Until then a stopping pool's workers keep serving the queue; a reloading one's
  // drained worker gets nothing new.
  drain (record, { untilQueueEmpty }) {
    if (!untilQueueEmpty) record.drain()
    return new Promise((resolve) => {
      this.drains.add({ record, untilQueueEmpty, resolve })
      this.checkDrains()
    })
  }

  checkDrains () {
    if (this.drains.size === 0) return
    for (const d of this.drains) {
      const done = d.record.gone || (d.record.renders === 0 && (!d.untilQueueEmpty || this.queued === 0))
      if (!done) continue
      d.record.drain()
      this.drains.delete(d)
      d.resolve()
    }
  }

  // Stop: every queued job leaves through `fn`, every drain resolves.
  clear (fn) {
    this.clock.clearTimeout(this.overloadTimer)
    this.overloadTimer = null
    let node
    while ((node = this.streams.head ?? this.queue.next(() => false))) {
      this.dequeue(node.item)
      fn(node.item)
    }
    for (const d of this.drains) d.resolve()
    this.drains.clear()
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

module.exports = { Dispatcher, BENCH_AFTER_FAILURE_MS }
