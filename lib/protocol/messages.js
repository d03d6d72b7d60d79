'use strict'

// The messages between the supervisor and its workers (carried by channel.js): plain objects with a
// `type` and the protocol version `v`.

const VERSION = 1

// worker → supervisor
const READY = 'ready' //           { port, rss }            listening, may take requests
const BOOT_ERROR = 'boot-error' // { error: { message, stack, code } }  the app failed to load or listen
const CHECK_IN = 'check-in' //     { rss, open, tunnels, tunnelsOpened, answered, active, request }  its event
//                                 loop came round; `request`: the one open longest ({ method, url, age })
const QUEUED = 'queued' //         { waiting, running }     a request found every render place taken
const LISTENER_CLOSED = 'listener-closed' // { error? }  after ready: its server no longer listens (closed, or failed)
const LEFT_PORT = 'left-port' //   { open, tunnels }        stopping, it freed the port; exits once these end
const REQUEST_ENDED = 'request-ended' // { id }          the request watched (WATCH_REQUEST) ended, or was not there
const AWAITING = 'awaiting' //     { open, last }           --worker-concurrency > 1: the `open` requests it holds all
//                                 await I/O; `last`: the exchange (X-Pool-Request) of the one started last

// supervisor → worker
const STOP = 'stop' //             { reason }               finish what is open, exit 0 (DRAIN_REASONS)
const WATCH_REQUEST = 'watch-request' // { id }          say when the request of this exchange (X-Pool-Request) ends

// Why a worker drains, as STOP says it to the app (draining.js); anything else is read as none.
const DRAIN_REASONS = new Set(['stop', 'reload', 'scale-down', 'max-requests', 'max-rss', 'recycle', 'listener-closed'])
const drainReason = (v) => DRAIN_REASONS.has(v) ? v : null

function message (type, fields = {}) {
  return { v: VERSION, type, ...fields }
}

function isPoolMessage (msg) {
  return msg !== null && typeof msg === 'object' && msg.v === VERSION && typeof msg.type === 'string'
}

// A worker's message as the supervisor may trust it, or null: the app can write to the channel itself, so
// every field is checked and copied.
const MAX_TEXT = 8192
const MAX_STACK = 65536
const MAX_URL = 1024 // a request's URL in a check-in: for people to read
const MAX_ID = 256 // an exchange id (X-Pool-Request, the balancer's)
const text = (v, max = MAX_TEXT) => typeof v === 'string' ? v.slice(0, max) : undefined
const count = (v) => Number.isSafeInteger(v) && v >= 0 ? v : undefined
const bytes = (v) => Number.isFinite(v) && v >= 0 ? v : null
const request = (v) => v !== null && typeof v === 'object' && typeof v.method === 'string' && typeof v.url === 'string'
  ? { method: text(v.method, 64), url: text(v.url) }
  : undefined

const WORKER_MESSAGES = {
  [READY]: (m) => ({ rss: bytes(m.rss) }),
  [CHECK_IN]: (m) => ({
    rss: bytes(m.rss),
    open: count(m.open) ?? 0,
    tunnels: count(m.tunnels) ?? 0,
    tunnelsOpened: count(m.tunnelsOpened) ?? 0,
    answered: count(m.answered) ?? 0,
    active: m.active === true,
    request: request(m.request) ? { ...request(m.request), age: count(m.request.age) ?? 0 } : null
  }),
  [LEFT_PORT]: (m) => ({ open: count(m.open) ?? 0, tunnels: count(m.tunnels) ?? 0 }),
  [QUEUED]: (m) => count(m.waiting) > 0 ? { waiting: m.waiting, running: request(m.running) } : null,
  [BOOT_ERROR]: (m) => {
    const e = m.error !== null && typeof m.error === 'object' ? m.error : {}
    return {
      error: {
        message: text(e.message) || 'the worker reported a boot error without a message',
        stack: text(e.stack, MAX_STACK) || '',
        code: text(e.code, 64)
      }
    }
  },
  [AWAITING]: (m) => count(m.open) > 0 && typeof m.last === 'string'
    ? { open: m.open, last: text(m.last, MAX_ID) }
    : null,
  [REQUEST_ENDED]: (m) => typeof m.id === 'string' ? { id: text(m.id, MAX_ID) } : null,
  // Without `error`: the app closed its server. With it: the server failed (an accept error).
  [LISTENER_CLOSED]: (m) => {
    const e = m.error !== null && typeof m.error === 'object' ? m.error : null
    return {
      error: e && {
        message: text(e.message) || 'the server emitted an error without a message',
        code: text(e.code, 64)
      }
    }
  }
}

function parseWorkerMessage (m) {
  if (!isPoolMessage(m) || !Object.hasOwn(WORKER_MESSAGES, m.type)) return null
  const fields = WORKER_MESSAGES[m.type](m)
  return fields && { v: VERSION, type: m.type, ...fields }
}

// Cut to what the supervisor keeps, so the message always fits in a frame.
function serializeError (err) {
  if (!(err instanceof Error)) return { message: asText(err, MAX_TEXT), stack: asText(err, MAX_STACK) }
  return {
    message: asText(err.message, MAX_TEXT),
    stack: asText(err.stack || err, MAX_STACK),
    code: typeof err.code === 'string' ? err.code.slice(0, 64) : undefined
  }
}

// Whatever the app threw, as text (String() throws for an object without a usable toString).
function asText (v, max) {
  try { return String(v).slice(0, max) } catch { return Object.prototype.toString.call(v) }
}

module.exports = {
  VERSION,
  MAX_TEXT,
  MAX_ID,
  MAX_URL,
  READY,
  BOOT_ERROR,
  CHECK_IN,
  QUEUED,
  LISTENER_CLOSED,
  LEFT_PORT,
  REQUEST_ENDED,
  AWAITING,
  STOP,
  WATCH_REQUEST,
  message,
  drainReason,
  isPoolMessage,
  parseWorkerMessage,
  serializeError
}
