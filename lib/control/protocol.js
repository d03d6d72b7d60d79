'use strict'

// The control protocol: newline-delimited JSON over a unix socket. One request per line, one
// response per request, matched by `id` (a string, a number or null); a connection may carry
// several requests and each is answered when it finishes (a `status` is answered while a
// `reload` on the same connection still runs).
//
//   → { "id": 1, "command": "scale", "args": { "workers": 6 } }
//   ← { "id": 1, "ok": true, "result": { "from": 4, "to": 6 } }
//   ← { "id": 1, "ok": false, "error": { "code": "POOL_E_RELOAD_FAILED", "message": "...",
//        "appError": { "message": "...", "stack": "..." }, "replaced": [] } }
//
// An error says what happened (its code, and the facts the CLI's exit code depends on: `replaced`
// when a reload had begun), never an exit code: that is the CLI's policy. Pools before this
// change sent `exitCode`; the CLI still honours it.
//
// Commands: status, reload, scale { workers }, recycle { slot }, stop, and ping (→ { pid,
// phase }: the cheap "is a pool alive here" probe used before claiming a socket).
//
// An error with `"id": null` can also be about the connection itself (a line too long, no
// request for too long): the pool closes the connection right after it (./connection.js).

const { poolError, codes } = require('../errors')

const COMMANDS = Object.freeze(['status', 'reload', 'scale', 'recycle', 'stop', 'ping'])
// A request is a few dozen bytes and a status answer a few hundred per worker: a line this long
// is not the protocol.
const MAX_LINE = 1024 * 1024

function encode (message) {
  return JSON.stringify(message) + '\n'
}

// Splits a text stream into lines; calls onLine(text) for each complete one. A line longer
// than maxLine throws, and what was buffered is dropped: the caller hangs up, as the stream
// has stopped being the protocol.
class LineReader {
  constructor (onLine, { maxLine = MAX_LINE } = {}) {
    this.onLine = onLine
    this.maxLine = maxLine
    this.buffer = ''
  }

  push (chunk) {
    let start = 0
    let end
    // Only the new chunk is searched: a long partial line is not scanned again on every push.
    while ((end = chunk.indexOf('\n', start)) >= 0) {
      const line = this.buffer + chunk.slice(start, end)
      this.buffer = ''
      start = end + 1
      this.checkLength(line.length)
      if (line.trim() !== '') this.onLine(line)
    }
    this.buffer += chunk.slice(start)
    this.checkLength(this.buffer.length)
  }

  checkLength (length) {
    if (length <= this.maxLine) return
    this.buffer = ''
    throw poolError(codes.BAD_OPTION, `a line longer than ${this.maxLine} characters`)
  }
}

// An Error (usually a PoolError) as the `error` member of a response.
function serializeError (err) {
  const out = {
    code: typeof err?.code === 'string' && err.code.startsWith('POOL_E') ? err.code : codes.INTERNAL,
    message: err?.message || String(err)
  }
  const appError = err?.details?.appError
  if (appError) {
    out.appError = { message: appError.message, stack: appError.stack }
    if (err.details.headline) out.headline = err.details.headline
  }
  // A reload that had begun: the slots it replaced before it ended.
  if (Array.isArray(err?.details?.replaced)) out.replaced = err.details.replaced
  return out
}

// The `error` member of a response, back into a PoolError the CLI can print with printError.
function deserializeError (error) {
  const details = {}
  if (error.appError) Object.assign(details, { headline: error.headline || error.message, appError: error.appError })
  if (Array.isArray(error.replaced)) details.replaced = error.replaced
  const err = poolError(error.code || codes.INTERNAL, error.message || 'the pool reported an error without a message',
    { details: Object.keys(details).length ? details : undefined })
  // An older pool chose the exit code itself: kept (exitCodeOf).
  if (Number.isInteger(error.exitCode) && error.exitCode > 0) {
    Object.defineProperty(err, 'exitCode', { value: error.exitCode, enumerable: true })
  }
  err.remote = true // said by the pool, not by the connection
  return err
}

function badRequest (message) {
  return poolError(codes.BAD_OPTION, `bad control request: ${message}`)
}

// Parses and checks one request line. Returns { id, command, args } or throws badRequest, with
// `id` attached when the line had a valid one (so the error response can carry it).
// The id is echoed in the answer, so it must be a scalar: an id nested 100,000 arrays deep
// parses, but JSON.stringify overflows the stack on it.
function parseRequest (line) {
  let req
  try { req = JSON.parse(line) } catch { throw badRequest('not JSON') }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) throw badRequest('not a JSON object')
  const id = req.id ?? null
  if (id !== null && typeof id !== 'string' && typeof id !== 'number') {
    throw badRequest('id must be a string, a number or null')
  }
  const fail = (message) => Object.assign(badRequest(message), { requestId: id })
  if (!COMMANDS.includes(req.command)) {
    throw fail(`unknown command ${describeCommand(req.command)} (known: ${COMMANDS.join(', ')})`)
  }
  const args = req.args ?? {}
  if (typeof args !== 'object' || Array.isArray(args)) throw fail('args must be an object')
  return { id, command: req.command, args }
}

// A client's unknown command, quoted short enough for one line.
function describeCommand (command) {
  if (typeof command !== 'string') {
    return command === undefined ? '(none)' : `of type ${Array.isArray(command) ? 'array' : typeof command}`
  }
  return JSON.stringify(command.length > 60 ? command.slice(0, 60) + '…' : command)
}

module.exports = { COMMANDS, MAX_LINE, encode, LineReader, serializeError, deserializeError, badRequest, parseRequest }
