'use strict'

// How many request-body bytes the balancer holds at once, over all requests (--body-budget).
// Bodies are read whole before a worker is taken (buffering.js), so without a bound a burst of
// large POSTs behind busy workers costs the supervisor their sum in memory.
//
// A body holds the bytes it has sent, as they arrive, never the length it announces: a client
// can announce a body and send nothing, and an announced length held from arrival would let a
// few idle connections refuse every body for --request-timeout. The announced length is only
// checked against the room left when the request arrives (one that cannot fit now is refused
// before a byte of it is read); a body whose next bytes do not fit is refused then, and gives
// back what it held. A hold is given back once the body can no longer be sent to a worker (its
// answer begins, or its client leaves): see BalancedRequest.

const os = require('node:os')

const MB = 1024 * 1024

// The default: 1/16 of the machine's memory, at most 256 MiB, and never less than one body of
// --max-body (the largest body allowed must be able to come in). The response budget
// (response-budget.js) takes the same share, with its own minimum.
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

function defaultBodyBudget (maxBody, memory) {
  return defaultBudget(maxBody, memory)
}

class BodyBudget {
  // limit: bytes; 0 means no limit (the bytes are still counted). onRelease(bytes): a hold let
  // go of `bytes` (reclaim.js listens, and asks emptySince how long nothing has been held).
  constructor (limit, { onRelease = () => {} } = {}) {
    this.limit = limit
    this.held = 0
    this.emptySince = performance.now() // when `held` last came down to 0; null while above
    this.onRelease = onRelease
  }

  // Whether `bytes` more fit now: the one rule, for an announced length at arrival and for
  // each chunk as it comes.
  fits (bytes) {
    return this.limit === 0 || this.held + bytes <= this.limit
  }

  // A hold of nothing yet for a body that announces `announced` bytes (0 for a chunked body,
  // whose length is unknown), or null when they do not fit now.
  admit (announced) {
    return this.fits(announced) ? new BodyHold(this) : null
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

class BodyHold {
  constructor (budget) {
    this.budget = budget
    this.bytes = 0
  }

  // Hold `more` bytes too (a chunk that arrived). False, and nothing more held, when they
  // do not fit or the hold was already released.
  grow (more) {
    if (this.budget === null || !this.budget.fits(more)) return false
    this.budget.take(more)
    this.bytes += more
    return true
  }

  // Give the bytes back. Releasing twice is harmless.
  release () {
    const { budget, bytes } = this
    if (budget === null) return
    this.budget = null
    this.bytes = 0
    budget.giveBack(bytes)
  }
}

module.exports = { BodyBudget, defaultBudget, defaultBodyBudget, availableMemory, DEFAULT_SHARE_OF_RAM, DEFAULT_CAP }
