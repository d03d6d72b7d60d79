'use strict'

// Where the supervisor's log lines go: its stdout, written asynchronously through a buffer of
// at most `maxBytes`. Serving never waits for whoever reads the logs:
//
// - Each line is appended to the buffer; sonic-boom writes the buffer out with write(2) on
//   libuv's thread pool, never on the event loop, a batch at a time: once `batchBytes` have
//   gathered, or `batchMs` after the first line of a batch, whichever comes first. A line costs
//   the event loop a copy into the buffer, not a system call: the access log's line per request
//   included. A reader that keeps up gets every line, in order, at most `batchMs` late.
// - A reader that stops (a pipe left full by `| (sleep 600)`, a stuck log shipper): sonic-boom
//   tries the write again every 100 ms; the buffer grows to `maxBytes`, then each further line
//   is dropped whole and counted (`dropped`, the metric pool_log_lines_dropped_total). As soon
//   as the reader takes lines again, `onDropped(n)` is told how many were dropped since it was
//   last told, at most once a second (one due sooner comes when the second is over, writes or
//   not), so a gap in the log is never silent. A note that finds no room is dropped and counted
//   like a line, and told with them by the next one: the notes add up to the metric.
// - A reader gone for good (EPIPE) or an output that fails otherwise: every line from then on
//   is dropped and counted; nothing is retried.
// - At the end, `flush(timeout)` writes out the buffer and waits (bounded) for it to be taken,
//   and the process's 'exit' writes what is still buffered synchronously, for at most
//   `exitFlushMs`. What the reader has not taken by then is lost; on SIGKILL everything still
//   buffered is.
//
// Writes never wait for the reader: a write the reader cannot take fails at once (EAGAIN, tried
// again later) instead of holding a thread of the pool (other work needs them: file reads, DNS
// lookups) or, at the exit, the process. For a pipe, that takes a description of the pipe of its
// own, opened anew and non-blocking: O_NONBLOCK belongs to the description, which the pipe's
// original fd shares with every process that inherited it, and a Node.js process clears it on
// the stdio it inherited when it exits (the reaper, which writes to the same fd 1, does at every
// stop), after which a write to a full pipe would wait for the reader for ever.

const fs = require('node:fs')
const SonicBoom = require('sonic-boom')

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024
const BATCH_BYTES = 8192 // a write starts once this much is buffered (below sonic-boom's 16 KiB per write)...
const BATCH_MS = 50 // ...or this long after the first line of a batch
const EXIT_FLUSH_MS = 2000 // the longest the process's exit waits for a reader that does not read
const TELL_EVERY_MS = 1000 // the fewest milliseconds between two notes of dropped lines

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
    this.tellTimer = null // a note due once TELL_EVERY_MS since the last one have passed
    this.onDropped = () => {} // set by the logger: it writes the note
    this.pending = 0 // bytes taken and not written yet
    this.batchTimer = null
    this.whenWritten = new Set() // flush()es waiting for `pending` to reach 0
    this.failure = null // the error that ended the output (EPIPE: nobody reads any more)
    this.exitDeadline = null // while the exit flush runs: when it gives up on a reader that does not read
    this.ownFd = ownNonBlockingFd(fd)
    if (this.ownFd === null) makeNonBlocking(fd)
    // Buffers, not strings: appending a line then costs no rescan of the chunk it joins.
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

  // What is buffered below batchBytes goes out batchMs later (sonic-boom leaves it waiting for
  // more). Unref'd: a process that ends by itself writes it at its exit (flushSync).
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

  // The reader took lines again: say how many were dropped meanwhile, now or, within a second of
  // the last note, once that second is over: the buffer may be written out by then, and no
  // later write would tell.
  tellDropped () {
    if (this.untold === 0 || this.failure) return
    const now = this.now()
    const wait = this.toldAt + TELL_EVERY_MS - now
    if (wait > 0) return this.tellLater(wait)
    const n = this.untold
    const dropped = this.dropped
    this.untold = 0
    this.onDropped(n)
    // The note is a line like any other: longer than most, it did not fit where a line was just
    // dropped (a write that freed less than it, the timer with the buffer full), and was dropped
    // and counted too. Those lines are not told yet: the next write out tells them, the note's own
    // among them, so that the notes add up to the metric.
    if (this.dropped !== dropped) this.untold += n
    else this.toldAt = now
  }

  tellLater (ms) {
    if (this.tellTimer !== null) return
    this.tellTimer = setTimeout(() => { this.tellTimer = null; this.tellDropped() }, ms)
    this.tellTimer.unref()
  }

  // Writes out what is buffered; resolves true once all of it is written, false when `timeout`
  // ms pass first or the output failed. Dropped lines not yet told of are told first.
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
      // A reader that did not read within `timeout` is not waited for again at the exit.
      const timer = setTimeout(() => { this.exitFlushMs = 0; done(false) }, timeout)
      this.whenWritten.add(done)
    })
  }

  // At the process's exit: what is still buffered, written synchronously, for at most
  // exitFlushMs of a reader that does not read. Never throws (it runs in an 'exit' listener).
  flushSync () {
    process.removeListener('exit', this.exitFlush)
    if (this.idle || this.failure || this.boom.destroyed) return
    this.exitDeadline = this.now() + this.exitFlushMs
    if (this.ownFd === null) makeNonBlocking(this.fd) // a child may have made it blocking since
    try { this.boom.flushSync() } catch {}
  }

  // No more lines (tests): the exit no longer flushes this output.
  close () {
    clearTimeout(this.batchTimer)
    clearTimeout(this.tellTimer)
    process.removeListener('exit', this.exitFlush)
  }
}

// The process's stdout, one LogOutput for every logger that writes there (several pools in one
// process): one buffer, so that their lines never interleave within a line, and one exit flush.
// The first one made sets the buffer's size.
let stdout = null

function stdoutOutput ({ maxBytes } = {}) {
  stdout ??= new LogOutput({ fd: 1, maxBytes })
  return stdout
}

// A pipe on `fd`: a descriptor of our own for it, non-blocking (/proc/self/fd reopens the pipe
// itself, not a path). Null for anything else (a file needs none: a write to it never waits for
// a reader; a terminal or a socket cannot be reopened so) or where /proc is not there.
function ownNonBlockingFd (fd) {
  try {
    if (!fs.fstatSync(fd).isFIFO()) return null
    return fs.openSync(`/proc/self/fd/${fd}`, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)
  } catch {
    return null
  }
}

// A terminal or a socket on the descriptor (or a pipe where /proc is missing): Node's handle for
// it can set O_NONBLOCK, on the shared description; set again before the exit's flush, since a
// child that shared it may have cleared it by then. A file needs none.
function makeNonBlocking (fd) {
  const stream = fd === 1 ? process.stdout : fd === 2 ? process.stderr : null
  const handle = stream?._handle
  if (handle && typeof handle.setBlocking === 'function') handle.setBlocking(false)
}

module.exports = { LogOutput, stdoutOutput, DEFAULT_MAX_BYTES, EXIT_FLUSH_MS }
