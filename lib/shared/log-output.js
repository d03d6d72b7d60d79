'use strict'

// The supervisor's stdout, written asynchronously (sonic-boom, in batches of `batchBytes` or after `batchMs`)
// through a buffer of at most `maxBytes`: serving never waits for the log's reader. A reader that stops
// fills the buffer, then lines are dropped whole and counted (pool_log_lines_dropped_total); once it reads
// again `onDropped(n)` says how many, at most once a second. After an output error (EPIPE) every line is
// dropped. At 'exit' the buffer is written synchronously for at most `exitFlushMs`.
// Writes are non-blocking (EAGAIN, retried), on a pipe through a description of our own: O_NONBLOCK is the
// shared description's, and an exiting Node child (the reaper) clears it on its inherited stdio.

const fs = require('node:fs')
const SonicBoom = require('sonic-boom')

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024
const BATCH_BYTES = 8192 // a write starts once this much is buffered (below sonic-boom's 16 KiB per write)...
const BATCH_MS = 50 // ...or this long after the first line of a batch
const EXIT_FLUSH_MS = 2000 // the longest the process's exit waits for a reader that does not read
const TELL_EVERY_MS = 1000 // between two notes of dropped lines, at least

class LogOutput {
  constructor ({
    fd = 1, maxBytes = DEFAULT_MAX_BYTES, batchBytes = BATCH_BYTES, batchMs = BATCH_MS,
    exitFlushMs = EXIT_FLUSH_MS, now = () => performance.now()
  } = {}) {
    this.fd = fd
    this.batchMs = batchMs
    this.exitFlushMs = exitFlushMs
    this.now = now
    this.dropped = 0 // lines dropped since the start
    this.untold = 0 // of which onDropped has not been told yet
    this.toldAt = -Infinity
    this.tellTimer = null
    this.onDropped = () => {} // set by the logger: it writes the note
    this.pending = 0 // bytes taken and not written yet
    this.batchTimer = null
    this.whenWritten = new Set() // flush()es waiting for `pending` to reach 0
    this.failure = null // the error that ended the output (EPIPE: nobody reads any more)
    this.exitDeadline = null // while the exit flush runs: when it gives up
    this.ownFd = ownNonBlockingFd(fd)
    if (this.ownFd === null) makeNonBlocking(fd)
    // Buffers, not strings: appending costs no rescan of the chunk.
    this.boom = new SonicBoom({
      fd: this.ownFd ?? fd,
      sync: false,
      contentMode: 'buffer',
      minLength: batchBytes,
      maxLength: maxBytes,
      retryEAGAIN: () => this.exitDeadline === null || this.now() < this.exitDeadline
    })
    this.boom.on('drop', () => this.countDrop())
    this.boom.on('write', (n) => this.written(n))
    this.boom.on('error', (err) => this.failed(err))
    this.exitFlush = () => this.flushSync()
    process.on('exit', this.exitFlush)
  }

  get idle () { return this.pending === 0 }

  // One line, with its newline (pino's destination interface). Never blocks, never throws.
  write (line) {
    if (this.failure) return this.countDrop()
    const bytes = Buffer.from(line)
    const dropped = this.dropped
    this.boom.write(bytes)
    if (this.dropped !== dropped) return false
    this.pending += bytes.length
    this.armBatch()
    return true
  }

  // Below batchBytes sonic-boom waits for more. Unref'd: flushSync writes it at the exit.
  armBatch () {
    if (this.batchTimer !== null) return
    this.batchTimer = setTimeout(() => { this.batchTimer = null; this.boom.flush() }, this.batchMs)
    this.batchTimer.unref()
  }

  countDrop () {
    this.dropped++
    this.untold++
    return false
  }

  written (n) {
    this.pending = Math.max(0, this.pending - n)
    this.tellDropped()
    if (this.pending > 0) return this.armBatch() // the rest of a batch, or what came meanwhile
    clearTimeout(this.batchTimer)
    this.batchTimer = null
    for (const done of this.whenWritten) done(true)
  }

  failed (err) {
    this.failure = err
    for (const done of this.whenWritten) done(false)
  }

  // Now, or once TELL_EVERY_MS since the last note is over (by timer: no later write may come).
  tellDropped () {
    if (this.untold === 0 || this.failure) return
    const now = this.now()
    const wait = this.toldAt + TELL_EVERY_MS - now
    if (wait > 0) return this.tellLater(wait)
    const n = this.untold
    const dropped = this.dropped
    this.untold = 0
    this.onDropped(n)
    // The note itself was dropped: its lines (and it) are told by the next, so notes add up to the metric.
    if (this.dropped !== dropped) this.untold += n
    else this.toldAt = now
  }

  tellLater (ms) {
    if (this.tellTimer !== null) return
    this.tellTimer = setTimeout(() => { this.tellTimer = null; this.tellDropped() }, ms)
    this.tellTimer.unref()
  }

  // Resolves true once all is written, false after `timeout` ms or on failure. Untold drops are told first.
  flush (timeout) {
    if (this.untold > 0 && !this.failure) { this.toldAt = -Infinity; this.tellDropped() }
    if (this.idle || this.failure) return Promise.resolve(!this.failure)
    this.boom.flush()
    return new Promise((resolve) => {
      const done = (flushed) => {
        clearTimeout(timer)
        this.whenWritten.delete(done)
        resolve(flushed)
      }
      const timer = setTimeout(() => { this.exitFlushMs = 0; done(false) }, timeout)
      this.whenWritten.add(done)
    })
  }

  // Never throws: it runs in an 'exit' listener.
  flushSync () {
    process.removeListener('exit', this.exitFlush)
    if (this.idle || this.failure || this.boom.destroyed) return
    this.exitDeadline = this.now() + this.exitFlushMs
    if (this.ownFd === null) makeNonBlocking(this.fd) // a child may have made it blocking since
    try { this.boom.flushSync() } catch {}
  }

  close () {
    clearTimeout(this.batchTimer)
    clearTimeout(this.tellTimer)
    process.removeListener('exit', this.exitFlush)
  }
}

// One LogOutput for every logger on stdout, so lines never interleave; the first sets the size.
let stdout = null

function stdoutOutput ({ maxBytes } = {}) {
  stdout ??= new LogOutput({ fd: 1, maxBytes })
  return stdout
}

// A non-blocking fd of our own for a pipe (/proc/self/fd reopens the pipe itself); null for anything else.
function ownNonBlockingFd (fd) {
  try {
    if (!fs.fstatSync(fd).isFIFO()) return null
    return fs.openSync(`/proc/self/fd/${fd}`, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)
  } catch {
    return null
  }
}

// A terminal or socket: O_NONBLOCK on the shared description, through Node's handle (set again at exit).
function makeNonBlocking (fd) {
  const stream = fd === 1 ? process.stdout : fd === 2 ? process.stderr : null
  const handle = stream?._handle
  if (handle && typeof handle.setBlocking === 'function') handle.setBlocking(false)
}

module.exports = { LogOutput, stdoutOutput, DEFAULT_MAX_BYTES, EXIT_FLUSH_MS }
