'use strict'

// The file the supervisor forks. It is not the app: it loads the app through the runtime so
// that all three app forms (a listener, a server, or a file calling listen()) behave alike.
const Module = require('node:module')
const path = require('node:path')
const { WorkerRuntime } = require('./runtime')

// An app run by a pool can always `require('pool')`: when its own node_modules has no copy
// (pool installed globally, or the app outside the project), it gets the pool that forked it.
const POOL_ENTRY = path.join(__dirname, '..', '..', 'index.js')
const resolve = Module._resolveFilename
Module._resolveFilename = function resolvePool (request, ...rest) {
  try {
    return resolve.call(this, request, ...rest)
  } catch (err) {
    if (request === 'pool') return POOL_ENTRY
    throw err
  }
}

// A boot that throws (the app's load, or an export that can never serve) is a failed boot the
// supervisor hears about at once.
const runtime = new WorkerRuntime()
runtime.boot(process.env.POOL_APP).catch((err) => runtime.failBoot(err))
