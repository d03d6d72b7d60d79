'use strict'

// One response on its way from a worker to its client (proxy.js feeds it). Modes, from the app's
// X-Accel-Buffering: 'ahead' (none): each read goes out at once and what the client has not taken
// is held, up to `limit` (--max-response-buffer) and the budget's room, so the worker finishes at
// its own pace; past `limit` the worker pauses until half is taken, past the budget until there is
// room. 'no': the worker pauses whenever the client's socket is full. 'store': nothing goes out
// until the response is whole, past `limit` or at a full budget; then as 'ahead'. Held bytes are
// counted on the budget as read and given back as each write completes, or when the client goes.
// While bytes wait for the client, its --send-timeout runs (deadlines.js).

const { READ_BYTES } = require('./response-budget')

class ResponseRelay {
  // attempt: { pause(), resume() } its worker's reads. options: { maxResponseBuffer, budget (the
  // ResponseBudget), deadlines (Deadlines) }.
  constructor (attempt, { maxResponseBuffer, budget, deadlines }) {
    this.limit = maxResponseBuffer
    this.budget = budget
    this.deadlines = deadlines
    this.attempt = attempt
    this.mode = 'ahead'
    this.res = null // the client's response, once attached
    this.pending = [] // read from the worker, not written to the client yet
    this.pendingBytes = 0
    this.queued = 0 // written to the client, not yet taken by its socket
    this.received = 0 // the body's bytes read so far
    this.workerEnded = false // the worker sent its last byte (or broke off)
    this.dropping = false // nothing more goes to the client: what comes is read and dropped
    this.ended = false // res.end() was called
    this.closed = false // the client's response closed: nothing is held for it any more
    this.paused = null // why the worker is not read: 'client', or 'budget'
    this.needDrain = false // mode 'no': the client's socket is full
    this.progressAt = 0 // when the client's socket last took a write, while bytes wait for it
    this.holding = false // counted among the budget's holders
  }

  get held () { return this.pendingBytes + this.queued }

  // Tells the budget whether this relay holds bytes (its holders: the even share's divisor).
  track () {
    const yes = this.held > 0
    if (yes === this.holding) return
    this.holding = yes
    this.budget.holding(yes)
  }

  // ---- what the worker sends (proxy.js) ---------------------------------------------------

  push (chunk) {
    this.received += chunk.length
    if (this.dropping) return
    this.pending.push(chunk)
    this.pendingBytes += chunk.length
    this.budget.take(chunk.length)
    this.track()
  }

  // The end of one read from the worker: what it brought goes out, as one write.
  flush () {
    if (this.writing()) this.writePending()
    this.regulate()
  }

  // The worker sent its last byte.
  end () {
    this.workerEnded = true
    this.stopWaiting()
    if (this.writing()) {
      this.writePending()
      this.ended = true
      this.res.end()
    }
  }

  // The worker's response broke off, or will never be sent on: drop what is pending, and read
  // (and drop) what still comes so that the worker frees up.
  drop () {
    this.dropping = true
    this.dropPending()
    this.regulate()
  }

  // ---- the client's side (the pipeline attaches it once the head is written) -------------

  attach (res) {
    this.res = res
    if (this.mode === 'store') this.mode = 'ahead' // stored whole, or past `limit`: it goes out now
    if (this.mode === 'no') res.on('drain', () => this.onDrain())
    if (this.workerEnded) this.end()
    else this.flush()
  }

  writing () {
    return this.res !== null && !this.dropping && !this.ended && this.mode !== 'store'
  }

  writePending () {
    const pending = this.pending
    this.pending = []
    for (let i = 0; i < pending.length;) {
      // One write for each read's worth, so that progress is seen at least that often.
      let j = i + 1
      let bytes = pending[i].length
      while (j < pending.length && bytes + pending[j].length <= READ_BYTES) bytes += pending[j++].length
      this.write(j === i + 1 ? pending[i] : Buffer.concat(pending.slice(i, j), bytes))
      i = j
    }
  }

  write (piece) {
    const bytes = piece.length
    this.pendingBytes -= bytes
    this.queued += bytes
    if (this.queued === bytes) this.deadlines.watchSend(this)
    if (!this.res.write(piece, () => this.written(bytes))) this.needDrain = true
  }

  // The client's socket took `bytes` (or failed with them: 'close' follows).
  written (bytes) {
    if (this.closed) return // given back when it closed
    this.queued -= bytes
    if (this.queued === 0) this.deadlines.unwatchSend(this)
    else if (this.deadlines.send > 0) this.progressAt = performance.now()
    this.budget.giveBack(bytes)
    this.track()
    this.regulate()
  }

  onDrain () {
    this.needDrain = false
    this.regulate()
  }

  // The client's response is over: sent, or its client gone (or cut off). Whatever is still
  // held for it is given back; a worker still sending is read to its end. (The pipeline calls
  // it from the response's 'close'.)
  onClose () {
    if (this.closed) return
    this.closed = true
    const held = this.queued
    this.queued = 0
    if (held > 0) {
      this.deadlines.unwatchSend(this) // watched only while some bytes wait for the client
      this.budget.giveBack(held)
    }
    if (!this.workerEnded) this.drop()
    else this.dropPending()
  }

  dropPending () {
    const bytes = this.pendingBytes
    this.pending = []
    this.pendingBytes = 0
    if (bytes > 0) this.budget.giveBack(bytes)
    this.track()
  }

  // ---- reading the worker, or not ---------------------------------------------------------

  // Pause or resume the worker's reads, as the bytes held now call for.
  regulate () {
    if (this.workerEnded) return
    const why = this.pauseReason()
    if (why === this.paused) return
    if (this.paused === 'budget') this.budget.cancel(this)
    if (why === null) {
      this.paused = null
      return this.attempt.resume()
    }
    if (this.paused === null) this.attempt.pause()
    this.paused = why
    if (why === 'budget') this.budget.wait(this)
  }

  pauseReason () {
    if (this.dropping) return null
    if (this.res !== null && this.mode === 'no' && this.needDrain) return 'client'
    // Paused for the client, it is resumed once the client has taken half of what it held.
    if (this.res !== null && this.mode === 'ahead' &&
      this.held > (this.paused === 'client' ? this.limit / 2 : this.limit)) {
      return 'client'
    }
    if (this.budget.overShare(this.held)) return 'budget'
    return null
  }

  // The budget has room again (ResponseBudget.wake, which no longer counts this one waiting).
  roomAgain () {
    if (this.paused !== 'budget') return
    this.paused = null
    this.attempt.resume()
    this.regulate()
  }

  stopWaiting () {
    if (this.paused === 'budget') this.budget.cancel(this)
    this.paused = null
  }
}

module.exports = { ResponseRelay }
