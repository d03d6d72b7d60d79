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
const POOL_NAMES = new Set(['pool', require('../../package.json').name])
const resolve = Module._resolveFilename
Module._resolveFilename = function resolvePool (request, ...rest) {
  try {
    return resolve.call(this, request, ...rest)
  } catch (err) {
    if (POOL_NAMES.has(request)) return POOL_ENTRY
    throw err
  }
}

// A boot that throws (the app's load, or an export that can never serve) is a failed boot the
// supervisor hears about at once.
const runtime = new WorkerRuntime()
runtime.boot(process.env.POOL_APP).catch((err) => runtime.failBoot(err))
