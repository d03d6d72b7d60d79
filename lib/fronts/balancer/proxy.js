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
//                                         returns the ServerResponse to send it to (its head
//                                         written), or null to drop it.
//   owner.onSendError(job, attempt, err)  sending it threw (an error of the balancer's own)
//   owner.onAttemptFailed(job, attempt, failure, error)
//                                         before the response began, instead of onResponse.
//                                         failure: refused | died | bad_response |
//                                         broken_response | timeout (the failure table's). After
//                                         'timeout' (a limit of the request clock's) the app may
//                                         still be working on the request: the owner lets go
//                                         (letGo()), which closes the connection so that the app
//                                         sees its response close.
//   owner.onUpgrade(job, attempt)         a WebSocket handshake's 101, instead of onResponse:
//                                         attempt.head is its head; the owner takes the socket
//                                         (takeSocket()) and hears nothing more
//   owner.onWorkerDone(job, attempt, failure)
//                                         once the response is sent or dropped, once: the worker's side is
//                                         over, sent whole (failure null) or broken off
//                                         (bad_response, broken_response, or timeout: the owner
//                                         lets go).

const { ResponseRelay } = require('./relay')
const { accelBuffering, attemptHead } = require('./headers')
const { PoolError, codes } = require('../../errors')

class RequestLimitError extends PoolError {
  constructor (which, ms) {
    super(codes.PROXY_TIMEOUT,
      which === 'read'
        ? `no byte from the worker for ${ms} ms (--read-timeout)`
        : `longer than ${ms} ms (--max-request-time)`)
    this.limit = which
  }
}

// The owner of an attempt it let go of: nothing more is told.
const LET_GO = { onInterim () {}, onResponse () {}, onSendError () {}, onAttemptFailed () {}, onWorkerDone () {} }

// X-Accel-Buffering → the relay's mode.
const MODES = { no: 'no', yes: 'store' }

// What an attempt knows of the worker's response, as it goes: the head came, and then the
// response ended (whole) or broke off.
class Attempt {
  // options: { maxResponseBuffer, reuse, budget (ResponseBudget), sendClock, requestClock }.
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
    this.startedAt = performance.now()
    this.readSince = this.startedAt // since when the balancer waits for the worker's next byte; null while paused
    this.clock = options.requestClock
    this.relay = new ResponseRelay(this, options)
    this.upgraded = null // after a 101: the bytes that followed its head
    this.seen = job.session === 'open' ? Buffer.alloc(0) : null // a Socket.IO handshake's first answer bytes
    const upgrade = job.upgrade !== null
    const head = attemptHead(job.head, job.exchange, job.longLived)
    this.connection = record.connections.send(this, job.method, head, job.body, { reuse: options.reuse, upgrade })
    if (this.clock !== null && this.outcome === undefined) this.clock.watch(this)
  }

  get stored () { return this.complete && this.relay.mode === 'store' }

  // ---- the parser's calls: recorded, acted on at the end of the read ----------------------

  onInterim (head) {
    if (!this.settled) (this.interims ??= []).push(head)
  }

  onHead (head) {
    this.head = head
    this.relay.mode = MODES[accelBuffering(head)] || 'ahead'
  }

  onBody (chunk) {
    if (this.seen !== null) this.watchSession(chunk)
    this.relay.push(chunk)
  }

  // A Socket.IO handshake's answer names the session this worker now holds (sessions.js).
  watchSession (chunk) {
    this.seen = this.seen.length === 0 ? chunk : Buffer.concat([this.seen, chunk])
    if (this.owner.sessions?.learn(this.seen, this.record) !== false) this.seen = null
  }

  // The connection decides on its reuse from the parser's word; the attempt only records.
  onComplete (keepAlive) {
    this.complete = true
    this.keepAlive = keepAlive
  }

  onUpgrade (head, rest) {
    this.head = head
    this.upgraded = rest
  }

  // ---- the connection's calls ---------------------------------------------------------------

  // Everything one read brought is parsed: the response begins once its head is here (unless
  // it is being stored whole), what came goes out as one piece, and a response now whole ends.
  onReadEnd () {
    if (this.upgraded !== null) return this.switched()
    if (this.readSince !== null) this.readSince = performance.now()
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

  // A 101: the exchange is over for the attempt; its connection becomes the owner's tunnel.
  switched () {
    this.settled = true
    this.answering = true
    this.outcome = null
    this.relay.drop()
    this.clock?.unwatch(this)
    this.owner.onUpgrade(this.job, this)
  }

  // After onUpgrade: the worker's socket, and the bytes it sent after the 101.
  takeSocket () {
    const rest = this.upgraded
    this.upgraded = Buffer.alloc(0)
    return { socket: this.connection.detach(), rest }
  }

  passInterims () {
    const heads = this.interims
    this.interims = null
    for (const head of heads) if (!this.settled) this.owner.onInterim(this.job, this, head)
  }

  // Stored (X-Accel-Buffering: yes) until it is whole, unless it passes the limit, or the
  // response budget would hold it back: stored responses waiting for room that only their own
  // clients could free would wait for ever.
  storing () {
    return this.relay.mode === 'store' && this.relay.received <= this.limit &&
      !this.relay.budget.overShare(this.relay.held)
  }

  onFailed (failure, error) {
    this.relay.drop()
    if (!this.settled) this.fail(failure, error)
    this.over(failure)
  }

  // Back-pressure from the relay: the worker's reads, and the read clock with them.
  pause () {
    this.readSince = null
    this.connection.pause(this)
  }

  resume () {
    this.readSince = performance.now()
    this.connection.resume(this)
  }

  // ---- the owner's side ---------------------------------------------------------------------

  // The owner answers where the response goes: the client's response, or nowhere (dropped).
  begin () {
    this.settled = true
    const res = this.owner.onResponse(this.job, this)
    if (this.answering) return // the owner let go, or discarded it on an error of its own
    try {
      if (res) this.sendTo(res)
      else this.discard()
    } catch (err) {
      this.owner.onSendError(this.job, this, err)
    }
  }

  fail (failure, error) {
    this.settled = true
    this.owner.onAttemptFailed(this.job, this, failure, error)
  }

  // A limit of the request clock's: before the response began, the attempt fails ('timeout');
  // after, the worker's side is over, broken off. Either way the owner lets go.
  timedOut (which, ms) {
    if (this.outcome !== undefined) return
    this.relay.drop()
    if (!this.settled) return this.fail('timeout', new RequestLimitError(which, ms))
    this.over('timeout')
  }

  // The worker's side is over; the owner hears it once it answered (sendTo or discard).
  over (failure) {
    if (this.outcome !== undefined) return
    this.outcome = failure
    this.clock?.unwatch(this)
    if (this.answering) this.owner.onWorkerDone(this.job, this, failure)
  }

  // The owner is done with this exchange before the worker is (its client left, a limit ended it,
  // the response broke): the connection closes, so the app sees its response close (its request
  // signal aborts, an LLM call stops), and the owner hears nothing more.
  letGo () {
    this.owner = LET_GO
    this.settled = true
    this.answering = true
    this.relay.drop()
    this.clock?.unwatch(this)
    this.connection.abort(this)
    if (this.outcome === undefined) this.outcome = 'let_go'
  }

  // The response goes to `res`, whose head the owner has written.
  sendTo (res) {
    this.answering = true
    this.relay.attach(res)
    if (this.outcome !== undefined) this.owner.onWorkerDone(this.job, this, this.outcome)
  }

  // After onAttemptFailed with 'timeout', after onResponse when it cannot be sent (the client
  // left, its head was refused), or on an error of the balancer's own: drop what the worker
  // sends; onWorkerDone once it is finished with it.
  discard () {
    this.settled = true
    this.answering = true
    this.relay.drop()
    if (this.outcome !== undefined) this.owner.onWorkerDone(this.job, this, this.outcome)
  }
}

module.exports = { Attempt, RequestLimitError }
