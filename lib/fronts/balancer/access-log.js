'use strict'

// The access log: one line per request (`event: request`, at info), written off the request's
// path like every other line (through the logger's output). On the pool's own logger (made by
// createLogger) the line is put together here, byte for byte as pino would write
// it, and handed to the logger's destination: pino's general serializer costs some microseconds
// a request, most of it looking at each field's type. On any other logger (a library user's own,
// a test's) it goes through the logger's info() as usual.

const pino = require('pino')

const INFO = 30
const { streamSym, chindingsSym } = pino.symbols
// Characters a JSON string must escape, and those pino escapes (JSON.stringify: lone surrogates
// too). A string without any is written as it is.
const PLAIN = /^[^"\\\u0000-\u001f\u007f-\uffff]*$/

// (job, status, ms) → writes the line of a request that is over.
function accessLogger (log) {
  const fast = typeof log[streamSym]?.write === 'function' && typeof log[chindingsSym] === 'string' &&
    log.output !== undefined
  return fast
    ? (job, status, ms) => writeLine(log, job, status, ms)
    : (job, status, ms) => log.info(fields(job, status, ms), message(job, status, ms))
}

function fields (job, status, ms) {
  return {
    event: 'request',
    id: job.id,
    method: job.method,
    url: job.url,
    status,
    ms: tenths(ms),
    queueMs: tenths(job.queueMs),
    worker: job.record ? job.record.name : undefined,
    attempts: job.attempts,
    reason: job.reason || undefined,
    leftAt: job.goneAt || undefined // the stage a request was at when its client left
  }
}

function message (job, status, ms) {
  return `${job.method} ${job.url} ${status} ${Math.round(ms)}ms` +
    (job.goneAt ? ` (client left while ${job.goneAt})` : '')
}

// The line pino would write for log.info(fields(...), message(...)): level, time, the logger's
// bindings, the fields in order (undefined ones left out), the message.
function writeLine (log, job, status, ms) {
  if (log.levelVal > INFO) return
  let line = `{"level":30,"time":${Date.now()}${log[chindingsSym]},"event":"request","id":${str(job.id)}` +
    `,"method":${str(job.method)},"url":${str(job.url)},"status":${status},"ms":${tenths(ms)}` +
    `,"queueMs":${tenths(job.queueMs)}`
  if (job.record) line += `,"worker":${str(job.record.name)}`
  line += `,"attempts":${job.attempts}`
  if (job.reason) line += `,"reason":${str(job.reason)}`
  if (job.goneAt) line += `,"leftAt":${str(job.goneAt)}`
  log[streamSym].write(`${line},"msg":${str(message(job, status, ms))}}\n`)
}

function str (s) {
  return PLAIN.test(s) ? `"${s}"` : JSON.stringify(s)
}

function tenths (ms) { return Math.round(ms * 10) / 10 }

module.exports = { accessLogger, fields, message }
