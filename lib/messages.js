'use strict'

// The IPC vocabulary between the supervisor and its workers, in one place so both sides agree.
// Every message is a small plain object with a `type` and the protocol version `v`.

const VERSION = 1

// worker → supervisor
const READY = 'ready' //           { port }                 listening, may take requests
const BOOT_ERROR = 'boot-error' // { error: { message, stack, code } }  the app failed to load or listen
const BUSY = 'busy' //             { method, url }          a request started
const IDLE = 'idle' //             { rss, requests }        the request ended
const HEARTBEAT = 'heartbeat' //   { rss }                  liveness while idle
const QUEUED = 'queued' //         { waiting }              a request found the worker busy

// supervisor → worker
const STOP = 'stop' //             finish the running request, close, exit 0

function message (type, fields = {}) {
  return { v: VERSION, type, ...fields }
}

function isPoolMessage (msg) {
  return msg !== null && typeof msg === 'object' && msg.v === VERSION && typeof msg.type === 'string'
}

// A worker's message as the supervisor may trust it, or null. The app runs in the worker and
// can call process.send() itself, so every field is checked and copied, never used as sent:
// a message the supervisor cannot use is dropped, not a reason to throw.
const MAX_TEXT = 8192
const text = (v, max = MAX_TEXT) => typeof v === 'string' ? v.slice(0, max) : undefined
const count = (v) => Number.isSafeInteger(v) && v >= 0 ? v : undefined
const bytes = (v) => Number.isFinite(v) && v >= 0 ? v : null

const WORKER_MESSAGES = {
  [READY]: () => ({}),
  [BUSY]: (m) => typeof m.method === 'string' && typeof m.url === 'string' ? { method: text(m.method, 64), url: text(m.url) } : null,
  [IDLE]: (m) => count(m.requests) === undefined ? null : { rss: bytes(m.rss), requests: m.requests },
  [HEARTBEAT]: (m) => ({ rss: bytes(m.rss) }),
  [QUEUED]: (m) => count(m.waiting) > 0 ? { waiting: m.waiting } : null,
  [BOOT_ERROR]: (m) => {
    const e = m.error !== null && typeof m.error === 'object' ? m.error : {}
    return { error: { message: text(e.message) || 'the worker reported a boot error without a message', stack: text(e.stack, 65536) || '', code: text(e.code, 64) } }
  }
}

function parseWorkerMessage (m) {
  if (!isPoolMessage(m) || !Object.hasOwn(WORKER_MESSAGES, m.type)) return null
  const fields = WORKER_MESSAGES[m.type](m)
  return fields && { v: VERSION, type: m.type, ...fields }
}

// Errors cross the IPC channel as plain data.
function serializeError (err) {
  if (!(err instanceof Error)) return { message: String(err), stack: String(err) }
  return { message: err.message, stack: err.stack || String(err), code: err.code }
}

module.exports = { VERSION, READY, BOOT_ERROR, BUSY, IDLE, HEARTBEAT, QUEUED, STOP, message, isPoolMessage, parseWorkerMessage, serializeError }
