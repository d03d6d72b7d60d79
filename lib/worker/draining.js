'use strict'

// `require('pool').draining`: an AbortSignal that aborts once this process is to leave (reason: a
// PoolError WORKER_DRAINING, `details.reason` why), for the app to close its WebSockets itself.
// Under a pool: at STOP (the drain's reason) or with the supervisor gone. Outside one: at the
// first SIGTERM or SIGINT, listened for once `draining` is read; without a listener of the app's,
// the process still ends by it, RERAISE_WAIT ms later (at once on a second), its frames out.

const { appListens, reraise } = require('./signals')

const errors = () => require('../errors') // loaded once it aborts
// One state per process, whichever copy of the pool the app requires.
const KEY = Symbol.for('pool.worker.draining')
const SIGNALS = ['SIGTERM', 'SIGINT']
const RERAISE_WAIT = 100

function state () {
  globalThis[KEY] ??= { controller: new AbortController(), underPool: false, listeners: null, reraise: null }
  return globalThis[KEY]
}

function drainingSignal () {
  const s = state()
  if (!s.underPool) listenForSignals(s)
  return s.controller.signal
}

// A pool's worker: its supervisor says when it drains, not signals.
function underPool () {
  const s = state()
  s.underPool = true
  stopListening(s)
}

function drain (reason, message) {
  const { controller } = state()
  if (controller.signal.aborted) return
  const { PoolError, codes } = errors()
  controller.abort(new PoolError(codes.WORKER_DRAINING, message, { details: { reason } }))
}

function listenForSignals (s) {
  if (s.listeners) return
  s.listeners = new Map(SIGNALS.map((name) => [name, () => onSignal(s, name)]))
  for (const [name, listener] of s.listeners) process.on(name, listener)
}

function onSignal (s, name) {
  drain(name, `the process received ${name}`)
  if (appListens(name)) return // the app's listener decides
  if (s.reraise) return end(s, name)
  s.reraise = setTimeout(() => end(s, name), RERAISE_WAIT)
}

function end (s, name) {
  stopListening(s)
  reraise(name)
}

function stopListening (s) {
  clearTimeout(s.reraise)
  s.reraise = null
  for (const [name, listener] of s.listeners ?? []) process.off(name, listener)
  s.listeners = null
}

module.exports = { drainingSignal, underPool, drain, RERAISE_WAIT }
