'use strict'

// Every error the library raises on purpose is a PoolError: a stable code (one of `codes`) and a
// one-line message that names the thing at fault (file, port, socket, backend/server, worker).
// Which exit code a failure gives is the CLI's business, decided in one place (exitCodeOf).

const codes = Object.freeze({
  BAD_OPTION: 'POOL_E_BAD_OPTION',
  APP_NOT_FOUND: 'POOL_E_APP_NOT_FOUND',
  PORT_IN_USE: 'POOL_E_PORT_IN_USE',
  BOOT_FAILED: 'POOL_E_BOOT_FAILED',
  NOT_STARTED: 'POOL_E_NOT_STARTED',
  STOPPING: 'POOL_E_STOPPING',
  HAPROXY_SOCKET: 'POOL_E_HAPROXY_SOCKET',
  HAPROXY_PERMISSION: 'POOL_E_HAPROXY_PERMISSION',
  HAPROXY_LEVEL: 'POOL_E_HAPROXY_LEVEL',
  HAPROXY_NO_BACKEND: 'POOL_E_HAPROXY_NO_BACKEND',
  HAPROXY_NO_SERVER: 'POOL_E_HAPROXY_NO_SERVER',
  HAPROXY_COMMAND: 'POOL_E_HAPROXY_COMMAND',
  CONTROL_IN_USE: 'POOL_E_CONTROL_IN_USE',
  CONTROL_UNREACHABLE: 'POOL_E_CONTROL_UNREACHABLE',
  RELOAD_FAILED: 'POOL_E_RELOAD_FAILED',
  BUSY: 'POOL_E_BUSY',
  INTERNAL: 'POOL_E_INTERNAL', // an unexpected error, as the control socket reports it
  // The reason of `draining` (lib/worker/draining.js) once it aborts: the app's process is to leave.
  WORKER_DRAINING: 'POOL_E_WORKER_DRAINING',
  // The embedded balancer's, per request: they are answered with an HTTP status, never exit.
  BODY_TOO_LARGE: 'POOL_E_BODY_TOO_LARGE',
  BODY_OVER_BUDGET: 'POOL_E_BODY_OVER_BUDGET',
  CLIENT_ABORTED: 'POOL_E_CLIENT_ABORTED',
  PROXY_TIMEOUT: 'POOL_E_PROXY_TIMEOUT',
  WORKER_GONE: 'POOL_E_WORKER_GONE',
  BAD_RESPONSE: 'POOL_E_BAD_RESPONSE'
})

class PoolError extends Error {
  constructor (code, message, { cause, details } = {}) {
    super(message, cause ? { cause } : undefined)
    this.name = 'PoolError'
    this.code = code
    if (details) this.details = details
  }
}

function poolError (code, message, opts) {
  return new PoolError(code, message, opts)
}

module.exports = { PoolError, poolError, codes }
