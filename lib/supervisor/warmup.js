'use strict'

// Warm-up: a new worker's first renders are slow (code not yet optimised, caches cold), so with
// --warmup the supervisor sends it a few requests of its own, straight to its port, before any
// front is told it is ready. One after the other, cycling through the paths; a status of 500 or
// more, a broken connection or no answer in time fails the warm-up, and so the boot.

const http = require('node:http')

// Requests carry this header, so that an app can tell them apart (and, say, skip analytics).
const WARMUP_HEADER = 'x-pool-warmup'

async function warmUp ({ host, port, paths, count, timeout }) {
  for (let i = 0; i < count; i++) {
    const path = paths[i % paths.length]
    const status = await get({ host, port, path, timeout })
    if (status >= 500) throw new Error(`GET ${path} answered ${status}`)
  }
}

function get ({ host, port, path, timeout }) {
  return new Promise((resolve, reject) => {
    const req = http.get({
      host,
      port,
      path,
      agent: false,
      headers: { [WARMUP_HEADER]: '1', 'user-agent': 'pool-warmup' }
    }, (res) => {
      res.resume() // the body is of no use; reading it lets the worker finish its response
      res.once('end', () => resolve(res.statusCode))
      res.once('error', reject)
    })
    req.setTimeout(timeout, () => req.destroy(new Error(`GET ${path}: no answer within ${timeout} ms`)))
    req.once('error', (err) => reject(new Error(`GET ${path}: ${err.message}`)))
  })
}

module.exports = { warmUp, WARMUP_HEADER }
