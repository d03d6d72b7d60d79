'use strict'

// Public API of `pool`. See README.md and index.d.ts.
const { Pool } = require('./lib/supervisor/pool')
const { listen } = require('./lib/worker/listen')
const { PoolError, codes } = require('./lib/errors')

module.exports = { Pool, listen, PoolError, codes }
