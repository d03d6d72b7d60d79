'use strict'

// One small object per slot: which process holds the slot now, its explicit state, its
// deadlines and its counters. The supervisor changes a handle only through `transition`, so
// there is one place where a state changes and one event per change.
//
//   booting ──ready──► ready ⇄ busy ──drain──► draining ──exit──► dead ──respawn──► booting
//      │                 │                                          ▲
//      └──── exit ───────┴──────────── (crash, hung kill) ──────────┘
//   dead ──(too many boot failures in a row)──► given-up

const STATES = Object.freeze(['booting', 'ready', 'busy', 'draining', 'dead', 'given-up'])

class WorkerHandle {
  constructor ({ slot, host, port }) {
    this.slot = slot
    this.name = `worker${slot}`
    this.host = host
    this.port = port
    this.state = 'dead'
    this.child = null
    this.pid = null
    this.generation = 0 // processes started in this slot
    this.spawnedAt = null
    this.readyAt = null
    this.lastSeen = null
    this.request = null // { method, url, startedAt } while a request runs
    this.requests = 0 // served by the current process
    this.totalRequests = 0 // served in this slot, all processes
    this.queued = 0 // requests that reached the worker while it was busy
    this.restarts = 0 // processes started in this slot after the first
    this.crashes = 0 // consecutive unplanned exits: drives the respawn backoff
    this.bootFailures = 0 // consecutive deaths before ready: drives the crash-loop breaker
    this.respawnAt = 0
    this.rss = null
    this.lastError = null // the app's own error from the last failed boot
    this.lastExit = null // { code, signal, reason, at }
    this.killReason = null // why the supervisor killed the current process, if it did
    this.drain = null // { reason, termAt, killAt, released, stopSent, termSent, killSent }
    this.goneAnnounced = false
    this.requestLimit = Infinity // --max-requests plus this process's jitter
    this.recycleDue = null // 'max-requests' | 'max-rss' once the process should be replaced
  }

  get alive () { return this.child !== null }
  get ready () { return this.state === 'ready' || this.state === 'busy' }

  transition (to) {
    if (!STATES.includes(to)) throw new Error(`unknown worker state ${to}`)
    const from = this.state
    this.state = to
    return from
  }

  // Attach a freshly forked process to this slot.
  attach (child, now) {
    if (this.generation > 0) this.restarts++
    this.generation++
    this.child = child
    this.pid = child.pid
    this.spawnedAt = now
    this.readyAt = null
    this.lastSeen = now
    this.request = null
    this.requests = 0
    this.rss = null
    this.killReason = null
    this.drain = null
    this.goneAnnounced = false
    this.recycleDue = null
    this.lastError = null // errors of earlier processes explain nothing about this one
    this.transition('booting')
  }

  detach () {
    this.previousChild = this.child // its last IPC message may still be on the way
    this.child = null
  }

  signal (sig) {
    if (!this.child) return false
    try { return this.child.kill(sig) } catch { return false }
  }

  send (message) {
    if (!this.child || !this.child.connected) return false
    try { this.child.send(message); return true } catch { return false }
  }

  // What fronts, events, `pool status` and metrics see: plain data, no process object.
  snapshot (now = Date.now()) {
    return {
      slot: this.slot,
      name: this.name,
      pid: this.pid,
      host: this.host,
      port: this.port,
      state: this.state,
      startedAt: this.spawnedAt,
      readyAt: this.readyAt,
      uptime: this.readyAt ? now - this.readyAt : 0,
      requests: this.requests,
      totalRequests: this.totalRequests,
      queued: this.queued,
      restarts: this.restarts,
      rss: this.rss,
      request: this.request ? { ...this.request, age: now - this.request.startedAt } : null,
      lastExit: this.lastExit
    }
  }
}

module.exports = { WorkerHandle, STATES }
