'use strict'

// Gives the memory of a burst of request bodies back to the system once the burst is over.
//
// A Buffer's memory is freed only when V8 collects the Buffer, and V8 collects when JavaScript
// allocates: an idle process collects nothing. After a burst of large POSTs the bodies are
// garbage the moment their answers begin (BalancedRequest drops them), yet the supervisor
// would keep its peak RSS until its next busy moment, for minutes or for ever. So once no body
// is held any more, after at least `minBytes` of bodies were let go, and the balancer has
// stayed so for `quietMs`, one full collection is run (a few milliseconds for the supervisor's
// small heap), at most once per `minIntervalMs`. Under steady traffic V8's own collections,
// driven by the bodies' allocations, keep the garbage small; this is only for the quiet after.

const v8 = require('node:v8')
const vm = require('node:vm')

const MB = 1024 * 1024

// Bodies let go that are worth a collection: a quarter of the budget, at most 32 MiB.
const WORTH_AT_MOST = 32 * MB

function worthReclaiming (budget) {
  return budget > 0 ? Math.min(WORTH_AT_MOST, Math.floor(budget / 4)) : WORTH_AT_MOST
}

// V8's full collection, as `node --expose-gc` offers it. The flag only adds `gc` to contexts
// created after it is set, so it is set for one new context and cleared again: the process's
// own global object never gets a `gc`. Null if this V8 refuses.
function fullCollection () {
  if (typeof globalThis.gc === 'function') return globalThis.gc
  try {
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc')
    v8.setFlagsFromString('--no-expose-gc')
    return typeof gc === 'function' ? gc : null
  } catch {
    return null
  }
}

class Reclaimer {
  // held(): the body bytes held now. garbage(): bytes of Buffers V8 still keeps (freed or not).
  constructor ({ held, garbage = () => process.memoryUsage().arrayBuffers, collect = fullCollection(), minBytes = WORTH_AT_MOST, quietMs = 1000, minIntervalMs = 5000 }) {
    this.held = held
    this.garbage = garbage
    this.collect = collect
    this.minBytes = minBytes
    this.quietMs = quietMs
    this.minIntervalMs = minIntervalMs
    this.released = 0 // body bytes let go since the last collection
    this.lastAt = -Infinity
    this.timer = null
    this.collections = 0
  }

  // `bytes` of bodies were let go.
  onRelease (bytes) {
    this.released += bytes
    if (this.collect && this.held() === 0 && this.released >= this.minBytes) this.schedule()
  }

  schedule () {
    if (this.timer) return
    const wait = Math.max(this.quietMs, this.lastAt + this.minIntervalMs - performance.now())
    this.timer = setTimeout(() => this.run(), wait)
    this.timer.unref()
  }

  run () {
    this.timer = null
    // A new burst began meanwhile: it is V8's to collect as it grows; the next quiet moment
    // schedules this again.
    if (this.held() > 0) return
    this.released = 0
    if (this.garbage() < this.minBytes) return // V8 got there first
    this.lastAt = performance.now()
    this.collections++
    this.collect()
  }

  stop () {
    clearTimeout(this.timer)
    this.timer = null
  }
}

module.exports = { Reclaimer, fullCollection, worthReclaiming }
