'use strict'

// One client's connection to the control socket: request lines through the server's `handle`, answers
// back. Any local process of the pool's user may connect, so all it holds is bounded: a line over MAX_LINE
// closes it; at most `maxPending` commands run, and nothing more is read while lines wait; no command
// starts while the write buffer is full (a client that never reads); `idleTimeout` without a complete
// line while no command runs closes it. Each close follows one error answer, if it fits.

const { encode, LineReader, MAX_LINE, serializeError, badRequest } = require('./protocol')

const IDLE_TIMEOUT = 10000 // ms without a complete request line while no command runs
const MAX_PENDING = 8 // commands of one connection running at once

class ControlConnection {
  // handle(line) → Promise of the answer message.
  constructor (socket, handle, { idleTimeout = IDLE_TIMEOUT, maxPending = MAX_PENDING, maxLine = MAX_LINE } = {}) {
    this.socket = socket
    this.handle = handle
    this.idleTimeout = idleTimeout
    this.maxPending = maxPending
    this.waiting = [] // complete lines not started yet
    this.pending = 0 // commands started and not answered yet
    this.clientDone = false // the client shut its side
    this.closing = false // the server is closing: start nothing more
    this.idleTimer = null
    this.reader = new LineReader((line) => this.waiting.push(line), { maxLine })

    socket.setEncoding('utf8')
    socket.on('data', (chunk) => this.onData(chunk))
    socket.on('drain', () => this.pump())
    socket.on('end', () => { this.clientDone = true; this.pump() })
    socket.on('error', () => {}) // a client that went away; its commands still run to the end
    socket.on('close', () => this.stopIdleTimer())
    this.startIdleTimer()
  }

  get closed () {
    return this.socket.destroyed
  }

  onData (chunk) {
    if (this.closing) return
    try {
      this.reader.push(chunk)
    } catch (err) {
      return this.hangUp(badRequest(err.message))
    }
    this.pump()
  }

  // Reads more only once every line read so far has started.
  pump () {
    while (this.waiting.length > 0 && this.pending < this.maxPending && !this.socket.writableNeedDrain &&
      !this.closing && !this.closed) {
      this.start(this.waiting.shift())
    }
    if (this.closed) return
    if (this.waiting.length > 0 || this.closing) this.socket.pause()
    else this.socket.resume()
    const done = (this.clientDone || this.closing) && this.waiting.length === 0 && this.pending === 0
    if (done && !this.socket.writableEnded) this.socket.end()
  }

  start (line) {
    this.pending++
    this.stopIdleTimer()
    this.handle(line)
      .catch((err) => ({ id: null, ok: false, error: serializeError(err) })) // a bug, not the client's doing
      .then((message) => {
        this.pending--
        this.write(message)
        if (this.pending === 0 && !this.closing) this.startIdleTimer()
        this.pump()
      })
  }

  write (message) {
    if (!this.socket.writable) return
    let text
    try {
      text = encode(message)
    } catch (err) {
      // A result that is not JSON (a cycle, a BigInt) is our bug: an error answer, not a crash.
      text = encode({ id: message.id ?? null, ok: false, error: serializeError(err) })
    }
    this.socket.write(text)
  }

  // An answer with id null, if the buffer has room, then close.
  hangUp (err) {
    if (this.closed) return
    this.waiting = []
    if (!this.socket.writableNeedDrain) this.write({ id: null, ok: false, error: serializeError(err) })
    this.socket.destroy()
  }

  startIdleTimer () {
    this.stopIdleTimer()
    if (!(this.idleTimeout > 0 && this.idleTimeout < Infinity)) return
    this.idleTimer = setTimeout(() => {
      this.hangUp(badRequest(`no complete request line within ${this.idleTimeout} ms; closing the connection`))
    }, this.idleTimeout)
    this.idleTimer.unref()
  }

  stopIdleTimer () {
    clearTimeout(this.idleTimer)
    this.idleTimer = null
  }

  // Answers the commands already running (the `stop` that led here), then hangs up.
  end () {
    this.closing = true
    this.waiting = []
    this.stopIdleTimer()
    this.pump()
  }
}

module.exports = { ControlConnection, IDLE_TIMEOUT, MAX_PENDING }
