'use strict'

// One rolling reload's bookkeeping; Pool#advanceReload decides. Stages (docs/decisions/0015):
//   canary   a Canary of the new code boots outside every slot; not ready: the reload fails, no slot touched.
//   rolling  the code generation goes up and the replace step drains older workers `reloadBatch` at a time.
//            Done when every wanted slot is ready on the new code; failed if one dies before ready.

const { poolError, codes } = require('../errors')

class Reload {
  constructor ({ now, logger }) {
    this.startedAt = now
    this.logger = logger
    this.stage = 'canary' // → rolling → done | aborted
    this.canary = null
    this.codeGeneration = null // the code generation it rolls out, once the canary was ready
    this.failure = null // once a worker of its code failed to boot
    this.oldPids = new Map() // slot → pid of the process drained for this reload
    this.replaced = [] // { slot, oldPid, newPid }
    this.done = new Promise((resolve, reject) => { this.resolve = resolve; this.reject = reject })
  }

  get finished () { return this.stage === 'done' || this.stage === 'aborted' }
  // Whether it has loaded the code on disk yet: its canary is forked on the tick after it is asked.
  get began () { return this.canary !== null || this.stage !== 'canary' }
  get rolling () { return this.stage === 'rolling' }

  canaryStarted (canary) { this.canary = canary }

  roll (codeGeneration) {
    const canary = this.canary
    this.stage = 'rolling'
    this.codeGeneration = codeGeneration
    this.logger.info({ event: 'reload-canary-ready', pid: canary.pid, bootMs: canary.readyAt - canary.spawnedAt },
      'new code boots; replacing workers one batch at a time')
  }

  draining (handle) { this.oldPids.set(handle.slot, handle.pid) }

  // A worker of the new code is ready: if this reload drained its slot, it is replaced.
  slotReady (handle) {
    const oldPid = this.oldPids.get(handle.slot)
    if (oldPid === undefined || handle.codeGeneration !== this.codeGeneration) return
    this.oldPids.delete(handle.slot)
    this.replaced.push({ slot: handle.slot, oldPid, newPid: handle.pid })
    this.logger.info({ event: 'reloaded-slot', slot: handle.slot, oldPid, pid: handle.pid, port: handle.port },
      `slot ${handle.slot} reloaded: pid ${oldPid} → ${handle.pid}`)
  }

  // The first worker of the new code to die before ready fails the reload.
  workerFailedBoot (handle) {
    if (!this.rolling || handle.codeGeneration !== this.codeGeneration || this.failure) return
    this.failure = handle.lastError || { message: `slot ${handle.slot}'s new worker exited before becoming ready` }
  }

  finish (now) {
    if (this.finished) return
    this.stage = 'done'
    const ms = now - this.startedAt
    this.logger.info({ event: 'reloaded', workers: this.replaced.length, ms },
      `reload done: ${this.replaced.length} worker${this.replaced.length === 1 ? '' : 's'} replaced in ${ms} ms`)
    this.resolve({ replaced: this.replaced, ms })
  }

  abort (appError, code = codes.RELOAD_FAILED) {
    if (this.finished) return
    this.stage = 'aborted'
    const message = code === codes.RELOAD_FAILED
      ? `reload aborted: the new code failed to boot: ${appError.message}`
      : appError.message
    this.logger.error({ event: 'reload-failed', err: appError, replaced: this.replaced.length }, message)
    this.reject(poolError(code, message, { details: { appError, replaced: this.replaced } }))
  }

  // pending: workers of an older code generation not yet draining.
  status ({ pending }) {
    return { stage: this.stage, pending, active: [...this.oldPids.keys()], replaced: this.replaced.length }
  }
}

module.exports = { Reload }
