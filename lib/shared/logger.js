'use strict'

// pino, JSON lines on stdout; readable lines when a person watches a terminal.
const pino = require('pino')
const { LogOutput, stdoutOutput } = require('./log-output')

function wantsPretty (format, stream = process.stdout) {
  if (format === 'pretty') return true
  if (format === 'json') return false
  return Boolean(stream.isTTY)
}

// No `pid` in the supervisor's base: a line about a worker carries that worker's pid, once (a
// second `pid` key would be dropped by JSON parsers, which keep the last). The supervisor's pid
// is on its `starting` line (`supervisorPid`) and in `pool status`.
// `destination` (JSON only): where the lines go instead of the supervisor's stdout (a worker
// writes through its process.stdout). Without it the lines go to the process's stdout through
// its LogOutput: asynchronous, at most `bufferBytes`
// held for a reader that does not keep up, the rest dropped and counted; the logger's `output`.
// A line written straight to the logger's destination (a worker's own line, as the supervisor
// reads it) is rendered like the logger's own in pretty mode.
function createLogger ({ level = 'info', format = 'auto', base = null, destination = null, bufferBytes } = {}) {
  const options = { level, base }
  if (destination) return pino(options, destination)
  const output = stdoutOutput({ maxBytes: bufferBytes })
  const render = wantsPretty(format) ? createPrettyRenderer({ colorize: Boolean(process.stdout.isTTY) }) : null
  const logger = pino(options, render ? { write: (line) => output.write(render(line)) } : output)
  // The note goes through the logger (its level, its format); it is a warning so that a
  // --log-level that filters it is the user's own choice.
  output.onDropped = (n) => logger.warn({ event: 'log-dropped', dropped: n, total: output.dropped },
    `${n} log line${n === 1 ? '' : 's'} dropped: whatever reads the pool's stdout did not keep up and the log buffer ` +
      '(--log-buffer) was full')
  Object.defineProperty(logger, 'output', { value: output })
  return logger
}

// The LogOutput under a logger made by createLogger, or null (a logger of the user's own).
function logOutputOf (logger) {
  return logger?.output instanceof LogOutput ? logger.output : null
}

// Returns render(jsonLine) → the text to print. Most records print as pino-pretty prints them
// (the message, then the fields indented below). Two kinds come many at a time and read best as
// one line each: the access log (`request`) and the app's own output (`app-log`).
function createPrettyRenderer ({ colorize = false } = {}) {
  const full = require('pino-pretty').prettyFactory({ colorize, ignore: 'hostname', translateTime: 'HH:MM:ss.l' })
  return (line) => {
    let record
    try { record = JSON.parse(line) } catch { return line.endsWith('\n') ? line : line + '\n' }
    if (record === null || typeof record !== 'object') return full(line)
    const oneLine = ONE_LINE[record.event]
    return full(oneLine ? { level: record.level, time: record.time, msg: oneLine(record) } : record)
  }
}

const ONE_LINE = {
  // "GET /page 200 12ms id=… queueMs=0.3 worker=w1 attempts=1": the message, then every field it
  // does not already say, so that fields added to the access log later still show.
  request: (r) => [r.msg, compactFields(r, REQUEST_SAID)].filter(Boolean).join(' '),
  // "[slot 2 pid 4242] what the app printed"; stderr and the pieces of a split line say so.
  'app-log': (r) => {
    const tags = [`slot ${r.slot}`, `pid ${r.pid}`]
    if (r.stream === 'stderr') tags.push('stderr')
    if (r.part) tags.push(`part ${r.part}${r.more ? '+' : ''}`)
    return `[${tags.join(' ')}] ${r.msg}`
  }
}

const REQUEST_SAID = new Set(['level', 'time', 'msg', 'event', 'component', 'method', 'url', 'status', 'ms',
  'hostname'])

function compactFields (record, skip) {
  const parts = []
  for (const [key, value] of Object.entries(record)) {
    if (skip.has(key) || value === undefined || value === null) continue
    parts.push(`${key}=${compactValue(value)}`)
  }
  return parts.join(' ')
}

// A value that cannot break the line: plain words as they are, anything else as JSON (which
// escapes newlines).
function compactValue (value) {
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  if (typeof value === 'string' && /^[\w.:/?&=%+@,~-]+$/.test(value)) return value
  return JSON.stringify(value)
}

module.exports = { createLogger, createPrettyRenderer, logOutputOf }
