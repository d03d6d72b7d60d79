'use strict'

// `pool start APP`: build the pool and its front from flags, run until a signal, exit with a
// documented code.

const { Pool } = require('../supervisor')
const { OPTIONS, resolveOptions } = require('../options')
const { FRONTS, available } = require('../fronts')
const { createLogger } = require('../logger')
const { EXIT } = require('../errors')
const { toYargs, fromArgv } = require('./flags')
const { printError } = require('./output')

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
  try {
    const options = resolveOptions(fromArgv(argv, OPTIONS))
    const logger = createLogger({ level: options.logLevel, format: options.logFormat })
    const front = FRONTS[argv.balancer]
    const frontOptions = fromArgv(argv, front.options())
    pool = new Pool({ ...options, app: argv.app, logger, fronts: [front.create({ ...frontOptions, workers: options.workers }, { logger })] })
    handleSignals(pool, logger)
    pool.on('failed', (err) => { process.exitCode = err.exitCode ?? EXIT.FAILURE })
    await pool.start()
  } catch (err) {
    return printError(err)
  }
  const { clean } = await new Promise((resolve) => pool.once('stopped', resolve))
  if (pool.failure) return printError(pool.failure)
  process.exit(clean ? EXIT.OK : EXIT.UNCLEAN_STOP)
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
  pool.handleSignals?.(logger)
}

module.exports = {
  command: 'start <app>',
  describe: 'start a pool of single-request workers for APP',
  builder,
  handler
}
