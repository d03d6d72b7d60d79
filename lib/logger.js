'use strict'

// pino, JSON lines on stdout; readable lines when a person watches a terminal.
const pino = require('pino')

function wantsPretty (format, stream = process.stdout) {
  if (format === 'pretty') return true
  if (format === 'json') return false
  return Boolean(stream.isTTY)
}

// No `pid` in the supervisor's base: a line about a worker carries that worker's pid, once (a
// second `pid` key would be dropped by JSON parsers, which keep the last). The supervisor's pid
// is on its `starting` line (`supervisorPid`) and in `pool status`.
// `destination` (JSON only): where the lines go instead of fd 1 (a worker writes through its
// process.stdout, lib/worker/runtime.js).
function createLogger ({ level = 'info', format = 'auto', base = null, destination = null } = {}) {
  const options = { level, base }
  if (!wantsPretty(format)) return pino(options, destination || stdoutDestination())
  return pino(options, prettyDestination({ colorize: Boolean(process.stdout.isTTY) }))
}

// Lines written synchronously: a line logged is out, in order, before anything else happens.
// stdout in blocking mode: a pipe that is full (the reader is slow; the pool logs its workers'
// output, which can be a lot) then holds the write until the reader has taken some, instead of
// failing with EAGAIN, which pino's destination answers by sleeping 100 ms, the whole
// supervisor (and the embedded balancer) with it. Node leaves a pipe on stdout non-blocking
// once process.stdout is used; a terminal it already makes blocking, a file always is.
function stdoutDestination () {
  const handle = process.stdout._handle
  if (handle && typeof handle.setBlocking === 'function') handle.setBlocking(true)
  return pino.destination({ fd: 1, sync: true })
}

// Each line rendered as it is written, and written synchronously, like the JSON lines: no stream
// in between that could hold lines back (pino-pretty's own stream is a Transform pipeline). A
// JSON line written straight to this destination (a worker's own line,
// lib/supervisor/app-output.js) is rendered the same way.
function prettyDestination ({ colorize }) {
  const render = createPrettyRenderer({ colorize })
  const out = stdoutDestination()
  return { write: (line) => out.write(render(line)) }
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

const REQUEST_SAID = new Set(['level', 'time', 'msg', 'event', 'component', 'method', 'url', 'status', 'ms', 'hostname'])

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

module.exports = { createLogger, createPrettyRenderer }
