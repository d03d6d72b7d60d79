'use strict'

// The pool's own life, idle → starting → running → stopping → stopped, and the promises that
// wait on it: start()'s, stop()'s and until()'s. The supervisor decides when the phase moves;
// this keeps the promises honest: each settles exactly once, a stop during start answers the
// start, and nothing is left hanging once the pool has stopped. (A worker's life is its
// handle's, a WorkerHandle.)

const { poolError, codes } = require('../errors')

class PoolPhase {
  constructor () {
    this.name = 'idle'
    this.failure = null // the error that made the pool fail, if one did
    this.startWaiter = null // { resolve, reject } of the promise start() returns
    this.stopPromise = null
    this.stopWaiter = null
    this.waiters = [] // until(): { done(): boolean, resolve, reject }
  }

  is (...names) { return names.includes(this.name) }

  // start(): idle → starting, once.
  begin () {
    if (this.name !== 'idle') throw poolError(codes.BAD_OPTION, 'pool.start() was already called')
    this.name = 'starting'
  }

  // start() awaits port checks, listeners and fronts: a stop() in between wins.
  assertStarting () {
    if (this.name !== 'starting') throw poolError(codes.STOPPING, 'the pool was stopped before it finished starting')
  }

  // start()'s own checks failed, before any worker: nothing is left to stop. False when a stop
  // had already taken over.
  abandon () {
    if (this.name !== 'starting') return false
    this.name = 'stopped'
    return true
  }

  // The promise start() returns once its checks passed: settled by running() or by a stop.
  untilRunning () {
    return new Promise((resolve, reject) => { this.startWaiter = { resolve, reject } })
  }

  running (value) {
    this.name = 'running'
    this.startWaiter.resolve(value)
  }

  // The pool failed with `err`, fatally. True the first time; from then on `failure` is it, and
  // a stop no longer answers a start in progress (the failure will).
  fail (err) {
    if (this.failure) return false
    this.failure = err
    return true
  }

  // A start that failed answers with its failure once `stopped` (the stop the failure caused)
  // has settled.
  rejectStartAfter (stopped) {
    const waiter = this.startWaiter
    stopped.then(() => waiter.reject(this.failure))
  }

  // stop(): → stopping. Returns stop()'s promise, and whether this call began the stop.
  stop () {
    if (this.stopPromise) return { promise: this.stopPromise, began: false }
    if (this.is('idle', 'stopped')) return { promise: Promise.resolve({ clean: true }), began: false }
    const wasStarting = this.name === 'starting'
    this.name = 'stopping'
    this.stopPromise = new Promise((resolve) => { this.stopWaiter = resolve })
    // A start still in progress ends here, with an answer rather than a promise left hanging
    // (a failed start answers with its own error: the supervisor's fail()).
    if (wasStarting && this.startWaiter && !this.failure) {
      this.startWaiter.reject(poolError(codes.STOPPING, 'the pool was stopped before it finished starting'))
    }
    return { promise: this.stopPromise, began: true }
  }

  // Every process is gone: stopped at once (the ticks while the fronts close do nothing), and
  // nothing waits for a state that will not come. stop()'s promise settles with ended().
  end () {
    this.name = 'stopped'
    for (const w of this.waiters.splice(0)) w.reject(poolError(codes.STOPPING, 'the pool stopped'))
  }

  ended (result) { this.stopWaiter(result) }

  assertRunning (what) {
    if (this.name === 'running') return
    const code = this.is('stopping', 'stopped') ? codes.STOPPING : codes.NOT_STARTED
    throw poolError(code, `cannot ${what}: the pool is ${this.name}`)
  }

  // Resolves once `done()` holds, as checked by settle(); rejects if the pool stops first.
  until (done) {
    return new Promise((resolve, reject) => {
      if (this.name === 'stopped') return reject(poolError(codes.STOPPING, 'the pool stopped'))
      this.waiters.push({ done, resolve, reject })
    })
  }

  settle () {
    for (const w of [...this.waiters]) {
      if (w.done()) { this.waiters.splice(this.waiters.indexOf(w), 1); w.resolve() }
    }
  }
}

module.exports = { PoolPhase }
