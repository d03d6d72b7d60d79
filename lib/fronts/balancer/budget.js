'use strict'

// Bytes held against a limit over all requests: the base of the body and response budgets.

const os = require('node:os')

const MB = 1024 * 1024

// Default limit: 1/16 of available memory, at most 256 MiB, at least `minimum`.
const DEFAULT_SHARE_OF_RAM = 1 / 16
const DEFAULT_CAP = 256 * MB

// The machine's memory, or a smaller cgroup limit (constrainedMemory(): 0 or huge for none).
function availableMemory () {
  const total = os.totalmem()
  const constrained = typeof process.constrainedMemory === 'function' ? process.constrainedMemory() : 0
  return constrained > 0 && constrained < total ? constrained : total
}

function defaultBudget (minimum, memory = availableMemory()) {
  return Math.max(minimum, Math.min(DEFAULT_CAP, Math.floor(memory * DEFAULT_SHARE_OF_RAM)))
}

class Budget {
  // limit: bytes, 0 for none (still counted). onRelease(bytes): reclaim.js listens.
  constructor (limit, { onRelease = () => {} } = {}) {
    this.limit = limit
    this.held = 0
    this.emptySince = performance.now() // when `held` last came down to 0; null while above
    this.onRelease = onRelease
  }

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
