'use strict'

// What `pool start` does when its own process meets an error nobody caught (uncaughtException,
// unhandledRejection): a bug in the supervisor or in a front. Its state can no longer be
// trusted, and a pool half-working for hours is worse than a restart. So: log the error at fatal
// with its stack, stop the workers gracefully (running requests finish, as on SIGTERM), and exit
// 1 so that systemd (Restart=on-failure) starts a fresh pool.
//
// The graceful stop is the same as SIGTERM's, bounded by --graceful-timeout and --kill-timeout:
// cutting requests short would turn one bug into failed requests, and an idle pool stops at once
// anyway. But the stop runs on the state the error may have broken, so it is bounded twice over:
// - a second uncaught error during the stop kills every worker at once (pool.kill());
// - whatever happens, the process exits at a deadline (the stop's own bound: graceful timeout,
//   kill timeout, a kill timeout more for the app's leftover processes, and a margin), after one
//   last SIGKILL to every worker.
// Nothing here may throw: an exception inside an uncaughtException handler ends the process on
// the spot, workers and all left to fend for themselves.

const { EXIT } = require('./exit-codes')

const MARGIN = 2000 // ms past the stop's own bound before the deadline gives up on it
const MAX_LOGGED = 10 // an error repeating on every tick during the stop is logged this many times

function exitOnUncaught ({ pool, logger, exit = (code) => process.exit(code) }) {
  let errors = 0
  let deadline = null

  const onError = (origin) => (err) => {
    errors++
    if (errors <= MAX_LOGGED) logFatal(logger, err, origin, errors)
    if (errors === 1) stopGracefully()
    else if (errors === 2) attempt(() => pool.kill())
  }

  function stopGracefully () {
    if (pool.phase === 'idle') return exit(EXIT.FAILURE) // no worker yet: nothing to stop
    const { gracefulTimeout, killTimeout } = pool.options
    const bound = gracefulTimeout + 2 * killTimeout + MARGIN
    deadline = setTimeout(() => {
      attempt(() => logger.fatal({ event: 'fatal-deadline', ms: bound },
        `the stop did not finish within ${bound} ms; killing every worker and exiting`))
      attempt(() => pool.kill())
      exit(EXIT.FAILURE)
    }, bound)
    // Whoever awaits the stop (the `pool start` handler) exits with `failed` in mind.
    attempt(() => pool.stop())
  }

  process.on('uncaughtException', onError('uncaughtException'))
  process.on('unhandledRejection', onError('unhandledRejection'))
  return {
    get failed () { return errors > 0 },
    // The pool stopped and the process is about to exit by itself.
    done () { if (deadline) clearTimeout(deadline) }
  }
}

function logFatal (logger, err, origin, nth) {
  const message = err instanceof Error ? err.message : String(err)
  const stack = err instanceof Error ? err.stack : undefined
  const what = nth === 1 ? 'stopping the workers' : 'during the stop; killing every worker now'
  const line = `uncaught error in the supervisor (${origin}): ${message}; ${what}`
  try {
    // Something thrown that is not an Error (a string, say) is logged as an error's message.
    logger.fatal({ event: 'fatal', origin, err: err instanceof Error ? err : { message } }, line)
  } catch {
    attempt(() => process.stderr.write(`pool: ${line}\n${stack || ''}\n`)) // the log itself may be what broke (EPIPE)
  }
}

function attempt (fn) {
  try { return fn() } catch { /* see the header: nothing here may throw */ }
}

module.exports = { exitOnUncaught }
