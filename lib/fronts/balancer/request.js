'use strict'

// One client request as the balancer carries it, and the stage it is at:
//
//   reading     its body is being read from the client (buffering, before any worker)
//   queued      waiting for a free worker (in the Dispatcher's queue; again after a redispatch)
//   on-worker   an attempt on a worker is running: written, waiting for or reading its answer
//   responding  the worker's answer (or the balancer's own) is being sent to the client
//   done        the client's connection is finished with it, answered or not
//
// The stage a request was at when its client went away is in its access-log line.
//
// Its body is held (and counted on the body budget, body-budget.js) from its arrival until it
// is responding or done: from then on it is never sent to a worker again.

const { requestId } = require('./headers')

class BalancedRequest {
  constructor (req, res) {
    this.req = req
    this.res = res
    this.id = requestId(req)
    this.method = req.method
    this.url = req.url
    this.stage = 'reading'
    this.arrivedAt = performance.now()
    this.body = null
    this.bodyHold = null // its bytes on the body budget
    this.priority = undefined // its class (priority.js), decided at its arrival
    this.head = null // the request line and headers for the worker, built once
    this.record = null // the worker of the latest attempt
    this.holding = null // the worker whose place this request holds now, until it is released
    this.attempt = null
    this.assignedAt = 0
    this.queueMs = 0
    this.attempts = 0
    this.redispatches = 0 // after refused connections
    this.replayed = false // after a worker died holding it
    this.clientGone = false
    this.goneAt = null // the stage it was at when the client left
    this.reason = null // why the balancer answered it itself, or why it ended unanswered
  }

  enter (stage) {
    this.stage = stage
    if (stage === 'responding' || stage === 'done') this.dropBody()
  }

  dropBody () {
    this.body = null
    if (this.bodyHold) this.bodyHold.release()
    this.bodyHold = null
  }

  clientLeft () {
    this.clientGone = true
    this.goneAt = this.stage
  }
}

module.exports = { BalancedRequest }
