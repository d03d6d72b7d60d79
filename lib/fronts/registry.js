'use strict'

// The fronts `--balancer X` can choose; each entry is all the pool knows of its front, so nothing outside
// fronts/ names one. Modules load lazily (`none` never loads the balancer):
//   describe; options() (its option table); resolve(o, pool) → resolved options or a PoolError (BAD_OPTION),
//   opening nothing; relays: it times each request itself (--read-timeout, --max-request-time), else the worker
//   does; listens: { port, host } option names of its client listener, a pool port; failures(): its
//   pool_failures_total reasons [{ reason, describe }]; create(resolved, { logger }) → the Front.

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

const DEFAULT_FRONT = 'embedded'

// A trimmed install may lack a front's modules.
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

function defaultFront () {
  return available().includes(DEFAULT_FRONT) ? DEFAULT_FRONT : 'none'
}

// Throws a PoolError (BAD_OPTION) naming the fronts there are.
function frontNamed (name) {
  if (typeof name === 'string' && Object.hasOwn(FRONTS, name)) return FRONTS[name]
  throw poolError(codes.BAD_OPTION,
    `balancer must be one of ${Object.keys(FRONTS).join(', ')} (got ${JSON.stringify(name)})`)
}

// → { name, flag, port, host } from the options given (defaults filled), or null.
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

// → { key, spec } of the listening fronts' port option (--port), or null; it (else --worker-port) names
// the control socket.
function listenerPortOption () {
  for (const name of available()) {
    const { listens } = FRONTS[name]
    if (listens) return { key: listens.port, spec: FRONTS[name].options()[listens.port] }
  }
  return null
}

// For the metric's help text.
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
