'use strict'

// `pool start APP`: build the pool and its front from flags, POOL_* environment variables and a
// --config file (in that order of precedence, over the defaults), run until a signal, exit with
// a documented code.

const { Pool } = require('../supervisor/pool')
const { OPTIONS } = require('../options/table')
const { frontNamed, listenerOf } = require('../fronts/registry')
const { readConfigFile } = require('../config/file')
const { assemblePool } = require('../config/pool')
const { removedInEnv } = require('../options/removed')
const { createLogger, logOutputOf } = require('../shared/logger')
const { EXIT_FLUSH_MS } = require('../shared/log-output')
const { codes, poolError } = require('../errors')
const { EXIT, exitCodeOf } = require('./exit-codes')
const { toYargs, fromArgv, fromEnv, envName } = require('./flags')
const { defaultBalancer, startTable, startTables } = require('./start-flags')
const { printError } = require('./output')
const { exitOnUncaught } = require('./fatal')
// `pool status|reload|scale|recycle|stop` talk to the pool through its control socket.
const { createControlServer } = require('../control/server')
const { defaultControlPath, frontPortOf } = require('../control/path')
const { formatReload, formatScale } = require('../control/format')
const { inherited } = require('../net/activation')
const { ServiceNotifier } = require('../observe/notify')

function builder (y) {
  y.positional('app', {
    describe: 'the app module: a request listener, an http.Server, or a file that calls listen() (or "app" in the ' +
      '--config file)',
    type: 'string'
  })
  for (const table of startTables()) y.options(toYargs(table))
  // One line of comment, one command: a long command never squeezes its description into a
  // narrow column.
  y.example('# 15 workers behind the embedded balancer on 127.0.0.1:9001', '')
  y.example('$0 start app.js -n 15', '')
  y.example('# drive HAProxy instead (its config: pool config haproxy)', '')
  y.example('$0 start app.js --balancer haproxy --haproxy-socket /run/pool/haproxy-admin.sock', '')
  y.example('# the options in a file, one of them overridden', '')
  y.example('$0 start --config pool.config.json --workers 4', '')
  y.epilogue('Durations are seconds (30) or take a unit (500ms, 2s, 1m); sizes are bytes or take a unit (512k, 8m, ' +
    '1g). Each flag can also be given as an environment variable, POOL_ and the flag in capitals with _ for - ' +
    '(--worker-port: POOL_WORKER_PORT), or in a --config file (durations in ms there, sizes in bytes or with a ' +
    'unit). A flag wins over the environment, which wins over the file.')
  return y
}

// Where each setting comes from, strongest first: flags, POOL_* variables, the --config file,
// the defaults. Returns { app, balancer, options, frontOptions }, before any default is filled.
function settingsOf (argv, env) {
  const removed = removedInEnv(env)
  if (removed) throw poolError(codes.BAD_OPTION, removed)
  const start = startTable()
  const own = { ...fromEnv(env, start), ...fromArgv(argv, start) }
  const file = own.config === undefined ? { values: {} } : readConfigFile(own.config)
  const { app: fileApp, balancer: fileBalancer, ...fileValues } = file.values
  const balancer = own.balancer ?? fileBalancer ?? defaultBalancer()
  const frontTable = frontNamed(balancer).options()
  const table = { ...OPTIONS, ...frontTable }
  // The file's options of another front than the chosen one (a --balancer given over the
  // file's) do not apply.
  const merged = { ...pick(fileValues, table), ...fromEnv(env, table), ...fromArgv(argv, table) }
  const app = argv.app ?? fileApp
  if (app === undefined) {
    throw poolError(codes.BAD_OPTION, 'give the app to start: pool start APP, or "app" in a --config file')
  }
  // `pool start app.js -n 4 -- --flag value`: what follows `--` is the app's own command line,
  // its process.argv.slice(2) in every worker, after reloads too.
  const args = argv['--'] ?? []
  return { app, args, balancer, options: pick(merged, OPTIONS), frontOptions: pick(merged, frontTable) }
}

function pick (values, table) {
  const out = {}
  for (const key of Object.keys(values)) if (Object.hasOwn(table, key)) out[key] = values[key]
  return out
}

// The POOL_* variables are the supervisor's settings, not the app's: its workers must not inherit
// them (POOL_WORKERS, for one, is also the name of what each worker is told).
function forgetEnv (env) {
  for (const table of startTables()) for (const spec of Object.values(table)) delete env[envName(spec.flag)]
}

async function handler (argv) {
  let pool
  let notifier = null
  let control = null
  let stopped
  let guard
  let logger = null
  try {
    const settings = settingsOf(argv, process.env)
    forgetEnv(process.env)
    const { balancer, frontOptions } = settings
    const listener = listenerOf(balancer, frontOptions) // where the front listens, if it does
    // What a service manager handed over (sockets, a notify socket) is the supervisor's: taken
    // out of the environment before any worker inherits it.
    const handedOver = inherited.adopt(process.env, { flags: [listener?.flag, 'stats-port'].filter(Boolean) })
    notifier = ServiceNotifier.fromEnv(process.env)
    const config = assemblePool({
      ...withStatsPort(settings.options, listener),
      ...frontOptions,
      balancer,
      app: settings.app,
      args: settings.args
    })
    const { options } = config
    logger = createLogger({ level: options.logLevel, format: options.logFormat, bufferBytes: options.logBuffer })
    if (notifier) notifier.logger = logger
    if (process.pid === 1) {
      logger.warn({ event: 'pid1-no-reaper' },
        'node runs as PID 1 here and cannot reap the processes orphaned under it (they stay zombies): start the pool ' +
          'with the `pool` command, whose first lines keep a reaping shell as PID 1, or under an init (docker run ' +
          '--init, tini)')
    }
    if (handedOver.length > 0) {
      logger.info({ event: 'sockets-inherited', sockets: handedOver },
        `listening on ${handedOver.length} socket${handedOver.length > 1 ? 's' : ''} handed over by the service ` +
          'manager (LISTEN_FDS)')
    }
    pool = new Pool(config.with({ logger }))
    // From here on, an error nobody caught stops the workers and exits 1 (see ./fatal.js).
    guard = exitOnUncaught({ pool, logger })
    // control socket: claimed before any port or worker, so a second `pool start` on the same
    // socket refuses (CONTROL_IN_USE) without disturbing the running pool.
    const frontPort = frontPortOf({ listener, workerPort: options.workerPort })
    control = await createControlServer({ path: options.control ?? defaultControlPath(frontPort), pool, logger })
    // A stop during start (signal or `pool stop`) ends the pool before start() settles.
    stopped = new Promise((resolve) => pool.once('stopped', resolve))
    handleSignals(pool, logger)
    handleControlSignals(pool, logger)
    pool.on('failed', (err) => { process.exitCode = exitCodeOf(err) })
    if (notifier) tellServiceManager(pool, notifier)
    // start() rejects with POOL_E_STOPPING when a stop was asked for: not an error, the stop
    // below reports how it went.
    const starting = pool.start().catch((err) => { if (err.code === codes.STOPPING) return stopped; throw err })
    await Promise.race([starting, stopped])
    if (pool.phase === 'running') {
      notifier?.ready(serviceStatus(pool))
      const unused = inherited.left
      if (unused.length > 0) {
        logger.warn({ event: 'sockets-unused', fds: unused },
          `the service manager handed over ${unused.length} socket${unused.length > 1 ? 's' : ''} no listener of ` +
            `this pool takes (file descriptors ${unused.join(', ')}): name them port and stats-port ` +
            '(FileDescriptorName=)')
      }
    }
  } catch (err) {
    await control?.close()
    await notifier?.idle()
    await flushLogs(logger)
    return printError(err)
  }
  const { clean } = await stopped
  await notifier?.idle()
  await control.close() // answers the `pool stop` that may have caused this, removes the file
  guard.done()
  await flushLogs(logger) // the `stopped` line and every line before it, to a reader that reads
  if (pool.failure) return printError(pool.failure)
  if (guard.failed) process.exit(EXIT.FAILURE)
  process.exit(clean ? EXIT.OK : EXIT.UNCLEAN_STOP)
}

// Everything logged is written before the process exits, to a reader that keeps reading; one
// that does not is waited for EXIT_FLUSH_MS at most.
async function flushLogs (logger) {
  await logOutputOf(logger)?.flush(EXIT_FLUSH_MS)
}

// The stats listener is on by default on the command line, just below the pool's ports (9000 at
// the defaults): below the front's port (--port − 1) when the front listens itself; else
// --worker-port − 2, since --worker-port − 1 is where a HAProxy on this host usually listens
// (`pool config haproxy`). `listener`: the front's, or null.
function withStatsPort (options, listener) {
  const workerPort = options.workerPort ?? OPTIONS.workerPort.default
  if (options.statsPort === undefined) {
    const below = listener ? listener.port - 1 : workerPort - 2
    options.statsPort = below >= 1 ? below : 0
  }
  const statsHost = options.statsHost ?? OPTIONS.statsHost.default
  if (listener && options.statsPort === listener.port && statsHost === listener.host) {
    throw poolError(codes.BAD_OPTION, `--stats-port must differ from --${listener.flag} (both ${listener.port})`)
  }
  return options
}

// Type=notify: STOPPING=1 when a stop begins, STATUS= as the workers
// serving change (READY=1 is sent once start() has resolved). Only the rare events: a request's
// start and end change nothing here.
function tellServiceManager (pool, notifier) {
  pool.once('stopping', () => notifier.stopping())
  const update = () => { if (pool.phase === 'running') notifier.status(serviceStatus(pool)) }
  for (const event of ['ready', 'exit', 'draining', 'give-up', 'removed']) pool.on(event, update)
}

function serviceStatus (pool) {
  const serving = pool.workers().filter((w) => w.state === 'ready' || w.state === 'busy').length
  return `${serving} of ${pool.target} workers serving${pool.reloading ? ', reloading' : ''}`
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
  process.on('SIGTTIN',
    () => run('SIGTTIN', `scale to ${workers(pool.target + 1)}`, () => pool.scale(pool.target + 1), say(formatScale)))
  process.on('SIGTTOU', () => {
    if (pool.target <= 1) {
      return logger.warn({ event: 'signal', signal: 'SIGTTOU' }, 'SIGTTOU: already at 1 worker; not scaling below 1')
    }
    run('SIGTTOU', `scale to ${workers(pool.target - 1)}`, () => pool.scale(pool.target - 1), say(formatScale))
  })
}

function workers (n) {
  return `${n} worker${n === 1 ? '' : 's'}`
}

module.exports = {
  command: 'start [app]',
  appArgs: 'use', // what follows `--`: passed on to the app
  describe: 'start a pool of workers for APP, one render at a time in each',
  builder,
  handler
}
