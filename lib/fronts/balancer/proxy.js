'use strict'

// One attempt to forward a buffered request to one worker, and the worker's response on its way
// to the client. The attempt is the response parser's handler (upstream.js: socket → parser →
// attempt): the parser's calls only record what came, and the attempt acts once the read that
// brought it is parsed (onReadEnd), outside the parser, whose throws mean "bad bytes from the
// worker". The body goes into the attempt's relay (relay.js), which writes it through to the
// client and keeps reading the worker ahead of a slower client, so that the worker is free once
// its response ends. The app chooses otherwise with X-Accel-Buffering (headers.js): `no`, no
// read-ahead; `yes`, store and forward.
//
// The attempt tells its owner (the pipeline) what happens, each call with the request (`job`)
// and the attempt:
//   owner.onInterim(job, attempt, head)   a 1xx before the response (103 Early Hints); any
//                                         number of times
//   owner.onResponse(job, attempt)        the response begins, once: attempt.head is its head,
//                                         with every byte of the read that brought it parsed
//                                         (so a malformed body in that read fails the attempt
//                                         instead); attempt.complete: the worker has sent all of
//                                         it already (attempt.relay.received bytes of body), and
//                                         is free; attempt.stored: and it was held whole at the
//                                         app's request (X-Accel-Buffering: yes). The owner
//                                         calls sendTo(res) to send it, or discard().
//   owner.onAttemptFailed(job, attempt, failure, error)
//                                         before the response began, instead of onResponse.
//                                         failure: refused | died | bad_response |
//                                         broken_response (the failure table's) | timeout. After
//                                         'timeout' the worker is still working on the request:
//                                         the owner calls discard(), which reads and drops
//                                         whatever it still sends, so that a worker given up on
//                                         gets no new request while it is still rendering the
//                                         old one. After any other failure the worker holds
//                                         nothing of this request.
//   owner.onWorkerDone(job, attempt, failure)
//                                         after sendTo() or discard(), once: the worker's side is
//                                         over, sent whole (failure null) or broken off
//                                         (bad_response, broken_response).

const { ResponseRelay } = require('./relay')
const { accelBuffering } = require('./headers')
const { PoolError, codes } = require('../../errors')

class ProxyTimeout extends PoolError {
  constructor (ms) { super(codes.PROXY_TIMEOUT, `no answer within ${ms} ms`) }
}

// X-Accel-Buffering → the relay's mode.
const MODES = { no: 'no', yes: 'store' }

// What an attempt knows of the worker's response, as it goes: the head came, and then the
// response ended (whole) or broke off.
class Attempt {
  // options: { maxResponseBuffer, proxyTimeout, reuse, budget (ResponseBudget), sendClock }.
  constructor (owner, job, record, options) {
    this.owner = owner
    this.job = job
    this.record = record
    this.limit = options.maxResponseBuffer
    this.head = null
    this.interims = null // 1xx heads read, not yet passed on
    this.complete = false // the worker sent the whole response
    this.keepAlive = false
    this.settled = false // the owner heard onResponse or onAttemptFailed
    this.answering = false // the owner called sendTo() or discard()
    this.outcome = undefined // the worker's side, once over: null (whole) or the failure
    this.timer = null
    this.relay = new ResponseRelay(this, options)
    this.connection = record.connections.send(this, job.method, job.head, job.body, { reuse: options.reuse })
    if (options.proxyTimeout > 0 && !this.settled) {
      this.timer = setTimeout(() => this.timedOut(options.proxyTimeout), options.proxyTimeout)
    }
  }

  get stored () { return this.complete && this.relay.mode === 'store' }

  // ---- the parser's calls: recorded, acted on at the end of the read ----------------------

  onInterim (head) {
    if (!this.settled) (this.interims ??= []).push(head)
  }

  onHead (head) {
    clearTimeout(this.timer)
    this.head = head
    this.connection.heard(head)
    this.relay.mode = MODES[accelBuffering(head)] || 'ahead'
  }

  onBody (chunk) { this.relay.push(chunk) }

  onComplete (keepAlive) {
    this.complete = true
    this.connection.done(keepAlive)
  }

  // ---- the connection's calls ---------------------------------------------------------------

  // Everything one read brought is parsed: the response begins once its head is here (unless
  // it is being stored whole), what came goes out as one piece, and a response now whole ends.
  onReadEnd () {
    if (this.interims !== null) this.passInterims()
    if (this.complete) this.relay.end() // the last byte came: it goes out with the rest
    if (!this.settled) {
      if (this.head !== null && (this.complete || !this.storing())) this.begin()
      else this.relay.regulate()
    } else if (!this.complete) {
      this.relay.flush()
    }
    if (this.complete) this.over(null)
  }

  passInterims () {
    const heads = this.interims
    this.interims = null
    for (const head of heads) if (!this.settled) this.owner.onInterim(this.job, this, head)
  }

  // Stored (X-Accel-Buffering: yes) until it is whole, unless it passes the limit, or the
  // response budget is full: stored responses waiting for room that only their own clients
  // could free would wait for ever.
  storing () {
    return this.relay.mode === 'store' && this.relay.received <= this.limit && !this.relay.budget.full
  }

  onFailed (failure, error) {
    this.relay.drop()
    if (!this.settled) this.fail(failure, error)
    this.over(failure)
  }

  // Back-pressure from the relay: the worker's reads.
  pause () { this.connection.pause(this) }
  resume () { this.connection.resume(this) }

  // ---- the owner's side ---------------------------------------------------------------------

  begin () {
    this.settled = true
    clearTimeout(this.timer)
    this.owner.onResponse(this.job, this)
  }

  fail (failure, error) {
    this.settled = true
    clearTimeout(this.timer)
    this.owner.onAttemptFailed(this.job, this, failure, error)
  }

  timedOut (ms) {
    if (this.settled) return
    this.relay.drop()
    this.fail('timeout', new ProxyTimeout(ms))
  }

  // The worker's side is over; the owner hears it once it answered (sendTo or discard).
  over (failure) {
    if (this.outcome !== undefined) return
    this.outcome = failure
    if (this.answering) this.owner.onWorkerDone(this.job, this, failure)
  }

  // After onResponse: send it to `res`, whose head the owner has written.
  sendTo (res) {
    this.answering = true
    this.relay.attach(res)
    if (this.outcome !== undefined) this.owner.onWorkerDone(this.job, this, this.outcome)
  }

  // After onAttemptFailed with 'timeout', after onResponse when it cannot be sent (the client
  // left, its head was refused), or on an error of the balancer's own: drop what the worker
  // sends; onWorkerDone once it is finished with it.
  discard () {
    clearTimeout(this.timer)
    this.settled = true
    this.answering = true
    this.relay.drop()
    if (this.outcome !== undefined) this.owner.onWorkerDone(this.job, this, this.outcome)
  }
}

module.exports = { Attempt, ProxyTimeout }
