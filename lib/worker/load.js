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

// Nothing exported to serve: the app may still listen after async set-up. Once the event loop is empty
// (the link unref'd), no listen() can come: the boot fails. `hint()` is called once after 5 s.
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

// cluster.fork() would fork the bootstrap again, unheard of by the supervisor: it fails the boot while
// `booting()`, and throws.
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
