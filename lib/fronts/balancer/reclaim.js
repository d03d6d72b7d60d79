'use strict'

// Gives the memory of a burst of request bodies back to the system once the burst is over.
//
// A Buffer's memory is freed only when V8 collects the Buffer, and V8 collects when JavaScript
// allocates: a process gone quiet collects little. After a burst of large POSTs the bodies are
// garbage the moment their answers begin (BalancedRequest drops them), yet the supervisor keeps
// its peak RSS until V8 next runs a full collection on its own (15 to 35 s after a burst of 100
// POSTs of 4 MB, measured; V8's memory reducer decides when). So once no body has been held
// for `quietMs`, after at least `minBytes` of bodies were let go since the last collection (one
// per burst), one full collection is run (a few milliseconds for the supervisor's small heap).
// Under steady traffic V8's own collections, driven by the bodies' allocations, keep the
// garbage small; this is only for the quiet after.
//
// The collection is `globalThis.gc`, which exists only when the process was given it: `node
// --expose-gc`, or bin/pool.js, which gives it to its own process before anything else is loaded.
// A library never changes its host's V8 flags; without `gc` this does nothing.

const MB = 1024 * 1024

// Bodies let go that are worth a collection: a quarter of the budget, at most 32 MiB.
const WORTH_AT_MOST = 32 * MB

function worthReclaiming (budget) {
  return budget > 0 ? Math.min(WORTH_AT_MOST, Math.floor(budget / 4)) : WORTH_AT_MOST
}

// The process's full collection, if it has one.
function fullCollection () {
  return typeof globalThis.gc === 'function' ? globalThis.gc : null
}

class Reclaimer {
  // emptySince(): when the bytes held last came down to 0 (performance.now()), or null while
  // some are held (BodyBudget.emptySince). garbage(): bytes of Buffers V8 still keeps (freed or
  // not). collect(): a full collection, or null for none.
  constructor ({
    emptySince, garbage = () => process.memoryUsage().arrayBuffers, collect = fullCollection(),
    minBytes = WORTH_AT_MOST, quietMs = 1000
  }) {
    this.emptySince = emptySince
    this.garbage = garbage
    this.collect = collect
    this.minBytes = minBytes
    this.quietMs = quietMs
    this.released = 0 // body bytes let go since the last collection
    this.timer = null
    this.collections = 0
  }

  // `bytes` of bodies were let go.
  onRelease (bytes) {
    this.released += bytes
    if (this.collect && this.released >= this.minBytes && this.emptySince() !== null) this.schedule(this.quietMs)
  }

  schedule (wait) {
    if (this.timer) return
    this.timer = setTimeout(() => this.run(), wait)
    this.timer.unref()
  }

  run () {
    this.timer = null
    const since = this.emptySince()
    // A burst goes on: the release that ends it schedules this again.
    if (since === null) return
    // Bodies came and went meanwhile: not quiet for long enough yet.
    const quietFor = performance.now() - since
    if (quietFor < this.quietMs) return this.schedule(this.quietMs - quietFor)
    this.released = 0
    if (this.garbage() < this.minBytes) return // V8 got there first
    this.collections++
    this.collect()
  }

  stop () {
    clearTimeout(this.timer)
    this.timer = null
  }
}

module.exports = { Reclaimer, fullCollection, worthReclaiming }
