'use strict'

// One client request as the balancer carries it. Stages: reading (its body, before any worker),
// queued, on-worker, responding, tunnel (WebSocket after 101), done; the stage the client left in
// is logged. Body bytes are held on the body budget until responding or done (never resent then).
// Every field is declared here; nothing else is added on the way.
const { hasBody } = require('./buffering')

class BalancedRequest {
  constructor (req, res) {
    this.req = req // Node's IncomingMessage (null once a tunnel: pipeline.js join)
    this.res = res // Node's ServerResponse: the client's answer (null once a tunnel)
    this.id = null // X-Request-Id: a trusted peer's if it sent a usable one (pipeline.js, headers.js)
    this.trusted = false // its peer is one --trust-proxy names: its forwarding headers are believed
    this.method = req.method
    this.url = req.url
    this.arrivedAt = performance.now() // the access log's total time counts from here
    this.stage = 'reading' // see the stages above; changed only through enter()

    this.hasBody = hasBody(req) // it announced a body, judged once, from its head
    this.body = null // the whole body once read (a Buffer), null without one or once dropped
    this.bodyHold = null // its bytes on the body budget, from admission until dropBody()

    this.priority = undefined // its class (priority.js), decided once, at its first admission
    this.deadline = undefined // performance.now() past which it is turned away while queued (--queue-timeout)
    this.queuedAt = 0 // when it last entered the queue
    this.queueNode = null // its place in the queue (queue.js) while queued, else null
    this.queueTimer = null // the timer of its deadline while queued
    this.queueMs = 0 // time spent queued, over every time it was
    this.firstWaitMs = 0 // time it waited before its first worker

    this.head = null // the request line and headers for the worker, built once (headers.js)
    this.record = null // the worker (workers.js WorkerRecord) of the latest attempt
    this.holding = null // the worker whose place this request holds now, until released
    this.rendering = false // and its render place too: no response head yet (dispatcher.js)
    this.longLived = false // a stream (protocol/long-lived.js): it takes no render place
    this.attempt = null // the latest attempt (proxy.js), to send or discard its response
    this.exchange = null // its X-Pool-Request: the pool's own id of that attempt (headers.js)
    this.relay = null // the relay (relay.js) of the attempt whose response goes to the client
    this.assignedAt = 0 // when it was last given a worker: the worker's busy time counts from here
    this.attempts = 0 // attempts on workers so far
    this.redispatches = 0 // after refused connections (counted against --retries)
    this.replayed = false // after a worker died holding it (a GET or HEAD is replayed once)
    this.aloneUntil = null // replayed: until when it waits for a worker holding nothing (dispatcher.js)

    this.upgrade = null // the bytes the client sent after its head, for the worker after the 101
    this.tunnel = null // once the worker switched protocols: the Tunnel, until it ends
    this.session = null // a Socket.IO request (sessions.js): 'open' for a handshake, else its session id
    this.pinned = null // the worker holding its session, if known

    this.clientGone = false // the client's connection closed before its answer was finished
    this.goneAt = null // the stage it was at when the client left
    this.reason = null // why the balancer answered it itself (replies.js), or why it ended unanswered
    this.lingering = false // answered before its body was read; its connection closes lingering (lingering.js)
  }

  enter (stage) {
    this.stage = stage
    if (stage === 'responding' || stage === 'done') this.dropBody()
  }

  dropBody () {
    this.body = null
    if (this.bodyHold) this.bodyHold.giveBack()
    this.bodyHold = null
  }

  clientLeft () {
    this.clientGone = true
    this.goneAt = this.stage
  }
}

module.exports = { BalancedRequest }
