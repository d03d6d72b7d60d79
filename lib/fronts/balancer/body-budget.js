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

const { Budget, defaultBudget, availableMemory } = require('./budget')

// By default, never less than one body of --max-body: the largest body allowed must be able to
// come in.
function defaultBodyBudget (maxBody, memory) {
  return defaultBudget(maxBody, memory)
}

class BodyBudget extends Budget {
  // A hold of nothing yet for a body that announces `announced` bytes (0 for a chunked body,
  // whose length is unknown), or null when they do not fit now: the one rule, for an announced
  // length at arrival and (BodyHold.grow) for each chunk as it comes.
  admit (announced) {
    return this.fits(announced) ? new BodyHold(this) : null
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

module.exports = { BodyHold, BodyBudget, defaultBodyBudget, availableMemory }
