'use strict'

// Matches requests to workers: one queue for the pool, served in arrival order within each
// priority class (a higher class first); a request goes straight to a worker only when nobody
// waits. A freed place (release(), headArrived()) goes to the next request a microtask later
// (handOff()), never from inside another exchange's socket callback. Streams (long-lived) take no
// render place: they go to the worker holding fewest open, waiting in a FIFO of their own only for
// open room, and overload control (./overload.js) ignores them.
// Invariant (tests: stuck()): while requests wait, the next one can be given to no worker, unless
// a hand-off is due; every way a worker becomes able to take one ends in pump() or a hand-off.

// A worker that refused or reset a connection gets nothing this long, unless reported ready sooner.
const BENCH_AFTER_FAILURE_MS = 1000
// A replay waits this long at most for a worker holding nothing, then takes one rendering nothing.
const REPLAY_ALONE_MS = 5000

// The process's clock, or a simulated one (bench/lib/dispatcher-sim.js).
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
  // onAssign(request, record): a request that waited was given one of record's places (one taken at
  //   submit() is the caller's to begin). Either way it must call release(record, request) once
  //   (headArrived before, when its response begins). onTurnedAway(request, reason): it left the
  //   queue unserved: queue_timeout, queue_shed or queue_full (a higher class took its place).
  // overload: { interval, maxWait } turns overload control on. onError(err): a hand-off's throw.
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
        turnAway: (request) => this.turnAway(request, 'queue_shed'),
        onShed: () => this.checkDrains()
      })
      : null
    this.newestFirst = this.overload ? this.overload.newestFirst : () => false
    this.lastServed = this.overload ? this.overload.lastServed : (c) => this.queue.classes[c].tail
    this.drains = new Set()
  }

  get queued () { return this.queue.length + this.streams.length }

  // The WorkerRecord that takes `request` now (the caller begins it: no onAssign), else 'queued' or
  // 'full' (the caller answers 503). The queue deadline starts here and is kept across redispatches.
  submit (request) {
    this.classify(request)
    if (this.queueTimeout > 0) request.deadline = this.clock.now() + this.queueTimeout
    this.overload?.arrived(request)
    // A place freed for a hand-off still due is the queue's: it is handed on first.
    if (this.handOffsDue > 0) this.pump()
    if (request.longLived || this.queue.length === 0) {
      const record = this.pick(request)
      if (record) { this.take(request, record); return record }
    }
    if (this.isFull() && (request.longLived || !this.makeRoom(request))) return 'full'
    this.enqueue(request, false)
    this.overload?.police()
    return 'queued'
  }

  classify (request) {
    if (request.priority === undefined) request.priority = this.priorityOf(request.req)
  }

  isFull () {
    return this.maxQueue !== undefined && this.queued >= this.maxQueue
  }

  pick (request) {
    if (request.pinned && this.workers.mayServe(request.pinned)) return request.pinned
    if (request.replayed && !request.longLived) {
      return this.workers.pickForSuspect({ besideStreams: this.clock.now() >= request.aloneUntil })
    }
    return request.longLived ? this.workers.pickForStream() : this.workers.pickFree()
  }

  // Whether submit(request) would take it now, changing nothing: asked before the body is read.
  wouldTake (request) {
    this.classify(request)
    if (request.longLived) return !this.isFull() || this.workers.pickForStream() !== undefined
    if (this.queue.length === 0 && this.workers.anyFree()) return true
    return !this.isFull() || this.queue.lastBelow(request.priority, this.lastServed) !== null
  }

  // A full queue takes a higher class's request: the lower one served last gives way.
  makeRoom (request) {
    const node = this.queue.lastBelow(request.priority, this.lastServed)
    if (!node) return false
    this.turnAway(node.item, 'queue_full')
    return true
  }

  // A redispatched request goes where its class is served next; its deadline still runs from arrival.
  requeue (request) {
    if (request.replayed && request.aloneUntil === null) {
      request.aloneUntil = this.clock.now() + REPLAY_ALONE_MS
      this.clock.setTimeout(() => this.pump(), REPLAY_ALONE_MS + 1).unref()
    }
    this.overload?.arrived(request)
    this.enqueue(request, true)
    this.handOff(() => {
      this.pump()
      this.overload?.police()
    })
  }

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

  enqueue (request, servedNext) {
    const now = this.clock.now()
    const cls = request.priority
    request.queuedAt = now
    if (request.longLived) request.queueNode = servedNext ? this.streams.unshift(request) : this.streams.push(request)
    else {
      request.queueNode = servedNext
        ? this.queue.addNext(request, cls, this.newestFirst(cls))
        : this.queue.add(request, cls)
      this.overload?.enqueued(now)
    }
    if (this.queueTimeout > 0) {
      request.queueTimer = this.clock.setTimeout(() => this.expire(request), Math.max(0, request.deadline - now))
    }
  }

  dequeue (request) {
    if (request.longLived) this.streams.remove(request.queueNode)
    else {
      this.queue.remove(request.queueNode)
      this.overload?.left(request)
    }
    request.queueNode = null
    this.clock.clearTimeout(request.queueTimer)
    request.queueTimer = null
    request.queueMs = (request.queueMs || 0) + this.clock.now() - request.queuedAt
  }

  expire (request) {
    if (!request.queueNode) return
    this.turnAway(request, 'queue_timeout')
    this.checkDrains()
  }

  turnAway (request, reason) {
    this.dequeue(request)
    this.onTurnedAway(request, reason)
  }

  cancel (request) {
    if (!request.queueNode) return false
    this.dequeue(request)
    this.overload?.gaveUp(request)
    this.checkDrains()
    return true
  }

  take (request, record) {
    this.overload?.served(request)
    this.workers.take(record, request)
    request.rendering = !request.longLived
  }

  assign (request, record) {
    this.take(request, record)
    this.onAssign(request, record)
  }

  awaiting (record, open, last) {
    record.awaiting(open, last)
    this.pump()
  }

  headArrived (record, request) {
    if (!request.rendering) return
    request.rendering = false
    record.headArrived(request)
    this.pumpSoon()
    this.checkDrains()
  }

  release (record, request) {
    this.workers.giveBack(record, request, request.rendering)
    request.rendering = false
    this.workers.forgetIfDone(record)
    this.pumpSoon()
    this.checkDrains()
  }

  // Highest class first; within it the oldest, or the newest while that class's queue stands.
  pump () {
    while (this.streams.length > 0) {
      const request = this.streams.head.item
      const record = this.pick(request)
      if (!record) break
      this.dequeue(request)
      this.assign(request, record)
    }
    while (this.queue.length > 0) {
      const request = this.queue.next(this.newestFirst).item
      const record = this.pick(request)
      if (!record) break
      this.overload?.taken()
      this.dequeue(request)
      this.assign(request, record)
    }
  }

  // Called before the failed attempt's release, so that the release cannot hand it the next request.
  bench (record) {
    const timer = this.clock.setTimeout(() => this.unbench(record), BENCH_AFTER_FAILURE_MS)
    timer.unref()
    record.bench(timer)
  }

  unbench (record) {
    if (record.unbench()) this.pump()
  }

  stuck () {
    if (this.handOffsDue > 0) return false
    const cursor = this.workers.rrCursor // asking moves --balance rr's cursor: put it back
    const next = this.queue.next(this.newestFirst)
    const stuck = (next !== null && this.pick(next.item) !== undefined) ||
      (this.streams.length > 0 && this.pick(this.streams.head.item) !== undefined)
    this.workers.rrCursor = cursor
    return stuck
  }

  // Resolves once nothing given to `record` still renders and, with `untilQueueEmpty` (stopping),
  // the queue is empty too. A reloading pool's drained worker gets nothing new meanwhile.
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
