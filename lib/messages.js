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

// Errors cross the IPC channel as plain data.
function serializeError (err) {
  if (!(err instanceof Error)) return { message: String(err), stack: String(err) }
  return { message: err.message, stack: err.stack || String(err), code: err.code }
}

module.exports = { VERSION, READY, BOOT_ERROR, BUSY, IDLE, HEARTBEAT, QUEUED, STOP, message, isPoolMessage, serializeError }
