'use strict'

// Request-body bytes the balancer holds at once, over all requests (--body-budget); bodies are read
// whole before a worker is taken (buffering.js). A body holds the bytes it has sent, never the length
// it announces (idle clients announcing bodies would refuse everyone's); the announced length is
// only checked against the room at arrival. Holds are given back as in BalancedRequest.

const { Budget, defaultBudget, availableMemory } = require('./budget')

// By default never less than one --max-body body, so the largest allowed body can come in.
function defaultBodyBudget (maxBody, memory) {
  return defaultBudget(maxBody, memory)
}

class BodyBudget extends Budget {
  // A hold of nothing yet for a body announcing `announced` bytes (0: chunked), or null if they do
  // not fit now.
  admit (announced) {
    return this.fits(announced) ? new BodyHold(this) : null
  }
}

class BodyHold {
  constructor (budget) {
    this.budget = budget
    this.bytes = 0
  }

  // Hold `more` bytes too; false, holding nothing more, if they do not fit or the hold was given back.
  grow (more) {
    if (this.budget === null || !this.budget.fits(more)) return false
    this.budget.take(more)
    this.bytes += more
    return true
  }

  // Idempotent.
  giveBack () {
    const { budget, bytes } = this
    if (budget === null) return
    this.budget = null
    this.bytes = 0
    budget.giveBack(bytes)
  }
}

module.exports = { BodyHold, BodyBudget, defaultBodyBudget, availableMemory }
