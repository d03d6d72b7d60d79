'use strict'

// One small object per slot: which process holds the slot now, its explicit state, its
// deadlines and its counters. A state changes only through `transition`, which reports each
// change to `onState` exactly once (the pool turns it into its 'state' event): `state` itself is
// read-only.
//
//   booting ──ready──► ready ⇄ busy ──drain──► draining ──exit──► dead ──respawn──► booting
//      │                 │                                          ▲
//      └──── exit ───────┴──────────── (crash, hung kill) ──────────┘
//   dead ──(too many boot failures in a row)──► given-up

const { signalWorker } = require('./process-group')

const STATES = Object.freeze(['booting', 'ready', 'busy', 'draining', 'dead', 'given-up'])

class WorkerHandle {
  #state = 'dead'
  #onState

  constructor ({ slot, host, port, onState = () => {} }) {
    this.slot = slot
    this.name = `worker${slot}`
    this.host = host
    this.port = port
    this.#onState = onState
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

  get state () { return this.#state }
  get alive () { return this.child !== null }
  get ready () { return this.#state === 'ready' || this.#state === 'busy' }

  transition (to) {
    if (!STATES.includes(to)) throw new Error(`unknown worker state ${to}`)
    const from = this.#state
    if (from === to) return
    this.#state = to
    this.#onState(this, from)
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
    if (!this.child) return
    this.previousChild = this.child // its last IPC message may still be on the way
    this.child = null
  }

  // The worker and the processes the app started in its group (lib/process-group.js).
  signal (sig) {
    return this.child !== null && signalWorker(this.child, sig)
  }

  // Take the process out of service: it stops at `timeout`'s end at the latest, SIGTERM then,
  // SIGKILL `killTimeout` later. Draining again (a stop during a reload's drain) only brings
  // those deadlines closer. Returns whether this began a drain.
  startDrain (reason, now, { timeout, killTimeout }) {
    const termAt = now + timeout
    if (this.drain) {
      this.drain.termAt = Math.min(this.drain.termAt, termAt)
      this.drain.killAt = Math.min(this.drain.killAt, this.drain.termAt + killTimeout)
      return false
    }
    this.drain = { reason, termAt, killAt: termAt + killTimeout, released: false, stopSent: false, termSent: false, killSent: false }
    return true
  }

  // Why the current process ended. A drained process may end with code 0, or, once the pool has
  // sent it SIGTERM, by that signal or with any code its SIGTERM handler chose: the drain's own
  // end. Any other end is a crash (or a failed boot), drain or not.
  exitReason (code, signal) {
    if (this.killReason) return { reason: this.killReason, planned: false }
    const d = this.drain
    const answered = d && (d.termSent ? signal === null || signal === 'SIGTERM' : code === 0 && signal === null)
    if (answered) return { reason: d.reason, planned: true }
    return { reason: this.readyAt !== null ? 'crashed' : 'boot-failed', planned: false }
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
