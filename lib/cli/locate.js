'use strict'

// How `pool status|reload|scale|recycle|stop` find their pool: by the flags it was started with.
// Every flag of `pool start` is accepted, so the operator can paste the start command's flags.
// Those that name the control socket are used, read as `pool start` reads them (a flag, else its
// POOL_* variable, else the --config file): --control, else the front port that names the
// default socket, --port, or --worker-port with --balancer none/haproxy.
// The others mean nothing to a running pool's commands: accepted, ignored, and said so.

const { OPTIONS } = require('../options/table')
const { listenerOf, listenerPortOption } = require('../fronts/registry')
const { readConfigFile } = require('../config/file')
const { toYargs, fromArgv, fromEnv } = require('./flags')
const { startTable, startTables, defaultBalancer } = require('./start-flags')
const { clientControlPath, frontPortOf } = require('../control/path')

const GROUP = 'Finding the pool (as given to pool start)'
// The front port's option (--port), as the fronts that listen take it.
const FRONT_PORT = listenerPortOption() ?? { key: 'port', spec: { flag: 'port', kind: 'port' } }

// In the option table's format, so they parse and fail like `pool start`'s.
const LOCATING = {
  control: {
    ...OPTIONS.control,
    group: GROUP,
    describe: 'The pool\'s control socket, when it was started with --control'
  },
  port: {
    ...FRONT_PORT.spec,
    group: GROUP,
    describe: 'The pool\'s --port, which names its default control socket (given alone, also the --worker-port of a ' +
      'pool with --balancer none/haproxy)'
  },
  workerPort: {
    ...OPTIONS.workerPort,
    group: GROUP,
    describe: 'The pool\'s --worker-port: with --balancer none or haproxy, it names the default control socket'
  },
  balancer: {
    ...startTable().balancer,
    group: GROUP,
    describe: 'The pool\'s --balancer: says which of --port and --worker-port names the socket'
  },
  config: {
    ...startTable().config,
    group: GROUP,
    describe: 'The pool\'s --config file: the four above are read from it too'
  }
}
const LOCATING_FLAGS = new Set(Object.values(LOCATING).map((spec) => spec.flag))

// The rest of `pool start`'s flags, by flag name: accepted, hidden from --help, ignored.
function ignoredFlags () {
  const out = {}
  for (const table of startTables()) {
    for (const spec of Object.values(table)) if (!LOCATING_FLAGS.has(spec.flag)) out[spec.flag] = spec
  }
  return out
}

function locatingBuilder (y) {
  const ignored = toYargs(ignoredFlags())
  for (const option of Object.values(ignored)) {
    option.hidden = true
    delete option.group
  }
  return y.options(toYargs(LOCATING)).options(ignored)
}

// The control socket's path: { socketPath, explicit } (explicit: named by --control, so there
// is no point looking for the pool elsewhere), and `frontPort` when it was derived.
function locate (argv, env = process.env) {
  const given = { ...fromEnv(env, LOCATING), ...fromArgv(argv, LOCATING) }
  const file = given.config === undefined ? {} : readConfigFile(given.config).values
  const setting = (key) => given[key] ?? file[key]
  const control = setting('control')
  if (control !== undefined) return { socketPath: clientControlPath({ control, env }), explicit: true }
  const balancer = setting('balancer') ?? defaultBalancer()
  const port = setting('port')
  const workerPort = setting('workerPort')
  // `--port` alone has always named the socket, whatever the balancer: a pool started with
  // --balancer none --worker-port 7000 is found with --port 7000 too.
  const frontPort = frontPortOf({
    listener: listenerOf(balancer, port === undefined ? {} : { [FRONT_PORT.key]: port }),
    workerPort: workerPort ?? port ?? OPTIONS.workerPort.default
  })
  return { socketPath: clientControlPath({ frontPort, env }), explicit: false, frontPort }
}

// What the user wrote that this command ignores, as one line for stderr, or null: the flags of
// `pool start` that do not find the pool, and the app's arguments after `--`.
function ignoredNote (argv) {
  const flags =
    Object.values(ignoredFlags()).filter((spec) => argv[spec.flag] !== undefined).map((spec) => `--${spec.flag}`)
  const what = [...flags]
  if (argv['--']?.length > 0) what.push('the app\'s arguments after --')
  if (what.length === 0) return null
  const own = flags.includes('--timeout') ? ' (this command\'s own time limit is --wait)' : ''
  return `pool: ignoring ${what.join(', ')}: only pool start uses ${what.length === 1 ? 'it' : 'them'}${own}\n`
}

module.exports = { locatingBuilder, locate, ignoredNote }
