'use strict'

// A listener of the pool's for a signal lets the process still end by it, unless the app listens
// too. signal-exit's listeners (v3, v4) are not the app's: alone once ours is gone, they re-raise.

function signalExitListeners () {
  const v4 = globalThis[Symbol.for('signal-exit emitter')]?.count
  const v3 = process.__signal_exit_emitter__?.count
  return (Number.isSafeInteger(v4) ? v4 : 0) + (Number.isSafeInteger(v3) ? v3 : 0)
}

function appListens (name, ours = 1) {
  return process.listenerCount(name) - ours - signalExitListeners() > 0
}

// Ends the process by `name` as if `listener` (the pool's, if still on) had never been there.
function reraise (name, listener = null) {
  if (listener) process.off(name, listener)
  if (!appListens(name, 0)) process.kill(process.pid, name)
}

module.exports = { appListens, reraise }
