'use strict'

// The `pool` command's exit codes, decided in one place. The library raises PoolErrors with a
// code and no exit code: which exit code a failure gives is the CLI's policy, kept here. An
// error a pool reports over the control socket arrives as its code and the facts the policy
// needs, and is mapped here like a local one.

const { PoolError, codes } = require('../errors')

const EXIT = Object.freeze({
  OK: 0,
  FAILURE: 1, // the app could not boot, or an unexpected internal error
  USAGE: 2, // bad input: options, app path, ports, HAProxy socket/backend
  UNCLEAN_STOP: 3 // a stop had to TERM/KILL workers after the graceful timeout
})

// The exit code for each code: bad input is EXIT.USAGE, the rest EXIT.FAILURE.
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
  [codes.WORKER_DRAINING]: EXIT.FAILURE, // the app's drain signal, never thrown
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

// The exit code for `err`. An error the library did not raise on purpose is an unexpected
// internal one. A pool of an older version said the exit code itself, over the control socket
// (`exitCode`): that one is kept.
function exitCodeOf (err) {
  if (Number.isInteger(err?.exitCode)) return err.exitCode
  return err instanceof PoolError ? exitCodeFor(err.code, err.details) : EXIT.FAILURE
}

module.exports = { EXIT, EXIT_CODES, exitCodeOf }
