'use strict'

// pino, JSON lines on stdout; readable lines when a person watches a terminal.
const pino = require('pino')
const { LogOutput, stdoutOutput } = require('./log-output')

function wantsPretty (format, stream = process.stdout) {
  if (format === 'pretty') return true
  if (format === 'json') return false
  return Boolean(stream.isTTY)
}

// No `pid` in the supervisor's base: a worker's line carries its own, once. `destination` (JSON only) replaces stdout's
// LogOutput (`bufferBytes`, exposed as the logger's `output`).
function createLogger ({ level = 'info', format = 'auto', base = null, destination = null, bufferBytes } = {}) {
  const options = { level, base }
  if (destination) return pino(options, destination)
  const output = stdoutOutput({ maxBytes: bufferBytes })
  const render = wantsPretty(format) ? createPrettyRenderer({ colorize: Boolean(process.stdout.isTTY) }) : null
  const logger = pino(options, render ? { write: (line) => output.write(render(line)) } : output)
  // A warning: only a --log-level the user chose filters it.
  output.onDropped = (n) => logger.warn({ event: 'log-dropped', dropped: n, total: output.dropped },
    `${n} log line${n === 1 ? '' : 's'} dropped: whatever reads the pool's stdout did not keep up and the log buffer ` +
      '(--log-buffer) was full')
  Object.defineProperty(logger, 'output', { value: output })
  return logger
}

function logOutputOf (logger) {
  return logger?.output instanceof LogOutput ? logger.output : null
}

// render(jsonLine) → text: pino-pretty's, but one line each for `request` and `app-log` records.
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
  // "GET /page 200 12ms id=… queueMs=0.3 worker=w1": every field the message does not say.
  request: (r) => [r.msg, compactFields(r, REQUEST_SAID)].filter(Boolean).join(' '),
  // "[slot 2 pid 4242] what the app printed"
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

// Plain words as they are, else JSON (which escapes newlines).
function compactValue (value) {
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  if (typeof value === 'string' && /^[\w.:/?&=%+@,~-]+$/.test(value)) return value
  return JSON.stringify(value)
}

module.exports = { createLogger, createPrettyRenderer, logOutputOf }
