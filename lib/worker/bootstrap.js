'use strict'

// The file the supervisor forks. It is not the app: it loads the app through the runtime so
// that all three app forms (a listener, a server, or a file calling listen()) behave alike.
const Module = require('node:module')
const path = require('node:path')
const { WorkerRuntime } = require('./runtime')

// An app run by a pool can always `require('pool')`, and `require('pool-supervisor')`, the
// package's name on npm (`pool` on npm is another package; installed with an npm alias,
// `npm i pool@npm:pool-supervisor`, it is this one under that name): when the app's own
// node_modules has neither (pool installed globally, the app outside the project, the package
// installed under its other name), it gets the pool that forked it.
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

// package.json is read only here, on a failed resolve: parsed at start, it would cost every
// worker's heap for a name most apps never require.
function isPoolName (request) {
  return request === 'pool' || request === require('../../package.json').name
}

// A boot that throws (the app's load, or an export that can never serve) is a failed boot the
// supervisor hears about at once.
// The runtime removes POOL_APP from the environment: a process the app forks with its own
// process.argv[1] (this file, not the app) has none, and is told so rather than left waiting.
if (process.env.POOL_APP) {
  const runtime = new WorkerRuntime()
  runtime.boot(process.env.POOL_APP).catch((err) => runtime.failBoot(err))
} else {
  process.stderr.write(`pool: ${__filename} is the pool's worker, which only \`pool start\` runs: under pool, ` +
    'process.argv[1] is this file, not the app, and a pool worker starts no copy of itself\n')
  process.exitCode = 1
}
