'use strict'

// One attempt to forward a buffered request to one worker, and the worker's response on its way
// to the client. The attempt is the exchange's handler (upstream.js): the response parser's
// output comes straight here, and its body goes into the attempt's relay (relay.js), which
// writes it through to the client and keeps reading the worker ahead of a slower client, so
// that the worker is free once its response ends. The app chooses otherwise with
// X-Accel-Buffering (headers.js): `no`, no read-ahead; `yes`, store and forward.
//
// The attempt tells its owner (the pipeline) what happens, always on a microtask, so that none
// of the owner's code runs inside the response parser (whose throws mean "bad bytes from the
// worker"):
//   owner.interim(head)     a 1xx before the response (103 Early Hints); any number of times
//   owner.settled(outcome)  exactly once:
//     { type: 'response', head, complete, stored, length }
//         The response begins: its head, with every byte of the read that brought it parsed
//         (so a malformed body in that read fails the attempt instead). complete: the worker
//         has sent all of it already (length bytes of body), and is free; stored: and it was
//         held whole at the app's request (X-Accel-Buffering: yes). Call sendTo(res, done) to
//         send it, or discard(done).
//     { type: 'failed', failure, error }
//         Before the response began. failure: refused | died | bad_response | broken_response
//         (the failure table's) | timeout. After 'timeout' the worker is still
//         working on the request: call discard(done), which reads and drops whatever it still
//         sends, so that a worker given up on gets no new request while it is still rendering
//         the old one. After any other failure the worker holds nothing of this request.
//   done(failure)           after sendTo() or discard(), once: the worker's side is over, sent
//                           whole (failure null) or broken off (bad_response, broken_response).

const { ResponseRelay } = require('./relay')
const { accelBuffering } = require('./headers')
const { PoolError, codes } = require('../../errors')

class ProxyTimeout extends PoolError {
  constructor (ms) { super(codes.PROXY_TIMEOUT, `no answer within ${ms} ms`) }
}

// X-Accel-Buffering → the relay's mode.
const MODES = { no: 'no', yes: 'store' }

class Attempt {
  // options: { maxResponseBuffer, proxyTimeout, reuse, budget (ResponseBudget), sendTimeout,
  // onSendTimeout }. owner: { interim(head), settled(outcome) }.
  constructor (record, { method, head, body }, options, owner) {
    this.owner = owner
    this.limit = options.maxResponseBuffer
    this.settled = false
    this.head = null
    this.done = null // (failure) => void, once sendTo() or discard() was called
    this.outcome = undefined // the worker's side, once over: null (whole) or the failure
    this.timer = null
    this.relay = new ResponseRelay({
      limit: options.maxResponseBuffer,
      budget: options.budget,
      sendTimeout: options.sendTimeout,
      onSendTimeout: options.onSendTimeout,
      worker: this
    })
    this.exchange = record.connections.request(method, head, body, this, { reuse: options.reuse })
    if (options.proxyTimeout > 0 && !this.settled) {
      this.timer = setTimeout(() => this.timedOut(options.proxyTimeout), options.proxyTimeout)
    }
  }

  // ---- the exchange's handlers: the response parser's output -------------------------------

  onInterim (head) {
    if (!this.settled) queueMicrotask(() => this.owner.interim(head))
  }

  onHead (head) {
    clearTimeout(this.timer)
    this.head = head
    this.relay.mode = MODES[accelBuffering(head)] || 'ahead'
  }

  onBody (chunk) { this.relay.push(chunk) }

  onReadEnd () {
    if (this.settled) return this.relay.flush()
    if (this.head !== null && !this.storing()) this.begin(false)
    else this.relay.regulate()
  }

  // Stored (X-Accel-Buffering: yes) until it is whole, unless it passes the limit, or the
  // response budget is full: stored responses waiting for room that only their own clients
  // could free would wait for ever.
  storing () {
    return this.relay.mode === 'store' && this.relay.received <= this.limit && !this.relay.budget.full
  }

  onEnd () {
    this.relay.end()
    if (!this.settled) this.begin(true)
    this.over(null)
  }

  onError (failure, error) {
    this.relay.drop()
    if (!this.settled) this.settle({ type: 'failed', failure, error })
    this.over(failure)
  }

  // The exchange's socket, for the relay's back-pressure.
  pause () { this.exchange.pause() }
  resume () { this.exchange.resume() }

  // ---- the owner's side ---------------------------------------------------------------------

  begin (complete) {
    const stored = complete && this.relay.mode === 'store'
    this.settle({ type: 'response', head: this.head, complete, stored, length: this.relay.received })
  }

  settle (outcome) {
    if (this.settled) return
    this.settled = true
    clearTimeout(this.timer)
    queueMicrotask(() => this.owner.settled(outcome))
  }

  timedOut (ms) {
    this.relay.drop()
    this.settle({ type: 'failed', failure: 'timeout', error: new ProxyTimeout(ms) })
  }

  // The worker's side is over; the owner hears it once it asked (sendTo or discard).
  over (failure) {
    if (this.outcome !== undefined) return
    this.outcome = failure
    this.tellDone()
  }

  tellDone () {
    const done = this.done
    if (!done || this.outcome === undefined) return
    this.done = null
    const failure = this.outcome
    queueMicrotask(() => done(failure))
  }

  // After 'response': send it to `res`, whose head the owner has written.
  sendTo (res, done) {
    this.done = done
    this.relay.attach(res)
    this.tellDone()
  }

  // After 'failed' with 'timeout', after 'response' when it cannot be sent (the client left, its
  // head was refused), or on an error of the balancer's own: drop what the worker sends;
  // done() once it is finished with it.
  discard (done) {
    clearTimeout(this.timer)
    this.settled = true
    this.done = done
    this.relay.drop()
    this.tellDone()
  }
}

// Starts the attempt. Returns the Attempt.
function forward (request, record, options, owner) {
  return new Attempt(record, request, options, owner)
}

module.exports = { forward, ProxyTimeout }
