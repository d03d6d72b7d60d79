'use strict'

// Public API of `pool`. See README.md and index.d.ts.
const { listen } = require('./lib/worker/listen')
const { drainingSignal } = require('./lib/worker/draining')
const { PoolError, codes } = require('./lib/errors')

// `Pool` loads the supervisor when first asked for: an app's require('pool').listen() runs in a
// worker process, which loads none of the supervisor's modules.
const supervisor = {
  get Pool () { return require('./lib/supervisor/pool').Pool }
}
// `draining` is made when first asked for: outside a pool, only then are its signals listened for.
const worker = {
  get draining () { return drainingSignal() }
}

// A getter of this form (returning a property, enumerable first) is one Node's ESM loader reads
// as a named export, so `import { Pool } from 'pool'` works too.
Object.defineProperty(exports, 'Pool', { enumerable: true, get: function () { return supervisor.Pool } })
Object.defineProperty(exports, 'draining', { enumerable: true, get: function () { return worker.draining } })
exports.listen = listen
exports.PoolError = PoolError
exports.codes = codes
