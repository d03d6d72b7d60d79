'use strict'

// What a worker prints (the app's console.log and console.error, the stack of an uncaught
// error), as log records of the pool: each line of the worker's stdout or stderr becomes one
// record tagged with the worker's slot and pid, so that the pool's stdout stays one JSON record
// per line and every line says whose it is.
//
// The record (JSON form; the pretty form is one line, "[slot 2 pid 4242] text"):
//   { level, time, slot, port, event: 'app-log', stream: 'stdout' | 'stderr', pid, msg,
//     part?, more? }
// stdout lines at info (30), stderr lines at warn (40). A line longer than MAX_LINE characters
// comes as consecutive records `part` 1, 2, … of the same pid and stream; all but the last have
// `more: true`. The slot of a reload's canary is 0.
//
// A line the worker runtime's own logger wrote (already a pool record: JSON with this worker's
// pid and slot) goes out as it is, not wrapped (rendered readably in pretty mode).
//
// Lines of one stream of one worker come out once each and in order. Between a worker's stdout
// and its stderr there is no order to keep: they are two pipes.
//
// Nothing piles up here, and nothing waits for the pool's own output: each chunk read (at most a
// pipe's worth) is split and handed to the logger before the next is read, and the logger's
// output takes it at once, into its bounded buffer or dropped and counted when that is full.
// So the worker's pipe is always read, whoever reads the pool's stdout; only a partial line
// waits here, bounded by MAX_LINE.

const { StringDecoder } = require('node:string_decoder')
const pino = require('pino')

const MAX_LINE = 16 * 1024
const LEVEL_OF = { stdout: 'info', stderr: 'warn' }
// pino writes `level` first: a cheap test before parsing a line that might be a pool record.
const POOL_RECORD_START = '{"level":'

// Chunks in (Buffers or strings), lines out: onLine(text, split) where split is null for a whole
// line, or { part, more } for a piece of a line longer than maxLine. UTF-8 sequences split
// across chunks are decoded whole; a trailing '\r' is dropped; end() flushes an unterminated
// last line.
class LineSplitter {
  constructor ({ onLine, maxLine = MAX_LINE }) {
    if (!(maxLine >= 2)) throw new RangeError('maxLine must be at least 2')
    this.onLine = onLine
    this.maxLine = maxLine
    this.decoder = new StringDecoder('utf8')
    this.pending = ''
    this.part = 0 // pieces of the current line already given out
    this.ended = false
  }

  push (chunk) {
    if (this.ended) return
    const text = this.pending + (typeof chunk === 'string' ? chunk : this.decoder.write(chunk))
    let start = 0
    let nl
    while ((nl = text.indexOf('\n', start)) !== -1) {
      this.cut(text.slice(start, nl), true)
      start = nl + 1
    }
    this.pending = this.cut(text.slice(start), false)
  }

  end () {
    if (this.ended) return
    this.ended = true
    const rest = this.pending + this.decoder.end()
    this.pending = ''
    if (rest !== '' || this.part > 0) this.cut(rest, true)
  }

  // Gives out whole pieces of maxLine; the rest is the line's end (`complete`) or is kept.
  cut (text, complete) {
    if (complete && text.endsWith('\r')) text = text.slice(0, -1)
    while (text.length > this.maxLine) {
      const n = safeCut(text, this.maxLine)
      this.give(text.slice(0, n), true)
      text = text.slice(n)
    }
    if (!complete) return text
    this.give(text, false)
    return ''
  }

  give (text, more) {
    if (!more && this.part === 0) return this.onLine(text, null)
    this.part++
    const split = more ? { part: this.part, more: true } : { part: this.part }
    if (!more) this.part = 0
    this.onLine(text, split)
  }
}

// Never between the two halves of a surrogate pair.
function safeCut (text, n) {
  const code = text.charCodeAt(n - 1)
  return code >= 0xd800 && code <= 0xdbff ? n - 1 : n
}

// Reads the child's stdout and stderr (forked with 'pipe' for both) into `logger`'s records.
// Returns { done }: a promise settled when both streams have ended and their last lines are out.
function captureOutput (child, { logger, slot, port, maxLine = MAX_LINE }) {
  const pid = child.pid
  const log = typeof logger.child === 'function' ? logger.child({ slot, port }) : bound(logger, { slot, port })
  const streams = ['stdout', 'stderr'].filter((name) => child[name])
  const done = Promise.all(streams.map((name) => new Promise((resolve) => {
    const level = LEVEL_OF[name]
    const splitter = new LineSplitter({
      maxLine,
      onLine: (text, split) => {
        if (!split && passThrough(logger, text, { pid, slot })) return
        log[level]({ event: 'app-log', stream: name, pid, ...split }, text)
      }
    })
    const stream = child[name]
    const finish = () => { splitter.end(); resolve() }
    stream.on('data', (chunk) => splitter.push(chunk))
    stream.once('end', finish)
    stream.once('close', finish) // destroyed without an end: what was read still goes out
    stream.on('error', () => {}) // a read error ends the stream ('close'); nothing to report
  })))
  return { done }
}

// A logger without child(): the fields go into each record.
function bound (logger, fields) {
  const log = {}
  for (const level of Object.values(LEVEL_OF)) log[level] = (obj, text) => logger[level]({ ...fields, ...obj }, text)
  return log
}

// A line the worker's runtime logged is written to the logger's destination as it is. Returns
// false when `line` is not one (the caller wraps it as app output).
function passThrough (logger, line, { pid, slot }) {
  if (!line.startsWith(POOL_RECORD_START)) return false
  let record
  try { record = JSON.parse(line) } catch { return false }
  if (record.pid !== pid || record.slot !== slot || typeof record.level !== 'number') return false
  if (typeof logger.levelVal === 'number' && record.level < logger.levelVal) return true
  const destination = logger[pino.symbols.streamSym]
  if (destination && typeof destination.write === 'function') {
    destination.write(line + '\n')
    return true
  }
  // Not a pino logger: its own methods, with what the line says.
  const { level, time, msg, ...fields } = record
  const method = pino.levels.labels[level]
  if (typeof logger[method] !== 'function') return false
  logger[method](fields, msg)
  return true
}

module.exports = { LineSplitter, captureOutput, MAX_LINE }
