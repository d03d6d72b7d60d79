'use strict'

// Public API of `pool`. See README.md and index.d.ts.
// `Pool` loads the supervisor when first asked for: an app's require('pool').listen() runs in a
// worker process, which loads none of the supervisor's modules.
const { listen } = require('./lib/worker/listen')
const { PoolError, codes } = require('./lib/errors')

module.exports = {
  get Pool () { return require('./lib/supervisor/pool').Pool },
  listen,
  PoolError,
  codes
}
