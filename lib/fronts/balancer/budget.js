'use strict'

// Bytes the balancer holds in memory against a limit, over all requests: what the body budget
// (body-budget.js) and the response budget (response-budget.js) have in common. Each counts the
// bytes held now and knows since when none are, which the reclaimer reads (reclaim.js) to give
// a burst's memory back once it is over.

const os = require('node:os')

const MB = 1024 * 1024

// The default limit of each: 1/16 of the memory this process may use, at most 256 MiB, and never
// less than what one request may need (its `minimum`).
const DEFAULT_SHARE_OF_RAM = 1 / 16
const DEFAULT_CAP = 256 * MB

// The memory this process may use: the machine's, or less in a container whose cgroup limits
// it (process.constrainedMemory() says "no limit" with 0, or with a huge number).
function availableMemory () {
  const total = os.totalmem()
  const constrained = typeof process.constrainedMemory === 'function' ? process.constrainedMemory() : 0
  return constrained > 0 && constrained < total ? constrained : total
}

function defaultBudget (minimum, memory = availableMemory()) {
  return Math.max(minimum, Math.min(DEFAULT_CAP, Math.floor(memory * DEFAULT_SHARE_OF_RAM)))
}

class Budget {
  // limit: bytes; 0 means no limit (the bytes are still counted). onRelease(bytes): bytes were
  // given back (reclaim.js listens, and asks emptySince how long nothing has been held).
  constructor (limit, { onRelease = () => {} } = {}) {
    this.limit = limit
    this.held = 0
    this.emptySince = performance.now() // when `held` last came down to 0; null while above
    this.onRelease = onRelease
  }

  // Whether `bytes` more fit now.
  fits (bytes) {
    return this.limit === 0 || this.held + bytes <= this.limit
  }

  take (bytes) {
    this.held += bytes
    if (this.held > 0) this.emptySince = null
  }

  giveBack (bytes) {
    this.held -= bytes
    if (this.held === 0 && this.emptySince === null) this.emptySince = performance.now()
    this.onRelease(bytes)
  }
}

module.exports = { Budget, defaultBudget, availableMemory, DEFAULT_SHARE_OF_RAM, DEFAULT_CAP }
