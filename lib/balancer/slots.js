'use strict'

// What the balancer counts per slot, across the worker processes that come and go in it
// (requests, failures, restarts, busy time), and the per-slot view that /status and /metrics
// show. Restarts and the pool's own failures (hung, failed boots, given-up slots) come from the
// pool's events.

// Pool events that count as failures in pool_failures_total.
const POOL_FAILURE_EVENTS = { hung: 'worker_hung', 'boot-failed': 'worker_boot_failed', 'give-up': 'worker_gave_up' }

class SlotStats {
  constructor ({ metrics, workers }) {
    this.metrics = metrics
    this.workers = workers // the WorkerSet: the live record of a slot in rotation
    this.stats = new Map() // slot → counters
    this.poolListeners = []
  }

  // The slot's counters, created at 0 (with its metric series) on its first appearance.
  of (slot, name) {
    let s = this.stats.get(slot)
    if (!s) {
      s = { slot, name: name || `worker${slot}`, requests: 0, failures: 0, restarts: 0, busyMs: 0, spawned: false }
      this.stats.set(slot, s)
      // Every slot's series exist from its first appearance, at 0, as Prometheus prefers.
      this.metrics.restarts.inc({ worker: s.name }, 0)
      this.metrics.workerRequestsFor(s.name).inc(0)
    }
    return s
  }

  // One entry per slot ever seen, in slot order, with the live record's state if in rotation.
  views () {
    const views = []
    for (const s of this.stats.values()) {
      const record = this.workers.get(s.slot)
      views.push({
        slot: s.slot,
        name: s.name,
        state: record ? record.state() : 'down',
        inFlight: record ? record.inFlight : 0,
        pid: record ? record.pid : undefined,
        port: record ? record.port : undefined,
        requests: s.requests,
        failures: s.failures,
        restarts: s.restarts,
        busySeconds: Math.round(s.busyMs) / 1000
      })
    }
    return views.sort((a, b) => a.slot - b.slot)
  }

  follow (pool) {
    if (!pool || typeof pool.on !== 'function') return
    const on = (event, fn) => {
      pool.on(event, fn)
      this.poolListeners.push([pool, event, fn])
    }
    on('spawn', (w) => {
      const s = this.of(w.slot, w.name)
      if (s.spawned) {
        s.restarts++
        this.metrics.restarts.inc({ worker: s.name })
      }
      s.spawned = true
    })
    for (const [event, reason] of Object.entries(POOL_FAILURE_EVENTS)) {
      on(event, () => this.metrics.failures.inc({ reason }))
    }
  }

  unfollow () {
    for (const [pool, event, fn] of this.poolListeners.splice(0)) pool.removeListener(event, fn)
  }
}

module.exports = { SlotStats }
