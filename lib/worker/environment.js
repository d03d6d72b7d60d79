'use strict'

// What the supervisor tells a worker it forks, in the worker's environment.

const { CHANNEL_ENV } = require('../protocol/channel')

// Removed once read, so the app's children do not inherit them (one told POOL_CHANNEL_FD would take its
// own fd 3 for the channel). POOL_SUPERVISOR stays: it is how a later pool finds what this one left running.
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
    heartbeatInterval: Number(env.POOL_HEARTBEAT_INTERVAL) || 1000,
    activeInterval: Number(env.POOL_CHECK_IN_INTERVAL) || 500,
    // POOL_SUPERVISOR is "pid:start time".
    supervisorPid: Number(String(env.POOL_SUPERVISOR || '').split(':')[0]) || null,
    killTimeout: Number(env.POOL_KILL_TIMEOUT) || 5000,
    logLevel: env.POOL_LOG_LEVEL || 'info',
    // limits.js: { read, total } in ms, 0 for none.
    requestLimits: parseLimits(env.POOL_REQUEST_LIMITS),
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
