'use strict'

// Gives a burst of request bodies' memory back to the system once the burst is over. V8 collects
// when JavaScript allocates, so a quiet supervisor kept its peak RSS for tens of seconds after large
// POSTs. Once no body has been held for `quietMs`, after `minBytes` were let go, one full collection
// runs. It needs `globalThis.gc` (`--expose-gc`; bin/pool.js gives it); without it this does nothing.

const MB = 1024 * 1024

// Worth a collection: a quarter of the budget, at most 32 MiB.
const WORTH_AT_MOST = 32 * MB

function worthReclaiming (budget) {
  return budget > 0 ? Math.min(WORTH_AT_MOST, Math.floor(budget / 4)) : WORTH_AT_MOST
}

function fullCollection () {
  return typeof globalThis.gc === 'function' ? globalThis.gc : null
}

class Reclaimer {
  // emptySince(): when held bytes last reached 0, or null while some are held (performance.now()).
  // garbage(): bytes of Buffers V8 still keeps. collect(): a full collection, or null.
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
    if (since === null) return
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
