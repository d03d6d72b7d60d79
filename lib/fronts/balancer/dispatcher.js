'use strict'

// Matches requests to workers: one queue for the whole pool, at most `maxconn` requests rendering
// per worker (with --worker-concurrency K above 1: at most K, and one more only while those it
// holds await I/O; a request whose response has begun renders no more: workers.js). A request
// goes straight to a worker that may take it only when nobody is waiting, so the order of arrival is the
// order of service, within each priority class (a higher class is always served first).
// Whoever frees a place (release(), headArrived()) hands it to the next queued request once its
// own callback has returned (a microtask later: handOff()), so that no request is written to a
// worker from inside another exchange's socket callback.
//
// A long-lived request (a stream: ../../protocol/long-lived.js) takes no render place: it goes at
// once to the worker in rotation holding fewest open requests, whatever renders wait, and waits
// only while none has room for one more open request (--worker-max-open, --max-open), in a FIFO
// of its own. Overload control neither counts nor sheds it: its pace is not the renders'.
//
// The invariant, checked by the tests through stuck(): whenever requests wait, the one served
// next cannot be given to any worker (a render finds no free place, a stream no open room, a
// replay no worker to render it alone), in the queue and in the streams' FIFO, unless a hand-off
// is due. Every way a worker becomes able to take one ends in pump() or a hand-off: a release, a worker in
// rotation, the end of a bench (its own timer lifts it), a worker's word that its requests await
// I/O, a replay's wait to render alone running out.
//
// With overload control, a class's queue may stand: it then serves later arrivals newest first
// and turns away whoever can no longer be answered in time. ./overload.js decides: the dispatcher
// tells it what happens to the queue, and asks it which end to serve.

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
  clearTimeout: (timer) => clearTimeout(timer),
  defer: (fn) => queueMicrotask(fn)
}

const { ClassQueues, FifoQueue } = require('./queue')
const { CLASSES, NORMAL } = require('./priority')
const { Overload } = require('./overload')

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
  // onError(err): a throw of the dispatcher's own in a hand-off, which no caller is left to catch.
  // clock: { now, setTimeout, clearTimeout, defer }, the process's own unless given.
  constructor ({
    workers, queueTimeout, maxQueue, overload, priorityOf, onAssign, onTurnedAway, onError = rethrow, clock = REAL_CLOCK
  }) {
    this.clock = clock
    this.onError = onError
    this.handOffsDue = 0 // hand-offs scheduled, not run yet
    this.pumpDue = false
    this.workers = workers
    this.queueTimeout = queueTimeout
    this.maxQueue = maxQueue
    this.priorityOf = priorityOf || (() => NORMAL)
    this.onAssign = onAssign
    this.onTurnedAway = onTurnedAway
    this.queue = new ClassQueues(CLASSES.length)
    this.streams = new FifoQueue() // long-lived requests waiting for room (see the top)
    this.overload = overload
      ? new Overload({
        given: overload,
        ceiling: queueTimeout > 0 ? queueTimeout : Infinity,
        queue: this.queue,
        workers,
        clock,
        turnAway: (job) => this.turnAway(job, 'queue_shed'),
        onShed: () => this.checkDrains()
      })
      : null
    // Which end of a class is served next, and which request would be served last: the oldest
    // and the newest, unless overload control says otherwise.
    this.newestFirst = this.overload ? this.overload.newestFirst : () => false
    this.lastServed = this.overload ? this.overload.lastServed : (c) => this.queue.classes[c].tail
    this.drains = new Set()
  }

  get queued () { return this.queue.length + this.streams.length }

  // Returns 'assigned', 'queued', or 'full' (the caller answers 503; the job was not kept).
  // The queue deadline starts here, whether the job waits or goes straight to a worker, and it
  // is kept if the job comes back after a redispatch: its client has been waiting since.
  submit (job) {
    this.classify(job)
    if (this.queueTimeout > 0) job.deadline = this.clock.now() + this.queueTimeout
    this.overload?.arrived(job)
    // A place freed for a hand-off still due is the queue's: it is handed on first.
    if (this.handOffsDue > 0) this.pump()
    if (job.longLived || this.queue.length === 0) {
      const record = this.pick(job)
      if (record) { this.assign(job, record); return 'assigned' }
    }
    if (this.isFull() && (job.longLived || !this.makeRoom(job))) return 'full'
    this.enqueue(job, false)
    this.overload?.police()
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
    this.overload?.arrived(job)
    this.enqueue(job, true)
    this.handOff(() => {
      this.pump()
      this.overload?.police()
    })
  }

  // Runs `fn` (a pump) once the callback under way has returned.
  handOff (fn) {
    this.handOffsDue++
    this.clock.defer(() => {
      this.handOffsDue--
      try {
        fn()
      } catch (err) {
        this.onError(err)
      }
    })
  }

  // One pending pump serves every place freed meanwhile.
  pumpSoon () {
    if (this.pumpDue) return
    this.pumpDue = true
    this.handOff(() => {
      this.pumpDue = false
      try {
        this.pump()
      } finally {
        this.checkDrains()
      }
    })
  }

  enqueue (job, servedNext) {
    const now = this.clock.now()
    const cls = job.priority
    job.queuedAt = now
    if (job.longLived) job.queueNode = servedNext ? this.streams.unshift(job) : this.streams.push(job)
    else {
      job.queueNode = servedNext
        ? this.queue.addNext(job, cls, this.newestFirst(cls))
        : this.queue.add(job, cls)
      this.overload?.enqueued(now)
    }
    if (this.queueTimeout > 0) {
      job.queueTimer = this.clock.setTimeout(() => this.expire(job), Math.max(0, job.deadline - now))
    }
  }

  dequeue (job) {
    if (job.longLived) this.streams.remove(job.queueNode)
    else {
      this.queue.remove(job.queueNode)
      this.overload?.left(job)
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
    this.overload?.gaveUp(job)
    this.checkDrains()
    return true
  }

  assign (job, record) {
    this.overload?.served(job)
    this.workers.take(record, job)
    job.rendering = !job.longLived
    this.onAssign(job, record)
  }

  // `record` said every request it holds awaits I/O: it may take one more.
  awaiting (record, open, last) {
    record.awaiting(open, last)
    this.pump()
  }

  // `job`'s response began on `record`: its render place is free, the queue has it next.
  headArrived (record, job) {
    if (!job.rendering) return
    job.rendering = false
    record.headArrived(job)
    this.pumpSoon()
    this.checkDrains()
  }

  // `job` is over on `record`: its place is free again, the queue has it next.
  release (record, job) {
    this.workers.release(record, job, job.rendering)
    job.rendering = false
    this.workers.forgetIfDone(record)
    this.pumpSoon()
    this.checkDrains()
  }

  // Give the queue the workers that may take a request, for as long as both last: the highest class first; within
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
      this.overload?.taken()
      this.dequeue(job)
      this.assign(job, record)
    }
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
    if (this.handOffsDue > 0) return false
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
    this.overload?.stop()
    let node
    while ((node = this.streams.head ?? this.queue.next(() => false))) {
      this.dequeue(node.item)
      fn(node.item)
    }
    for (const d of this.drains) d.resolve()
    this.drains.clear()
  }
}

function rethrow (err) { throw err }

module.exports = { Dispatcher, BENCH_AFTER_FAILURE_MS }
