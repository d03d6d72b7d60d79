'use strict'

// The fronts `pool start --balancer X` can put before the workers. Each entry says all that the
// rest of the pool needs to know of its front, so that nothing outside fronts/ names one:
//
//   describe     one line for --help
//   options()    its option table (in the schema's format)
//   resolve(o, pool)  its options with their defaults, checked, or a PoolError (BAD_OPTION);
//                builds nothing, opens nothing (`pool`: the pool's own options, resolved)
//   relays       whether it relays each request itself, and so times it (--read-timeout,
//                --max-request-time); where the front does not, the worker does
//   listens      where its table says it listens for clients, { port, host } (option names), if
//                it does: that port is one of the pool's own (checked against the workers',
//                naming the control socket, below the stats port)
//   failures()   the pool_failures_total reasons it counts, [{ reason, describe }]
//   create(resolved, { logger })  the Front itself, from resolved options
//
// Modules load lazily: `--balancer none` never pays for the balancer, and the CLI can list every
// flag for --help.

const { NoFront } = require('./front')
const { poolError, codes } = require('../errors')

const FRONTS = {
  embedded: {
    describe: 'the built-in balancer: one central queue, one render at a time per worker',
    options: () => require('./balancer/options').OPTIONS,
    resolve: (options, pool) => require('./balancer/options').resolveBalancerOptions(options, pool),
    relays: true,
    listens: { port: 'port', host: 'host' },
    failures: () => require('./balancer/failures').FAILURE_REASONS,
    create: (resolved, { logger } = {}) => new (require('./balancer/balancer').EmbeddedBalancer)(resolved, { logger })
  },
  haproxy: {
    describe: 'drive an external HAProxy over its runtime API',
    options: () => require('./haproxy/options').OPTIONS,
    resolve: (options) => require('./haproxy/options').resolveHaproxyFrontOptions(options),
    relays: false, // HAProxy relays, but its `timeout server` is only a backstop above the worker's
    listens: null, // HAProxy's listener is HAProxy's
    failures: () => [],
    create: (resolved, { logger } = {}) => new (require('./haproxy/front').HaproxyFront)(resolved, { logger })
  },
  none: {
    describe: 'workers only, on their own ports',
    options: () => ({}),
    resolve: () => ({}),
    relays: false,
    listens: null,
    failures: () => [],
    create: () => new NoFront()
  }
}

// What `pool start` puts in front of the workers when nothing says otherwise.
const DEFAULT_FRONT = 'embedded'

// The fronts whose modules are here (a trimmed install may lack one).
function available () {
  return Object.keys(FRONTS).filter((name) => {
    try {
      FRONTS[name].options()
      return true
    } catch (err) {
      if (err.code === 'MODULE_NOT_FOUND') return false
      throw err
    }
  })
}

// The default front if it is here, else none.
function defaultFront () {
  return available().includes(DEFAULT_FRONT) ? DEFAULT_FRONT : 'none'
}

// The registry entry of front `name`; a PoolError (BAD_OPTION) naming the fronts there are.
function frontNamed (name) {
  if (typeof name === 'string' && Object.hasOwn(FRONTS, name)) return FRONTS[name]
  throw poolError(codes.BAD_OPTION,
    `balancer must be one of ${Object.keys(FRONTS).join(', ')} (got ${JSON.stringify(name)})`)
}

// Where front `name` listens for clients, from its options as given (defaults filled):
// { name, flag, port, host }, or null for a front that listens on nothing of the pool's.
function listenerOf (name, options = {}) {
  const { listens } = frontNamed(name)
  if (!listens) return null
  const table = frontNamed(name).options()
  const valueOf = (key) => options[key] ?? table[key].default
  return {
    name: listens.port,
    flag: table[listens.port].flag,
    port: valueOf(listens.port),
    host: valueOf(listens.host)
  }
}

// The option of the port the fronts that listen take (--port): { key, spec }, or null. By it,
// and by --worker-port otherwise, a pool's control socket is named.
function listenerPortOption () {
  for (const name of available()) {
    const { listens } = FRONTS[name]
    if (listens) return { key: listens.port, spec: FRONTS[name].options()[listens.port] }
  }
  return null
}

// Every front's pool_failures_total reasons, by front, for the metric's help text.
function frontFailures () {
  const out = {}
  for (const name of available()) out[name] = FRONTS[name].failures()
  return out
}

module.exports = {
  FRONTS,
  DEFAULT_FRONT,
  available,
  defaultFront,
  frontNamed,
  listenerOf,
  listenerPortOption,
  frontFailures
}
