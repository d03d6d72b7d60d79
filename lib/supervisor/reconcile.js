'use strict'

// The tick's last steps, in the manner of gunicorn's manage_workers: make the live workers match
// the wanted set. Slots above the target drain, then go; outdated or worn-out workers are
// replaced within the batch budget; a reload's canary is booted and judged; dead slots respawn
// when their handle says so, no more than --max-booting booting at once. It acts on the pool it
// is given (lib/supervisor/pool.js) and only from its tick: the supervisor still owns the handles,
// the fronts and the events. Each step is linear in the slots: a tick stays cheap at any size.

const { WorkerHandle } = require('./worker-handle')
const { Canary } = require('./canary')
const { watchChild } = require('./spawn')

class Reconciler {
  constructor (pool) {
    this.pool = pool
  }

  // Wanted slots not serving right now (draining, stopped, booting, waiting to respawn).
  // Replacements start only while this is below the batch size, which is what keeps capacity at
  // workers − batch or more.
  unavailableCount () {
    const pool = this.pool
    return pool.wanted().filter((h) => !h.ready && h.state !== 'given-up').length
  }

  reconcile (now) {
    const pool = this.pool
    if (!pool.life.is('starting', 'running')) return
    for (const h of pool.slots()) {
      if (h.slot <= pool.target) continue
      if (h.alive) pool.beginDrain(h, { reason: 'scale-down' })
      else this.removeSlot(h)
    }
    if (pool.life.is('running')) this.replaceOutdated()
    this.respawn(now)
  }

  // Slots due start a process, in slot order, while fewer than --max-booting are booting: a
  // scale to many, or a crash of many, forks a batch at a time, so that the supervisor's loop,
  // its signals and its control socket stay responsive and each boot gets its share of the CPU.
  respawn (now) {
    const pool = this.pool
    let booting = 0
    for (const h of pool.handles.values()) if (h.alive && (h.state === 'booting' || h.state === 'warming')) booting++
    let missing = 0
    for (let slot = 1; slot <= pool.target; slot++) {
      let h = pool.handles.get(slot)
      if (!h) {
        h = new WorkerHandle({ slot, host: pool.options.workerHost, port: pool.portOf(slot), policy: pool.options, signal: pool.system.signal, onState: (handle, from) => pool.emit('state', { ...handle.snapshot(), from }) })
        pool.handles.set(slot, h)
      }
      if (h.dueForRetry(now)) {
        h.revive(now)
        pool.report.retrying(h)
      }
      if (h.dueForRespawn(now) && booting < pool.options.maxBooting) {
        this.spawn(h, now)
        if (h.alive) booting++
      }
      if (!h.alive) missing++
    }
    // What the descriptor reserve keeps for the processes still to come (lib/net/descriptors.js).
    pool.slotsWithoutProcess = missing
  }

  // Reload and recycling are one step: a ready worker of an older code generation (while a
  // reload rolls), past --max-requests / --max-rss, or asked for (`pool recycle`) is drained,
  // never mid-request (the drain lets its request finish; waiting for an idle moment would never
  // come under load), and no more at once than --reload-batch. Its slot respawns at once, with
  // the code now on disk.
  replaceOutdated () {
    const pool = this.pool
    const rolling = pool.reloading?.rolling ? pool.reloading.generation : null
    let unavailable = this.unavailableCount() // counted once, then kept up to date: one pass
    for (const h of pool.wanted()) {
      const outdated = rolling !== null && h.codeGeneration < rolling
      const reason = outdated ? 'reload' : h.recycleDue
      if (!reason || h.drain || !h.ready) continue
      if (unavailable >= pool.options.reloadBatch) return
      if (outdated) pool.reloading.draining(h)
      else pool.report.recycling(h, reason)
      pool.beginDrain(h, { reason })
      unavailable++
    }
  }

  // The reload's canary, then its outcome; the replacing itself is replaceOutdated's.
  advanceReload (now) {
    const pool = this.pool
    const r = pool.reloading
    if (!r || r.finished || !pool.life.is('running')) return
    if (r.stage === 'canary') {
      if (!r.canary) return this.spawnCanary(r, now)
      const verdict = r.canary.check(now)
      if (verdict === 'booting') return
      r.canary.kill() // ready or failed, it served its purpose
      if (verdict !== 'ready') return r.abort(verdict.failed)
      r.roll(++pool.codeGeneration, r.canary)
      // The new code boots: slots given up on the old code get another chance with it.
      for (const h of pool.wanted()) {
        if (h.state !== 'given-up') continue
        h.revive(now)
        pool.report.revived(h)
      }
    }
    if (pool.wanted().every((h) => h.codeGeneration >= r.generation && h.ready)) r.finish(now)
  }

  removeSlot (h) {
    const pool = this.pool
    pool.handles.delete(h.slot)
    pool.report.removed(h)
  }

  spawn (h, now) {
    const pool = this.pool
    let child
    try {
      child = this.fork({ slot: h.slot, host: h.host, port: h.port }, { handle: h, who: `worker ${h.slot}` })
    } catch (err) {
      // fork() throws for some spawn errors (ENOMEM): the slot tries again, the supervisor lives.
      return pool.onSpawnError(h, err, now)
    }
    h.attach(child, now, { codeGeneration: pool.codeGeneration })
    // Without a pid the fork failed; why comes as the child's 'error' (a 'spawn-error' event).
    if (child.pid !== undefined) pool.report.spawned(h, now)
  }

  spawnCanary (reload, now) {
    const pool = this.pool
    const canary = new Canary({ now, bootTimeout: pool.options.bootTimeout, signal: pool.system.signal })
    let child
    try {
      child = canary.child = this.fork({ slot: 0, host: pool.options.workerHost, port: 0 }, { canary, who: 'the reload canary' })
    } catch (err) {
      return reload.abort({ message: `cannot start a process of the new code: ${err.message}` })
    }
    reload.canary = canary
    pool.canaries.add(canary)
    pool.logger.info({ event: 'reload-canary', pid: child.pid }, 'booting the new code once before touching any slot')
  }

  // A new process for a slot or a canary, its events routed to the loop (worker-process.js).
  // Throws what fork() throws.
  fork ({ slot, host, port }, about) {
    const pool = this.pool
    const child = pool.system.fork({ options: pool.options, logger: pool.logger, app: pool.app, workers: pool.target, slot, host, port })
    watchChild(child, { ...about, slot, captureRemnant: pool.system.captureRemnant, enqueue: (event) => pool.enqueue(event) })
    return child
  }
}

module.exports = { Reconciler }
