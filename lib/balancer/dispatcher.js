'use strict'

// Matches requests to workers: one FIFO queue for the whole pool, at most `maxconn` requests
// per worker. A request goes straight to a free worker only when nobody is waiting, so the
// order of arrival is the order of service. Whoever frees a worker calls release(), which hands
// it the head of the queue at once.
//
// The invariant, checked by the tests through stuck(): whenever the queue is not empty, no
// worker can take a request. Every way a worker becomes able to take one ends in pump(), in the
// same step: a release, a worker in rotation, the end of a bench (its own timer lifts it).

// A worker that refused or reset a connection gets no request for this long, unless the
// supervisor reports it ready again sooner: the supervisor's word on a dying worker may be a few
// milliseconds behind the socket's.
const BENCH_AFTER_FAILURE_MS = 1000

const { FifoQueue } = require('./queue')

class Dispatcher {
  // onAssign(job, record): the job now owns one of record's maxconn places; it must call
  //   release(record) exactly once when done with it.
  // onQueueTimeout(job): the job waited past its deadline and has left the queue.
  constructor ({ workers, queueTimeout, maxQueue, onAssign, onQueueTimeout }) {
    this.workers = workers
    this.queueTimeout = queueTimeout
    this.maxQueue = maxQueue
    this.onAssign = onAssign
    this.onQueueTimeout = onQueueTimeout
    this.queue = new FifoQueue()
    this.drains = new Set()
  }

  get queued () { return this.queue.length }

  // Returns 'assigned', 'queued', or 'full' (the caller answers 503; the job was not kept).
  submit (job) {
    if (this.queue.length === 0) {
      const record = this.workers.pickFree()
      if (record) { this.assign(job, record); return 'assigned' }
    }
    if (this.maxQueue !== undefined && this.queue.length >= this.maxQueue) return 'full'
    this.enqueue(job, false)
    return 'queued'
  }

  // A request that must try another worker (redispatch) goes back to the head of the queue:
  // it has waited longer than anyone behind it. Its queue deadline still runs from arrival.
  requeue (job) {
    this.enqueue(job, true)
    this.pump()
  }

  enqueue (job, atHead) {
    job.queuedAt = performance.now()
    job.queueNode = atHead ? this.queue.unshift(job) : this.queue.push(job)
    if (this.queueTimeout > 0) {
      if (job.deadline === undefined) job.deadline = job.queuedAt + this.queueTimeout
      job.queueTimer = setTimeout(() => this.expire(job), Math.max(0, job.deadline - job.queuedAt))
    }
  }

  dequeue (job) {
    this.queue.remove(job.queueNode)
    job.queueNode = null
    clearTimeout(job.queueTimer)
    job.queueTimer = null
    job.queueMs = (job.queueMs || 0) + (performance.now() - job.queuedAt)
  }

  expire (job) {
    if (!job.queueNode) return
    this.dequeue(job)
    this.onQueueTimeout(job)
    this.checkDrains()
  }

  // The client went away: a queued job leaves without ever reaching a worker.
  cancel (job) {
    if (!job.queueNode) return false
    this.dequeue(job)
    this.checkDrains()
    return true
  }

  assign (job, record) {
    record.inFlight++
    this.onAssign(job, record)
  }

  release (record) {
    record.inFlight--
    this.pump()
    this.checkDrains()
  }

  // Give free workers to the head of the queue, for as long as both last.
  pump () {
    while (this.queue.length > 0) {
      const record = this.workers.pickFree()
      if (!record) break
      const job = this.queue.head.item
      this.dequeue(job)
      this.assign(job, record)
    }
  }

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
    let job
    while ((job = this.queue.head && this.queue.head.item)) {
      this.dequeue(job)
      fn(job)
    }
    for (const d of this.drains) d.resolve()
    this.drains.clear()
  }
}

module.exports = { Dispatcher, BENCH_AFTER_FAILURE_MS }
