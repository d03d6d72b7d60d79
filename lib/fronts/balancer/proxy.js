'use strict'

// One attempt to forward a buffered request to one worker, and the response on its way to the
// client. It is the response parser's handler (upstream.js): parser calls only record; the attempt
// acts at the end of each read (onReadEnd), outside the parser, whose throws mean bad worker bytes.
// The body goes through its relay (relay.js), read ahead of a slow client unless X-Accel-Buffering
// says `no` (no read-ahead) or `yes` (store and forward). The owner (the pipeline) hears, with
// (request, attempt): onInterim(head) for each 1xx; onResponse once, with attempt.head (its whole read
// parsed), .complete, .stored, returning the ServerResponse to send to or null to drop it
// (onSendError(err) if sending it throws);
// onAttemptFailed(failure, error) instead, before the response began (after 'timeout' the owner
// letGo()es so the app sees its response close); onUpgrade for a 101 (then takeSocket(), and
// nothing more); onWorkerDone(failure) once, when the worker's side is over (failure null: whole).

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

const LET_GO = { onInterim () {}, onResponse () {}, onSendError () {}, onAttemptFailed () {}, onWorkerDone () {} }

const MODES = { no: 'no', yes: 'store' }

// What an attempt knows of the worker's response: its head, then whole or broken off.
class Attempt {
  // options: { maxResponseBuffer, reuse, budget (ResponseBudget), deadlines (Deadlines) }.
  constructor (owner, request, record, options) {
    this.owner = owner
    this.request = request
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
    this.deadlines = options.deadlines
    this.relay = new ResponseRelay(this, options)
    this.upgraded = null // after a 101: the bytes that followed its head
    this.seen = request.session === 'open' ? Buffer.alloc(0) : null // a Socket.IO handshake's first answer bytes
    const upgrade = request.upgrade !== null
    const head = attemptHead(request.head, request.exchange, request.longLived)
    const { method, body } = request
    this.connection = record.connections.send(this, method, head, body, { reuse: options.reuse, upgrade })
    if (this.outcome === undefined) this.deadlines.watchAttempt(this)
  }

  get stored () { return this.complete && this.relay.mode === 'store' }

  // ---- the parser's calls: recorded, acted on at the end of the read

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

  onComplete (keepAlive) {
    this.complete = true
    this.keepAlive = keepAlive
  }

  onUpgrade (head, rest) {
    this.head = head
    this.upgraded = rest
  }

  // ---- the connection's calls

  // A read is parsed: the response begins once its head is here (unless stored whole).
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
    this.deadlines.unwatchAttempt(this)
    this.owner.onUpgrade(this.request, this)
  }

  takeSocket () {
    const rest = this.upgraded
    this.upgraded = Buffer.alloc(0)
    return { socket: this.connection.detach(), rest }
  }

  passInterims () {
    const heads = this.interims
    this.interims = null
    for (const head of heads) if (!this.settled) this.owner.onInterim(this.request, this, head)
  }

  // Stored whole unless past the limit or held back by the budget (only its own client could free it).
  storing () {
    return this.relay.mode === 'store' && this.relay.received <= this.limit &&
      !this.relay.budget.overShare(this.relay.held)
  }

  onFailed (failure, error) {
    this.relay.drop()
    if (!this.settled) this.fail(failure, error)
    this.over(failure)
  }

  // Back-pressure from the relay: pauses the worker's reads and the read clock.
  pause () {
    this.readSince = null
    this.connection.pause(this)
  }

  resume () {
    this.readSince = performance.now()
    this.connection.resume(this)
  }

  // ---- the owner's side

  begin () {
    this.settled = true
    const res = this.owner.onResponse(this.request, this)
    if (this.answering) return // the owner let go, or discarded it on an error of its own
    try {
      if (res) this.sendTo(res)
      else this.discard()
    } catch (err) {
      this.owner.onSendError(this.request, this, err)
    }
  }

  fail (failure, error) {
    this.settled = true
    this.owner.onAttemptFailed(this.request, this, failure, error)
  }

  // --read-timeout or --max-request-time (deadlines.js): the attempt fails ('timeout') or, once begun, breaks off.
  timedOut (which, ms) {
    if (this.outcome !== undefined) return
    this.relay.drop()
    if (!this.settled) return this.fail('timeout', new RequestLimitError(which, ms))
    this.over('timeout')
  }

  // The owner hears it once it answered (sendTo or discard).
  over (failure) {
    if (this.outcome !== undefined) return
    this.outcome = failure
    this.deadlines.unwatchAttempt(this)
    if (this.answering) this.owner.onWorkerDone(this.request, this, failure)
  }

  // The owner is done before the worker: the connection closes, so the app sees its response close
  // (its request signal aborts), and the owner hears nothing more.
  letGo () {
    this.owner = LET_GO
    this.settled = true
    this.answering = true
    this.relay.drop()
    this.deadlines.unwatchAttempt(this)
    this.connection.abort(this)
    if (this.outcome === undefined) this.outcome = 'let_go'
  }

  sendTo (res) {
    this.answering = true
    this.relay.attach(res)
    if (this.outcome !== undefined) this.owner.onWorkerDone(this.request, this, this.outcome)
  }

  // Drop what the worker sends (after 'timeout', an unsendable response, an error of the balancer's).
  discard () {
    this.settled = true
    this.answering = true
    this.relay.drop()
    if (this.outcome !== undefined) this.owner.onWorkerDone(this.request, this, this.outcome)
  }
}

module.exports = { Attempt, RequestLimitError }
