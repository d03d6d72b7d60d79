'use strict'

// The bench app (bench/lib/app.js) as a pool app: `pool start bench/lib/pool-app.js` runs it in
// each worker, so the pool's own supervision (timeouts, heartbeats, respawn, reload) is what the
// matrix and the kill timeline measure.

const { createApp } = require('./app')

module.exports = createApp()
