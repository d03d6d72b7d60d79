'use strict'

// A rolling reload, advanced one step per supervisor tick.
//
// 1. Canary: one process of the new code boots on an ephemeral port, outside every slot and
//    front. If it cannot become ready, the reload stops here and every old worker keeps
//    serving: a deploy of broken code costs no capacity at all.
// 2. Rolling: `reloadBatch` slots at a time go through the ordinary drain path (out of
//    rotation, running request finishes, process stops), the slot respawns with the new code on
//    the same port, and only when it is ready does the next slot start draining. Capacity never
//    drops below workers − batch.
// If a slot's new process still fails to boot (a flaky dependency, say), the reload stops there
// with the app's error; that slot goes on under the ordinary crash backoff.

const { WorkerHandle } = require('./worker-handle')
const { poolError, codes, EXIT } = require('./errors')

class RollingReload {
  constructor (pool, now) {
    this.pool = pool
    this.startedAt = now
    this.stage = 'canary'
    this.canary = null
    this.pending = [...pool.handles.keys()].filter((slot) => slot <= pool.target).sort((a, b) => a - b)
    this.active = new Map() // slot → { pid, generation } of the process being replaced
    this.replaced = []
    this.done = new Promise((resolve, reject) => { this.resolve = resolve; this.reject = reject })
  }

  // Events of the canary process come here instead of the slot handlers (the pool has already
  // detached it on exit).
  onCanaryEvent (event, now) {
    const c = this.canary
    if (event.type === 'exit') { c.lastExit = { code: event.code, signal: event.signal, at: now }; return }
    const m = event.message
    if (m?.type === 'ready') c.readyAt = now
    if (m?.type === 'boot-error') c.lastError = m.error
  }

  advance (now) {
    if (this.stage === 'canary') return this.advanceCanary(now)
    if (this.stage === 'rolling') return this.advanceRolling(now)
  }

  advanceCanary (now) {
    const pool = this.pool
    if (!this.canary) {
      this.canary = new WorkerHandle({ slot: 0, host: pool.options.workerHost, port: 0 })
      this.canary.isCanary = true
      pool.spawn(this.canary, now)
      return
    }
    const c = this.canary
    if (c.readyAt !== null) {
      c.signal('SIGKILL') // it served its purpose: the new code boots
      pool.logger.info({ event: 'reload-canary-ready', pid: c.pid, bootMs: c.readyAt - c.spawnedAt }, 'new code boots; replacing workers one batch at a time')
      this.stage = 'rolling'
      // The new code boots: slots given up on the old code get another chance with it.
      for (const h of pool.handles.values()) if (h.state === 'given-up' && h.slot <= pool.target) pool.revive(h, now)
      return this.advanceRolling(now)
    }
    if (!c.alive) return this.abort(c.lastError || { message: `the new code exited before becoming ready (${describeExit(c.lastExit)})` })
    if (now - c.spawnedAt > pool.options.bootTimeout) {
      c.signal('SIGKILL')
      return this.abort({ message: `the new code was not ready within ${pool.options.bootTimeout} ms (boot timeout)` })
    }
  }

  advanceRolling (now) {
    const pool = this.pool
    for (const [slot, old] of this.active) {
      const h = pool.handles.get(slot)
      if (!h || slot > pool.target) { this.active.delete(slot); continue }
      if (h.generation === old.generation) continue // the old process is still draining
      if (h.ready) {
        this.active.delete(slot)
        this.replaced.push({ slot, oldPid: old.pid, newPid: h.pid })
        pool.logger.info({ event: 'reloaded-slot', slot, oldPid: old.pid, pid: h.pid, port: h.port }, `slot ${slot} reloaded: pid ${old.pid} → ${h.pid}`)
      } else if (h.bootFailures > 0 || h.state === 'given-up') {
        return this.abort(h.lastError || { message: `slot ${slot}'s new worker exited before becoming ready` })
      }
    }
    while (this.pending.length > 0 && pool.unavailableCount() < pool.options.reloadBatch) {
      const slot = this.pending.shift()
      const h = pool.handles.get(slot)
      // A dead or booting slot will come up with the new code by itself.
      if (!h || !h.ready || slot > pool.target) continue
      this.active.set(slot, { pid: h.pid, generation: h.generation })
      pool.beginDrain(h, { reason: 'reload' })
    }
    if (this.pending.length === 0 && this.active.size === 0) this.finish(now)
  }

  finish (now) {
    this.stage = 'done'
    const ms = now - this.startedAt
    this.pool.logger.info({ event: 'reloaded', workers: this.replaced.length, ms }, `reload done: ${this.replaced.length} workers replaced in ${ms} ms`)
    this.resolve({ replaced: this.replaced, ms })
  }

  abort (appError, code = codes.RELOAD_FAILED) {
    if (this.stage === 'done' || this.stage === 'aborted') return
    this.stage = 'aborted'
    if (this.canary?.alive) this.canary.signal('SIGKILL')
    const message = code === codes.RELOAD_FAILED
      ? `reload aborted: the new code failed to boot: ${appError.message}`
      : appError.message
    this.pool.logger.error({ event: 'reload-failed', error: appError.message, stack: appError.stack, replaced: this.replaced.length }, message)
    this.reject(poolError(code, message, { exitCode: EXIT.FAILURE, details: { appError, replaced: this.replaced } }))
  }

  get finished () { return this.stage === 'done' || this.stage === 'aborted' }

  status () {
    return { stage: this.stage, pending: this.pending.length, active: [...this.active.keys()], replaced: this.replaced.length }
  }
}

function describeExit (exit) {
  if (!exit) return 'no exit status'
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`
}

module.exports = { RollingReload }
