'use strict'

// What the balancer counts per slot, across the worker processes that come and go in it
// (requests, failures, busy time), and the per-slot view that /status and /metrics show. What
// the pool knows of a slot (restarts, its process's state) is the pool's, in its own metrics
// and in /status beside this view.

class SlotStats {
  constructor ({ workers }) {
    this.workers = workers // the WorkerSet: the live record of a slot in rotation
    this.stats = new Map() // slot → counters
  }

  // The slot's counters, created at 0 (with its metric series) on its first appearance.
  of (slot, name) {
    let s = this.stats.get(slot)
    if (!s) {
      // Every slot's series exist from its first appearance, at 0, as Prometheus prefers
      // (metrics.js reads them at each scrape).
      s = { slot, name: name || `worker${slot}`, requests: 0, failures: 0, busyMs: 0 }
      this.stats.set(slot, s)
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
        state: record ? record.state() : 'dead', // not in rotation
        inFlight: record ? record.inFlight : 0,
        pid: record ? record.pid : undefined,
        port: record ? record.port : undefined,
        requests: s.requests,
        failures: s.failures,
        busySeconds: Math.round(s.busyMs) / 1000
      })
    }
    return views.sort((a, b) => a.slot - b.slot)
  }
}

module.exports = { SlotStats }
