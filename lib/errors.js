'use strict'

// Every error the library raises on purpose is a PoolError: a stable code (one of `codes`) and a
// one-line message that names the thing at fault (file, port, socket, backend/server, worker).
// Which exit code a failure gives is the CLI's business, decided in one place: exitCodeOf().

const EXIT = Object.freeze({
  OK: 0,
  FAILURE: 1, // the app could not boot, or an unexpected internal error
  USAGE: 2, // bad input: options, app path, ports, HAProxy socket/backend
  UNCLEAN_STOP: 3 // a stop had to TERM/KILL workers after the graceful timeout
})

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
  // The embedded balancer's, per request: they are answered with an HTTP status, never exit.
  BODY_TOO_LARGE: 'POOL_E_BODY_TOO_LARGE',
  BODY_OVER_BUDGET: 'POOL_E_BODY_OVER_BUDGET',
  CLIENT_ABORTED: 'POOL_E_CLIENT_ABORTED',
  PROXY_TIMEOUT: 'POOL_E_PROXY_TIMEOUT',
  WORKER_GONE: 'POOL_E_WORKER_GONE',
  BAD_RESPONSE: 'POOL_E_BAD_RESPONSE'
})

// The CLI's exit code for each code: bad input is EXIT.USAGE, the rest EXIT.FAILURE.
const EXIT_CODES = Object.freeze({
  [codes.BAD_OPTION]: EXIT.USAGE,
  [codes.APP_NOT_FOUND]: EXIT.USAGE,
  [codes.PORT_IN_USE]: EXIT.USAGE,
  [codes.BOOT_FAILED]: EXIT.FAILURE,
  [codes.NOT_STARTED]: EXIT.USAGE,
  [codes.STOPPING]: EXIT.USAGE,
  [codes.HAPROXY_SOCKET]: EXIT.USAGE,
  [codes.HAPROXY_PERMISSION]: EXIT.USAGE,
  [codes.HAPROXY_LEVEL]: EXIT.USAGE,
  [codes.HAPROXY_NO_BACKEND]: EXIT.USAGE,
  [codes.HAPROXY_NO_SERVER]: EXIT.USAGE,
  [codes.HAPROXY_COMMAND]: EXIT.USAGE,
  [codes.CONTROL_IN_USE]: EXIT.USAGE,
  [codes.CONTROL_UNREACHABLE]: EXIT.USAGE,
  [codes.RELOAD_FAILED]: EXIT.FAILURE,
  [codes.BUSY]: EXIT.USAGE,
  [codes.INTERNAL]: EXIT.FAILURE,
  [codes.BODY_TOO_LARGE]: EXIT.FAILURE,
  [codes.BODY_OVER_BUDGET]: EXIT.FAILURE,
  [codes.CLIENT_ABORTED]: EXIT.FAILURE,
  [codes.PROXY_TIMEOUT]: EXIT.FAILURE,
  [codes.WORKER_GONE]: EXIT.FAILURE,
  [codes.BAD_RESPONSE]: EXIT.FAILURE
})

// A control socket that answered nobody (missing, refused, denied, foreign) is the user's
// to fix; one whose exchange broke halfway is a failure.
const BROKEN_EXCHANGE = new Set(['io', 'timeout', 'closed'])

function exitCodeFor (code, details) {
  if (code === codes.CONTROL_UNREACHABLE && BROKEN_EXCHANGE.has(details?.reason)) return EXIT.FAILURE
  // A reload that had begun and was cut short (by a stop, too) failed; refused upfront, it is usage.
  if (details?.replaced) return EXIT.FAILURE
  return EXIT_CODES[code] ?? EXIT.FAILURE
}

class PoolError extends Error {
  constructor (code, message, { cause, details } = {}) {
    super(message, cause ? { cause } : undefined)
    this.name = 'PoolError'
    this.code = code
    if (details) this.details = details
  }
}

// The exit code the CLI gives for `err`. An error a pool reported over the control socket
// carries the exit code that pool chose (its own `exitCode`); an error the library did not
// raise on purpose is an unexpected internal one. Library errors themselves carry none.
function exitCodeOf (err) {
  if (Number.isInteger(err?.exitCode)) return err.exitCode
  return err instanceof PoolError ? exitCodeFor(err.code, err.details) : EXIT.FAILURE
}

function poolError (code, message, opts) {
  return new PoolError(code, message, opts)
}

module.exports = { PoolError, poolError, codes, EXIT, exitCodeOf }
