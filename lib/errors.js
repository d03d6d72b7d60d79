'use strict'

// Every error that reaches a user carries a stable code, a one-line message that names the
// thing at fault (file, port, socket, backend/server) and the exit code the CLI uses for it.

const EXIT = Object.freeze({
  OK: 0,
  FAILURE: 1, // the app could not boot, or an unexpected internal error
  USAGE: 2, // bad input: options, app path, ports, HAProxy socket/backend
  UNCLEAN_STOP: 3 // a stop had to TERM/KILL workers after the graceful timeout
})

class PoolError extends Error {
  constructor (code, message, { cause, exitCode = EXIT.USAGE, details } = {}) {
    super(message, cause ? { cause } : undefined)
    this.name = 'PoolError'
    this.code = code
    this.exitCode = exitCode
    if (details) this.details = details
  }
}

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
  BUSY: 'POOL_E_BUSY'
})

function poolError (code, message, opts) {
  return new PoolError(code, message, opts)
}

module.exports = { PoolError, poolError, codes, EXIT }
