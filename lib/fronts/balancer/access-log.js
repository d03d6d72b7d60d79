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

// (request, status, ms) → writes the line of a request that is over.
function accessLogger (log) {
  const fast = typeof log[streamSym]?.write === 'function' && typeof log[chindingsSym] === 'string' &&
    log.output !== undefined
  return fast
    ? (request, status, ms) => writeLine(log, request, status, ms)
    : (request, status, ms) => log.info(fields(request, status, ms), message(request, status, ms))
}

function fields (request, status, ms) {
  return {
    event: 'request',
    id: request.id,
    method: request.method,
    url: request.url,
    status,
    ms: tenths(ms),
    queueMs: tenths(request.queueMs),
    worker: request.record ? request.record.name : undefined,
    attempts: request.attempts,
    reason: request.reason || undefined,
    leftAt: request.goneAt || undefined // the stage a request was at when its client left
  }
}

function message (request, status, ms) {
  return `${request.method} ${request.url} ${status} ${Math.round(ms)}ms` +
    (request.goneAt ? ` (client left while ${request.goneAt})` : '')
}

// The line pino would write for log.info(fields(...), message(...)): level, time, the logger's
// bindings, the fields in order (undefined ones left out), the message.
function writeLine (log, request, status, ms) {
  if (log.levelVal > INFO) return
  let line = `{"level":30,"time":${Date.now()}${log[chindingsSym]},"event":"request","id":${str(request.id)}` +
    `,"method":${str(request.method)},"url":${str(request.url)},"status":${status},"ms":${tenths(ms)}` +
    `,"queueMs":${tenths(request.queueMs)}`
  if (request.record) line += `,"worker":${str(request.record.name)}`
  line += `,"attempts":${request.attempts}`
  if (request.reason) line += `,"reason":${str(request.reason)}`
  if (request.goneAt) line += `,"leftAt":${str(request.goneAt)}`
  log[streamSym].write(`${line},"msg":${str(message(request, status, ms))}}\n`)
}

function str (s) {
  return PLAIN.test(s) ? `"${s}"` : JSON.stringify(s)
}

function tenths (ms) { return Math.round(ms * 10) / 10 }

module.exports = { accessLogger, fields, message }
