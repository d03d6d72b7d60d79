'use strict'

// The fronts `pool start --balancer X` can put before the workers, each with its option table
// (lib/options/table.js format) and a factory. Modules load lazily: `--balancer none` never pays
// for the balancer, and the CLI can list every flag for --help.

const { NoFront } = require('./front')

const FRONTS = {
  embedded: {
    describe: 'the built-in balancer: one central queue, one request per worker',
    options: () => require('./balancer').OPTIONS,
    create: (opts, ctx) => require('./balancer').createBalancer(opts, ctx)
  },
  haproxy: {
    describe: 'drive an external HAProxy over its runtime API',
    options: () => require('./haproxy/options').OPTIONS,
    create: (opts, ctx) => require('./haproxy/front').createHaproxyFront(opts, ctx)
  },
  none: {
    describe: 'workers only, on their own ports',
    options: () => ({}),
    create: () => new NoFront()
  }
}

function available () {
  return Object.keys(FRONTS).filter((name) => {
    try { FRONTS[name].options(); return true } catch (err) { if (err.code === 'MODULE_NOT_FOUND') return false; throw err }
  })
}

module.exports = { FRONTS, available }
