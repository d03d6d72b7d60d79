'use strict'

// The pool's phase, idle → starting → running → stopping → stopped, and the promises of start(), stop() and
// until(): each settles once, a stop during start answers the start, nothing hangs once stopped.

const { poolError, codes } = require('../errors')

class PoolPhase {
  constructor () {
    this.name = 'idle'
    this.failure = null
    this.startWaiter = null // { resolve, reject } of the promise start() returns
    this.stopPromise = null
    this.stopWaiter = null
    this.waiters = [] // until(): { done(): boolean, resolve, reject }
  }

  is (...names) { return names.includes(this.name) }

  begin () {
    if (this.name !== 'idle') throw poolError(codes.BAD_OPTION, 'pool.start() was already called')
    this.name = 'starting'
  }

  // start() awaits port checks, listeners and fronts: a stop() in between wins.
  assertStarting () {
    if (this.name !== 'starting') throw poolError(codes.STOPPING, 'the pool was stopped before it finished starting')
  }

  // start()'s checks failed before any worker; false when a stop took over.
  abandon () {
    if (this.name !== 'starting') return false
    this.name = 'stopped'
    return true
  }

  untilRunning () {
    return new Promise((resolve, reject) => { this.startWaiter = { resolve, reject } })
  }

  running (value) {
    this.name = 'running'
    this.startWaiter.resolve(value)
  }

  // Fatal; true the first time. From then on the failure, not a stop, answers a start in progress.
  fail (err) {
    if (this.failure) return false
    this.failure = err
    return true
  }

  rejectStartAfter (stopped) {
    const waiter = this.startWaiter
    stopped.then(() => waiter.reject(this.failure))
  }

  // → { promise, began }.
  stop () {
    if (this.stopPromise) return { promise: this.stopPromise, began: false }
    if (this.is('idle', 'stopped')) return { promise: Promise.resolve({ clean: true }), began: false }
    const wasStarting = this.name === 'starting'
    this.name = 'stopping'
    this.stopPromise = new Promise((resolve) => { this.stopWaiter = resolve })
    if (wasStarting && this.startWaiter && !this.failure) {
      this.startWaiter.reject(poolError(codes.STOPPING, 'the pool was stopped before it finished starting'))
    }
    return { promise: this.stopPromise, began: true }
  }

  // Every process is gone; stop()'s promise settles later, with ended().
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

  // Resolves once `done()` holds at a settle(); rejects if the pool stops first.
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
