'use strict'

// `pool start APP`: build the pool and its front from flags, run until a signal, exit with a
// documented code.

const { Pool } = require('../supervisor')
const { OPTIONS, resolveOptions } = require('../options')
const { FRONTS, available } = require('../fronts')
const { createLogger } = require('../logger')
const { EXIT, codes, exitCodeOf, poolError } = require('../errors')
const { toYargs, fromArgv } = require('./flags')
const { printError } = require('./output')
const { exitOnUncaught } = require('./fatal')
// control socket (issue 5): `pool status|reload|scale|stop` talk to the pool through it
const { createControlServer } = require('../control/server')
const { defaultControlPath, frontPortOf } = require('../control/path')
const { formatReload, formatScale } = require('../control/format')

const DEFAULT_FRONT = 'embedded'

function frontTables () {
  const tables = {}
  for (const name of available()) tables[name] = FRONTS[name].options()
  return tables
}

function builder (y) {
  const fronts = available()
  y.positional('app', { describe: 'the app module: a request listener, an http.Server, or a file that calls listen()', type: 'string' })
  y.option('balancer', {
    describe: 'what sits in front of the workers',
    choices: fronts,
    default: fronts.includes(DEFAULT_FRONT) ? DEFAULT_FRONT : 'none',
    group: 'Front:'
  })
  y.options(toYargs(OPTIONS))
  for (const table of Object.values(frontTables())) y.options(toYargs(table))
  y.example('$0 start app.js -n 15', '15 workers behind the embedded balancer on 127.0.0.1:9001')
  y.example('$0 start app.js --balancer haproxy --haproxy-socket /run/haproxy/admin.sock', 'drive HAProxy instead')
  return y
}

async function handler (argv) {
  let pool
  let control = null
  let stopped
  let guard
  try {
    const front = FRONTS[argv.balancer]
    const frontOptions = fromArgv(argv, front.options())
    const port = frontOptions.port ?? front.options().port?.default
    const options = resolveOptions(withStatsPort(fromArgv(argv, OPTIONS), { balancer: argv.balancer, port, host: frontOptions.host ?? front.options().host?.default }))
    const logger = createLogger({ level: options.logLevel, format: options.logFormat })
    pool = new Pool({ ...options, ...frontOptions, balancer: argv.balancer, app: argv.app, logger })
    // From here on, an error nobody caught stops the workers and exits 1 (see ./fatal.js).
    guard = exitOnUncaught({ pool, logger })
    // control socket: claimed before any port or worker, so a second `pool start` on the same
    // socket refuses (CONTROL_IN_USE) without disturbing the running pool.
    const frontPort = frontPortOf({ balancer: argv.balancer, port, workerPort: options.workerPort })
    control = await createControlServer({ path: options.control ?? defaultControlPath(frontPort), pool, logger })
    // A stop during start (signal or `pool stop`) ends the pool before start() settles.
    stopped = new Promise((resolve) => pool.once('stopped', resolve))
    handleSignals(pool, logger)
    handleControlSignals(pool, logger)
    pool.on('failed', (err) => { process.exitCode = exitCodeOf(err) })
    // start() rejects with POOL_E_STOPPING when a stop was asked for: not an error, the stop
    // below reports how it went.
    const starting = pool.start().catch((err) => { if (err.code === codes.STOPPING) return stopped; throw err })
    await Promise.race([starting, stopped])
  } catch (err) {
    await control?.close()
    return printError(err)
  }
  const { clean } = await stopped
  await control.close() // answers the `pool stop` that may have caused this, removes the file
  guard.done()
  if (pool.failure) return printError(pool.failure)
  if (guard.failed) process.exit(EXIT.FAILURE)
  process.exit(clean ? EXIT.OK : EXIT.UNCLEAN_STOP)
}

// The stats listener is on by default on the command line, just below the pool's ports (9000 at
// the defaults): --port − 1 with the embedded balancer; without it --worker-port − 2, since
// --worker-port − 1 is where a HAProxy on this host usually listens (`pool config haproxy`).
function withStatsPort (options, { balancer, port, host }) {
  const workerPort = options.workerPort ?? OPTIONS.workerPort.default
  if (options.statsPort === undefined) {
    const below = balancer === 'embedded' ? port - 1 : workerPort - 2
    options.statsPort = below >= 1 ? below : 0
  }
  const statsHost = options.statsHost ?? OPTIONS.statsHost.default
  if (balancer === 'embedded' && options.statsPort === port && statsHost === host) {
    throw poolError(codes.BAD_OPTION, `--stats-port must differ from --port (both ${port})`)
  }
  return options
}

// TERM/INT: graceful stop; a second one: kill now.
function handleSignals (pool, logger) {
  let stopping = false
  const onStop = (signal) => {
    if (stopping) {
      logger.warn({ event: 'signal', signal }, `${signal} again: killing every worker now`)
      pool.kill()
      return
    }
    stopping = true
    logger.info({ event: 'signal', signal }, `${signal}: graceful stop`)
    pool.stop()
  }
  process.on('SIGTERM', onStop)
  process.on('SIGINT', onStop)
}

// control signals: HUP rolling reload, TTIN one worker more, TTOU one fewer (never below 1).
// The same operations as `pool reload|scale`; the outcome goes to the log.
function handleControlSignals (pool, logger) {
  const run = (signal, what, operation, describe) => {
    logger.info({ event: 'signal', signal }, `${signal}: ${what}`)
    Promise.resolve().then(operation).then(
      (result) => logger.info({ event: 'signal-done', signal, result }, `${signal}: ${describe(result)}`),
      (err) => logger.warn({ event: 'signal-failed', signal, err }, `${signal}: ${what} failed: ${err.message}`)
    )
  }
  const say = (format) => (result) => format(result).trim()
  process.on('SIGHUP', () => run('SIGHUP', 'rolling reload', () => pool.reload(), say(formatReload)))
  process.on('SIGTTIN', () => run('SIGTTIN', `scale to ${pool.target + 1} workers`, () => pool.scale(pool.target + 1), say(formatScale)))
  process.on('SIGTTOU', () => {
    if (pool.target <= 1) return logger.warn({ event: 'signal', signal: 'SIGTTOU' }, 'SIGTTOU: already at 1 worker; not scaling below 1')
    run('SIGTTOU', `scale to ${pool.target - 1} workers`, () => pool.scale(pool.target - 1), say(formatScale))
  })
}

module.exports = {
  command: 'start <app>',
  describe: 'start a pool of single-request workers for APP',
  builder,
  handler
}
