'use strict'

// The control protocol: newline-delimited JSON over a unix socket, one response per request matched by
// `id` (string, number or null), each answered when it finishes (a status while a reload still runs).
//   → { "id": 1, "command": "scale", "args": { "workers": 6 } }
//   ← { "id": 1, "ok": true, "result": { "from": 4, "to": 6 } }
//   ← { "id": 1, "ok": false, "error": { "code": "POOL_E_RELOAD_FAILED", "message": "...", "replaced": [] } }
// An error carries facts (`replaced`, `appError`), never an exit code (the CLI's policy; older pools sent
// `exitCode`). ping → { pid, phase } probes for a live pool. An error with id null is about the connection,
// closed right after it.

const { poolError, codes } = require('../errors')

const COMMANDS = Object.freeze(['status', 'reload', 'scale', 'recycle', 'stop', 'ping'])
// Far above any request or status answer: a longer line is not the protocol.
const MAX_LINE = 1024 * 1024

function encode (message) {
  return JSON.stringify(message) + '\n'
}

// Calls onLine(text) for each complete line; one longer than maxLine drops the buffer and throws.
class LineReader {
  constructor (onLine, { maxLine = MAX_LINE } = {}) {
    this.onLine = onLine
    this.maxLine = maxLine
    this.buffer = ''
  }

  push (chunk) {
    let start = 0
    let end
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
  if (Array.isArray(err?.details?.replaced)) out.replaced = err.details.replaced
  return out
}

function deserializeError (error) {
  const details = {}
  if (error.appError) Object.assign(details, { headline: error.headline || error.message, appError: error.appError })
  if (Array.isArray(error.replaced)) details.replaced = error.replaced
  const err = poolError(error.code || codes.INTERNAL, error.message || 'the pool reported an error without a message',
    { details: Object.keys(details).length ? details : undefined })
  // An older pool's exit code, kept (exitCodeOf).
  if (Number.isInteger(error.exitCode) && error.exitCode > 0) {
    Object.defineProperty(err, 'exitCode', { value: error.exitCode, enumerable: true })
  }
  err.remote = true // said by the pool, not by the connection
  return err
}

function badRequest (message) {
  return poolError(codes.BAD_OPTION, `bad control request: ${message}`)
}

// { id, command, args }, or throws badRequest (with `requestId` once the id is valid). The id must be a
// scalar: echoed, a deeply nested one would overflow JSON.stringify's stack.
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

function describeCommand (command) {
  if (typeof command !== 'string') {
    return command === undefined ? '(none)' : `of type ${Array.isArray(command) ? 'array' : typeof command}`
  }
  return JSON.stringify(command.length > 60 ? command.slice(0, 60) + '…' : command)
}

module.exports = { COMMANDS, MAX_LINE, encode, LineReader, serializeError, deserializeError, badRequest, parseRequest }
