'use strict'

// The tick's last step (gunicorn's manage_workers): match the live workers to the wanted set. Slots above
// the target drain, then go; outdated or worn-out workers are replaced within the batch budget; dead slots
// respawn, at most --max-booting booting at once. Linear in the slots. It decides; the pool acts via `view`:
//   handles (Map slot → WorkerHandle, read only), wanted() (handles of slots 1..target), target, rollingOut
//   (generation being rolled out, or null), reloadBatch, maxBooting, addSlot(slot) → dead handle due to spawn,
//   removeSlot(handle), spawn(handle, now), drain(handle, reason), replace(handle, reason), retry(handle, now).

class Reconciler {
  constructor (view) {
    this.view = view
  }

  // Wanted slots not serving now; replacements start only below the batch size (capacity ≥ workers − batch).
  unavailableCount () {
    return this.view.wanted().filter((handle) => !handle.ready && handle.state !== 'given-up').length
  }

  // → how many wanted slots have no process (the descriptor reserve's count). `replace`: false while starting.
  reconcile (now, { replace }) {
    const view = this.view
    for (const handle of [...view.handles.values()].sort((a, b) => a.slot - b.slot)) {
      if (handle.slot <= view.target) continue
      if (handle.alive) view.drain(handle, 'scale-down')
      else view.removeSlot(handle)
    }
    if (replace) this.replaceOutdated()
    return this.respawn(now)
  }

  // Forks in batches of --max-booting so the loop, signals and control socket stay responsive.
  respawn (now) {
    const view = this.view
    let booting = 0
    for (const handle of view.handles.values()) {
      if (handle.alive && (handle.state === 'booting' || handle.state === 'warming')) booting++
    }
    let missing = 0
    for (let slot = 1; slot <= view.target; slot++) {
      const handle = view.handles.get(slot) ?? view.addSlot(slot)
      if (handle.dueForRetry(now)) view.retry(handle, now)
      if (handle.dueForRespawn(now) && booting < view.maxBooting) {
        view.spawn(handle, now)
        if (handle.alive) booting++
      }
      if (!handle.alive) missing++
    }
    return missing
  }

  // Reload and recycling are one step: a ready worker of an older generation, or recycleDue, is drained
  // (its request finishes; an idle moment may never come under load), at most --reload-batch at once.
  replaceOutdated () {
    const view = this.view
    const rolling = view.rollingOut
    let unavailable = this.unavailableCount() // counted once, then kept up to date: one pass
    for (const handle of view.wanted()) {
      const reason = rolling !== null && handle.codeGeneration < rolling ? 'reload' : handle.recycleDue
      if (!reason || handle.drain || !handle.ready) continue
      if (unavailable >= view.reloadBatch) return
      view.replace(handle, reason)
      unavailable++
    }
  }
}

module.exports = { Reconciler }
