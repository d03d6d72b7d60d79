'use strict'

// Each line a worker prints becomes one pool record, so the pool's stdout stays one JSON record per line:
//   { level, time, slot, port, event: 'app-log', stream: 'stdout' | 'stderr', pid, msg, part?, more? }
// stdout at info, stderr at warn; a line over MAX_LINE comes as `part` 1, 2, … (`more: true` but the last).
// A line already a record of this worker's runtime goes out unwrapped. Order is kept per stream only.
// Each chunk is handed to the logger before the next read, so the pipe is always drained; only a partial
// line waits here.

const { StringDecoder } = require('node:string_decoder')
const pino = require('pino')

const MAX_LINE = 16 * 1024
const LEVEL_OF = { stdout: 'info', stderr: 'warn' }
// pino writes `level` first: a cheap test before parsing.
const POOL_RECORD_START = '{"level":'

// Chunks in, onLine(text, split) out: split is null for a whole line, else { part, more? }. UTF-8 split across
// chunks is decoded whole; a trailing '\r' is dropped; end() flushes an unterminated last line.
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

// → { done }: settles once both streams ended and their last lines are out.
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

function bound (logger, fields) {
  const log = {}
  for (const level of Object.values(LEVEL_OF)) log[level] = (obj, text) => logger[level]({ ...fields, ...obj }, text)
  return log
}

// Writes a line the worker's runtime logged as it is; false when it is not one.
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
