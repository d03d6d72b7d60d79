'use strict'

// What the supervisor tells a worker it forks, in the worker's environment.

const { CHANNEL_ENV } = require('../protocol/channel')

// The pool's variables that only the runtime reads, all read by the time it installs: removed
// from the environment then, so that no process the app starts inherits them. A child told
// POOL_CHANNEL_FD would take its own fd 3, whatever that is there (Node's cluster channel, in a
// cluster worker), for the pool channel. PORT, POOL_WORKER_ID and POOL_WORKERS are the app's.
// POOL_SUPERVISOR stays: the app's processes inherit it, which is how a later pool finds what
// this one left running.
const RUNTIME_ENV = [
  CHANNEL_ENV, 'POOL_APP', 'POOL_WORKER_HOST', 'POOL_LOG_LEVEL', 'POOL_HEARTBEAT_INTERVAL', 'POOL_CHECK_IN_INTERVAL',
  'POOL_KILL_TIMEOUT', 'POOL_WORKER_CONCURRENCY', 'POOL_REQUEST_LIMITS'
]

function readEnvironment (env = process.env) {
  return {
    slot: Number(env.POOL_WORKER_ID),
    workers: Number(env.POOL_WORKERS),
    port: Number(env.PORT),
    host: env.POOL_WORKER_HOST || '127.0.0.1',
    // How often it checks in: idle, and while it holds requests (link.js).
    heartbeatInterval: Number(env.POOL_HEARTBEAT_INTERVAL) || 1000,
    activeInterval: Number(env.POOL_CHECK_IN_INTERVAL) || 500,
    // Who forked this worker ("pid:start time"), and how long the app's processes get between
    // SIGTERM and SIGKILL (the pool's --kill-timeout).
    supervisorPid: Number(String(env.POOL_SUPERVISOR || '').split(':')[0]) || null,
    killTimeout: Number(env.POOL_KILL_TIMEOUT) || 5000,
    logLevel: env.POOL_LOG_LEVEL || 'info',
    // The limits the worker itself puts on each response, where no front of the pool's relays it
    // (limits.js): { read, total } in ms, 0 for none.
    requestLimits: parseLimits(env.POOL_REQUEST_LIMITS),
    // Requests the guard runs at once (--worker-concurrency); above 1 the worker says when every
    // request it holds awaits I/O.
    concurrency: Math.max(1, Math.floor(Number(env.POOL_WORKER_CONCURRENCY)) || 1)
  }
}

function parseLimits (text = '') {
  const [read, total] = String(text).split(',').map((n) => Math.max(0, Number(n) || 0))
  return { read: read ?? 0, total: total ?? 0 }
}

function forgetRuntimeVariables (env = process.env) {
  for (const name of RUNTIME_ENV) delete env[name]
}

module.exports = { readEnvironment, forgetRuntimeVariables }
