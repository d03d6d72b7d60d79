'use strict'

// One client's connection to the control socket: reads request lines, runs them through the
// server's `handle`, writes the answers. Any local process of the pool's user can connect and
// send anything, so whatever a connection holds is bounded, and none can stall the others:
//
// - A line longer than MAX_LINE: one error answer, then the connection is closed. Nothing
//   more is read from it.
// - At most `maxPending` commands of one connection run at once. Further lines wait, and
//   while they wait nothing more is read, so a client pipelining thousands of requests is
//   served in turn and the kernel holds back the rest.
// - No command starts while the socket's write buffer is full: a `status` answer is a
//   thousand times the size of its request, and a client that never reads would otherwise
//   fill the pool's memory with answers.
// - `idleTimeout` without a complete request line while no command runs (bytes without a
//   newline, nothing at all, or lines held back because the client does not read): one error
//   answer if it fits, then the connection is closed. A connection waiting for a long
//   `reload` is not idle.

const { encode, LineReader, MAX_LINE, serializeError, badRequest } = require('./protocol')

const IDLE_TIMEOUT = 10000 // ms without a complete request line while no command runs
const MAX_PENDING = 8 // commands of one connection running at once

class ControlConnection {
  // handle(line) → Promise of the answer message; it never rejects.
  constructor (socket, handle, { idleTimeout = IDLE_TIMEOUT, maxPending = MAX_PENDING, maxLine = MAX_LINE } = {}) {
    this.socket = socket
    this.handle = handle
    this.idleTimeout = idleTimeout
    this.maxPending = maxPending
    this.waiting = [] // complete lines not started yet
    this.pending = 0 // commands started and not answered yet
    this.clientDone = false // the client shut its side: hang up after the last answer
    this.closing = false // the server is closing: start nothing more, hang up after the last answer
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

  // Start what may start; read more only once every line read so far has started.
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
      // A result that is not JSON (a cycle, a BigInt) is a bug in the pool: an error answer,
      // not a crash of the pool. Ids are checked scalars (./protocol.js), safe to echo.
      text = encode({ id: message.id ?? null, ok: false, error: serializeError(err) })
    }
    this.socket.write(text)
  }

  // An answer about the connection itself (id null), then close. The answer is written only
  // if the buffer has room: a client that does not read gets the close alone.
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

  // The server is closing: answer the commands already running (the `stop` that led here),
  // start no other, then hang up.
  end () {
    this.closing = true
    this.waiting = []
    this.stopIdleTimer()
    this.pump()
  }
}

module.exports = { ControlConnection, IDLE_TIMEOUT, MAX_PENDING }
