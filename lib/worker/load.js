'use strict'

// Loading the app: its module, CommonJS or ES; what it may not do (fork a cluster); and when to
// stop waiting for a listen() it never made.

const { pathToFileURL } = require('node:url')
const { noListenError, appError } = require('./servable')

async function loadModule (file) {
  try {
    return require(file)
  } catch (err) {
    if (err.code !== 'ERR_REQUIRE_ESM' && err.code !== 'ERR_REQUIRE_ASYNC_MODULE') throw err
    return import(pathToFileURL(file).href)
  }
}

// The module exported nothing to serve: the app may still listen, through pool's listen() or
// on PORT itself, after asynchronous set-up (Next's prepare(), hapi's start()). The worker
// waits as long as the app has work in progress, bounded by the supervisor's boot timeout.
// Once its event loop is empty (the link does not count), no listen() can come any more: the
// boot fails at once, saying what the module exported. `hint()` is called once if it takes long.
function awaitListen (app, { link, claimed, failBoot, hint }) {
  link.letGo()
  process.on('beforeExit', () => {
    if (claimed()) return
    link.hold()
    failBoot(noListenError(app))
  })
  const timer = setTimeout(() => { if (!claimed()) hint() }, 5000)
  timer.unref()
}

// cluster.fork() would fork this worker's bootstrap (process.argv[1]) again, a process the
// supervisor never hears from, and the worker would wait for a listen() that never comes. The
// pool is the cluster: the app says so at once, in its boot failure, or as a throw once ready.
// `booting()`: whether the boot is still under way (the failure is then the boot's).
function forbidCluster ({ workers, booting, failBoot }) {
  const cluster = require('node:cluster')
  cluster.fork = () => {
    const err =
      appError(`the app uses cluster (cluster.fork()), and pool already runs ${workers || 'N'} ` +
        `worker${workers === 1 ? '' : 's'}, one process each: drop cluster.fork() and serve from this process (pool ` +
        'start -n sets how many)')
    if (booting()) failBoot(err)
    throw err
  }
}

module.exports = { loadModule, awaitListen, forbidCluster }
