'use strict'

// The file the supervisor forks; it loads the app through the runtime, whichever of its three forms.
const Module = require('node:module')
const path = require('node:path')
const { WorkerRuntime } = require('./runtime')

// `require('pool')` and `require('pool-supervisor')` that the app's node_modules cannot resolve get
// the pool that forked it (pool installed globally, or under its other name).
const POOL_ENTRY = path.join(__dirname, '..', '..', 'index.js')
const resolve = Module._resolveFilename
Module._resolveFilename = function resolvePool (request, ...rest) {
  try {
    return resolve.call(this, request, ...rest)
  } catch (err) {
    if (isPoolName(request)) return POOL_ENTRY
    throw err
  }
}

// package.json is read only on a failed resolve, not in every worker's heap.
function isPoolName (request) {
  return request === 'pool' || request === require('../../package.json').name
}

// The runtime removes POOL_APP: a process the app forks with process.argv[1] (this file) is told so.
if (process.env.POOL_APP) {
  const runtime = new WorkerRuntime()
  runtime.boot(process.env.POOL_APP).catch((err) => runtime.failBoot(err))
} else {
  process.stderr.write(`pool: ${__filename} is the pool's worker, which only \`pool start\` runs: under pool, ` +
    'process.argv[1] is this file, not the app, and a pool worker starts no copy of itself\n')
  process.exitCode = 1
}
