'use strict'

// The tick's last step, in the manner of gunicorn's manage_workers: make the live workers match
// the wanted set. Slots above the target drain, then go; outdated or worn-out workers are
// replaced within the batch budget; dead slots respawn when their handle says so, no more than
// --max-booting booting at once. Each step is linear in the slots: a tick stays cheap at any size.
//
// It decides; the pool acts. Its whole view of the pool is `view`:
//
//   handles                 Map slot → WorkerHandle, read only here (slots come and go by the actions)
//   wanted()                the handles of slots 1..target, in slot order
//   target                  how many slots are wanted
//   rollingOut              the code generation a reload is rolling out, or null
//   reloadBatch             wanted slots that may be out of service at once for replacing
//   maxBooting              processes booting at once at most
//   addSlot(slot)           → a new handle for `slot`, dead, due to spawn now
//   removeSlot(handle)      the slot (above the target, its process gone) is no more
//   spawn(handle, now)      fork a process for the slot (or record why the fork failed)
//   drain(handle, reason)   take the worker out of service: the one drain path
//   replace(handle, reason) drain it to replace it: 'reload', or a recycling reason (handle.recycleDue)
//   retry(handle, now)      a given-up slot starts over (--given-up-retry has passed)
//
// Only the tick calls it, and only while the pool starts or runs.

class Reconciler {
  constructor (view) {
    this.view = view
  }

  // Wanted slots not serving right now (draining, stopped, booting, waiting to respawn).
  // Replacements start only while this is below the batch size, which is what keeps capacity at
  // workers − batch or more.
  unavailableCount () {
    return this.view.wanted().filter((handle) => !handle.ready && handle.state !== 'given-up').length
  }

  // Returns how many wanted slots have no process now (what the descriptor reserve keeps
  // descriptors for). `replace`: whether workers may be replaced (not
  // while the pool starts).
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

  // Slots due start a process, in slot order, while fewer than --max-booting are booting: a
  // scale to many, or a crash of many, forks a batch at a time, so that the supervisor's loop,
  // its signals and its control socket stay responsive and each boot gets its share of the CPU.
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

  // Reload and recycling are one step: a ready worker of an older code generation (while a
  // reload rolls), past --max-requests / --max-rss, or asked for (`pool recycle`) is drained,
  // never mid-request (the drain lets its request finish; waiting for an idle moment would never
  // come under load), and no more at once than --reload-batch. Its slot respawns at once, with
  // the code now on disk.
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
