'use strict'

// One object per slot: its process, state and deadlines, and the policy of a worker's life (each state's
// deadline, the drain's STOP → SIGTERM → SIGKILL, what an exit was, when the slot may start again). The pool
// tells it what happened (attach, heard, checkedIn, released, retired, exited…), never writes its fields, asks
// `due`, and records what it did (kill, terminate, askToStop). Each state change is told to `onState` once:
//   dead → booting (forked) → [warming (--warmup) →] ready ⇄ busy (check-ins: requests held or none)
//   booting, warming, ready, busy → draining (stop, reload, scale-down, recycling, listener closed)
//   any live → dead (exited or fork failed; respawn at `respawnAt`); draining → dead also when retired
//   booting, warming → given-up (the last allowed boot failure) → dead (reload or --given-up-retry)

const { signalWorker } = require('./process-group')
const channel = require('../protocol/channel')

const TRANSITIONS = Object.freeze({
  dead: ['booting'],
  booting: ['warming', 'ready', 'draining', 'dead', 'given-up'],
  warming: ['ready', 'draining', 'dead', 'given-up'],
  ready: ['busy', 'draining', 'dead'],
  busy: ['ready', 'draining', 'dead'],
  draining: ['dead'], // exited, or retired
  'given-up': ['dead']
})

// Exit reasons: 'crashed', 'boot-failed', a kill reason ('timeout': loop stuck while active; 'heartbeat':
// silent while idle; 'boot-timeout', 'warmup-failed', 'channel-broken', 'pool-killed', '<drain>-killed'), or
// for a drained process that ended as asked, the drain's reason.

class WorkerHandle {
  #state = 'dead'
  #onState

  // policy: the pool's options. clock: { now() monotonic ms, wall(at) → epoch ms }, for snapshots.
  constructor ({ slot, host, port, policy, onState = () => {}, signal = signalWorker, clock = MONOTONIC }) {
    this.slot = slot
    this.name = `worker${slot}`
    this.host = host
    this.port = port
    this.policy = policy
    this.#onState = onState
    this.signalChild = signal
    this.clock = clock
    this.child = null
    this.pid = null
    this.incarnation = 0 // which process of this slot the current one is: 1 for the first (restarts: the others)
    this.codeGeneration = 0 // the pool's code generation this process runs: the code on disk when it was forked
    this.spawnedAt = null
    this.readyAt = null
    this.lastSeen = null // when it last said anything (the pool's monotonic clock)
    this.active = false // its last check-in: it checks in every --check-in interval, not heartbeat
    this.open = 0 // requests it held at its last check-in
    this.tunnels = 0 // upgraded connections (WebSockets) open at its last check-in: never busy
    this.tunnelsOpened = 0 // by the current process, as of its last check-in
    this.request = null // of those, the one open longest: { method, url, startedAt }
    this.requests = 0 // answered by the current process, warm-up excluded, as of its last check-in
    this.warmups = 0 // warm-up requests it was sent: its own count includes them
    this.totalRequests = 0 // served in this slot, all processes
    this.queued = 0 // requests that reached the worker while it was busy
    this.crashes = 0 // consecutive unplanned exits: drives the respawn backoff
    this.bootFailures = 0 // consecutive deaths before ready: drives the crash-loop breaker
    this.spawnErrors = 0 // consecutive forks that failed (no process ran): never gives the slot up
    this.givenUpAt = null
    this.respawnAt = 0
    this.respawnDelay = 0 // the backoff of the last scheduled respawn
    this.rss = null
    this.lastError = null // the app's own error from the last failed boot
    this.lastExit = null // { code, signal, reason, at }
    this.killReason = null // why the supervisor killed the current process, if it did
    this.portInUse = false // the current process found its port taken (not the app's failure)
    this.drain = null // { reason, termAt, killAt, released, stopSent, termSent }
    this.goneAnnounced = false
    this.requestLimit = Infinity // --max-requests plus this process's jitter
    this.recycleDue = null // 'max-requests' | 'max-rss' | 'recycle' (asked) once the process should be replaced
  }

  get state () { return this.#state }
  get alive () { return this.child !== null }
  get ready () { return this.#state === 'ready' || this.#state === 'busy' }
  get restarts () { return Math.max(0, this.incarnation - 1) } // processes started in this slot after the first

  transition (to) {
    const from = this.#state
    if (from === to) return
    if (!TRANSITIONS[from].includes(to)) throw new Error(`worker ${this.slot}: no transition from ${from} to ${to}`)
    this.#state = to
    this.#onState(this, from)
  }

  // ── a process's life ─────────────────────────────────────────────────────────────────────

  // A failed fork hands back a child without a pid (spawnFailed follows): not counted.
  attach (child, now, { codeGeneration = 0 } = {}) {
    if (child.pid !== undefined) {
      this.incarnation++
      this.spawnErrors = 0
    }
    this.codeGeneration = codeGeneration
    this.child = child
    this.pid = child.pid
    this.spawnedAt = now
    this.readyAt = null
    this.lastSeen = now
    this.active = false
    this.open = 0
    this.tunnels = 0
    this.tunnelsOpened = 0
    this.request = null
    this.requests = 0
    this.warmups = 0
    this.rss = null
    this.killReason = null
    this.portInUse = false
    this.drain = null
    this.goneAnnounced = false
    this.recycleDue = null
    this.lastError = null // errors of earlier processes explain nothing about this one
    const { maxRequests, maxRequestsJitter } = this.policy
    this.requestLimit = maxRequests > 0 ? maxRequests + Math.floor(Math.random() * (maxRequestsJitter + 1)) : Infinity
    this.transition('booting')
  }

  // → true when this began the warm-up.
  beganWarmup () {
    if (this.#state !== 'booting') return false
    this.transition('warming')
    return true
  }

  // The worker's count of answers includes its warm-ups; --max-requests does not.
  warmedUp (count) {
    if (this.#state === 'warming') this.warmups = count
  }

  // → true when this made it ready (a late or repeated 'ready' does nothing).
  becameReady (now) {
    if (this.#state !== 'booting' && this.#state !== 'warming') return false
    this.readyAt = now
    this.bootFailures = 0
    this.transition('ready')
    return true
  }

  checkedIn ({ rss, open, tunnels = 0, tunnelsOpened = 0, answered, active, request }, now) {
    this.heard(now)
    this.active = active
    this.open = open
    this.tunnels = tunnels
    this.tunnelsOpened = tunnelsOpened
    this.request = request ? { method: request.method, url: request.url, startedAt: now - request.age } : null
    const requests = Math.max(0, answered - this.warmups)
    if (requests > this.requests && this.readyAt !== null) {
      this.totalRequests += requests - this.requests
      this.requests = requests
      if (this.requests >= this.requestLimit && this.recycleDue === null) this.recycleDue = 'max-requests'
    }
    this.measured(rss)
    if (this.#state === 'ready' && open > 0) this.transition('busy')
    else if (this.#state === 'busy' && open === 0) this.transition('ready')
  }

  // null: not measured.
  measured (rss) {
    if (rss === null || rss === undefined) return
    this.rss = rss
    const maxRss = this.policy.maxRss
    if (this.ready && this.recycleDue === null && maxRss > 0 && rss > maxRss * 1024 * 1024) this.recycleDue = 'max-rss'
  }

  // `pool recycle SLOT`.
  recycleWhenPossible (reason) {
    if (this.alive && !this.recycleDue) this.recycleDue = reason
  }

  heard (now) { this.lastSeen = now }

  requestQueued () { this.queued++ }

  // Every front let go of the draining worker: it may be asked to leave the port.
  released () { if (this.drain) this.drain.released = true }

  announcedGone () { this.goneAnnounced = true }

  // Why the boot failed: the app's own 'boot-error' wins over what the supervisor saw.
  reportedBootError (error) { this.lastError = error }
  warmupFailed (error) { this.lastError = { message: `warm-up failed: ${error.message}` } }
  brokeChannel (problem) {
    if (this.readyAt === null) this.lastError = this.lastError || { message: `broke the pool channel: ${problem}` }
  }

  // EADDRINUSE: not the app's failure.
  portTaken () { this.portInUse = true }

  bootTimedOut () {
    this.lastError = this.lastError || { message: `not ready within ${this.policy.bootTimeout} ms (boot timeout)` }
  }

  // What is overdue, or null; a question only (the tick acts, then calls kill, terminate or askToStop):
  //   { do: 'kill', reason, ms } boot-timeout, timeout, heartbeat, '<drain>-killed'
  //   { do: 'stop' } the fronts let go of the drained worker: ask it to leave; { do: 'term' } SIGTERM
  due (now) {
    if (!this.alive) return null
    if (this.killReason === null) {
      if (now >= this.bootEndsAt()) return { do: 'kill', reason: 'boot-timeout', ms: now - this.spawnedAt }
      if (now >= this.silenceEndsAt()) {
        return { do: 'kill', reason: this.active ? 'timeout' : 'heartbeat', ms: now - this.lastSeen }
      }
    }
    const d = this.drain
    if (!d || this.killReason !== null) return null // SIGKILLed: nothing left to escalate
    if (d.released && !d.stopSent) return { do: 'stop' }
    if (now >= d.killAt) return { do: 'kill', reason: `${d.reason}-killed` }
    if (now >= d.termAt && !d.termSent) return { do: 'term' }
    return null
  }

  // When `due`, dueForRespawn or dueForRetry next has an answer by time alone (Infinity: never); the tick
  // runs at the earliest of its handles'. Fronts letting go of a drain are no deadline.
  nextDeadline () {
    if (!this.alive) {
      if (this.#state === 'dead') return this.respawnAt
      const after = this.policy.givenUpRetry
      return this.#state === 'given-up' && after > 0 ? this.givenUpAt + after : Infinity
    }
    if (this.killReason !== null) return Infinity
    let at = Math.min(this.bootEndsAt(), this.silenceEndsAt())
    const d = this.drain
    if (d) at = Math.min(at, d.killAt, d.termSent ? Infinity : d.termAt)
    return at
  }

  // First whole ms past each limit. The boot timeout covers the warm-up, drained or not. Silence: active at
  // its last check-in, --timeout plus one check-in interval; idle, --heartbeat-timeout.
  bootEndsAt () {
    return this.#state === 'booting' || this.#state === 'warming'
      ? this.spawnedAt + this.policy.bootTimeout + 1
      : Infinity
  }

  silenceEndsAt () {
    if (this.readyAt === null) return Infinity
    const p = this.policy
    return this.lastSeen + 1 + (this.active ? p.timeout + checkInInterval(p) : p.heartbeatTimeout)
  }

  // Signals go to the worker's whole session (signalWorker).
  kill (reason) {
    if (!this.alive) return
    this.killReason = this.killReason || reason
    this.signal('SIGKILL')
  }

  terminate () {
    this.drain.termSent = true
    this.signal('SIGTERM')
  }

  signal (sig) { return this.child !== null && this.signalChild(this.child, sig) }

  askToStop (message) {
    this.drain.stopSent = true
    return this.send(message)
  }

  send (message) {
    return this.child !== null && channel.sendFrame(channel.supervisorEnd(this.child), message)
  }

  // SIGTERM at `timeout`, SIGKILL killTimeout later; draining again only brings those closer. → began one.
  startDrain (reason, now, timeout) {
    const termAt = now + timeout
    const killTimeout = this.policy.killTimeout
    if (this.drain) {
      this.drain.termAt = Math.min(this.drain.termAt, termAt)
      this.drain.killAt = Math.min(this.drain.killAt, this.drain.termAt + killTimeout)
      return false
    }
    this.drain = { reason, termAt, killAt: termAt + killTimeout, released: false, stopSent: false, termSent: false }
    const wasServing = this.ready
    this.transition('draining')
    if (!wasServing) this.drain.released = true // nothing was sent to it: no front to wait for
    return true
  }

  // It left the port with requests open: → what the Retiree takes (drain deadlines included). The slot
  // respawns now, or after the crash backoff for a closed listener.
  retired (now) {
    const retiree = {
      child: this.child,
      pid: this.pid,
      slot: this.slot,
      reason: this.drain.reason,
      termAt: this.drain.termAt,
      killAt: this.drain.killAt,
      termSent: this.drain.termSent
    }
    this.detach()
    this.open = 0
    this.tunnels = 0
    this.request = null
    if (this.drain.reason === 'listener-closed') this.scheduleRespawn(now)
    else this.respawnNow(now)
    return retiree
  }

  // → { reason, planned, draining, next: 'dead' | 'respawn' | 'given-up' }. A draining process (or any while the
  // pool stops) goes with no backoff, except for a closed listener: that one failed, and backs off.
  exited (code, signal, now, { poolStopping }) {
    const { reason, planned } = this.exitReason(code, signal)
    const draining = this.drain?.reason ?? null
    const wasReady = this.readyAt !== null
    const proven = this.provedHealthy(now)
    if (proven) this.crashes = 0
    this.lastExit = { pid: this.pid, code, signal, reason, at: now }
    this.detach()
    this.open = 0
    this.tunnels = 0
    this.request = null
    const outcome = { reason, planned, draining, next: 'dead' }
    if (poolStopping || (draining && draining !== 'listener-closed')) {
      this.respawnAt = now
      this.transition('dead')
      return outcome
    }
    if (!wasReady && this.portInUse) {
      this.scheduleRespawn(now)
      return { ...outcome, next: 'respawn', portTaken: true }
    }
    if (!wasReady && this.failedBoot(now)) return { ...outcome, next: 'given-up' }
    if (proven) this.respawnNow(now)
    else this.scheduleRespawn(now)
    return { ...outcome, next: 'respawn' }
  }

  // Ready and answered a request, or up --healthy-after: no crash loop, so respawn at once, count reset.
  provedHealthy (now) {
    if (this.readyAt === null) return false
    return this.requests > 0 || now - this.readyAt >= this.policy.healthyAfter
  }

  // EMFILE, ENFILE, EAGAIN, ENOMEM: the system's failure, so no crash-loop breaker; retried after the backoff.
  spawnFailed (error, now) {
    this.lastError = error
    this.spawnErrors++
    this.detach()
    this.pid = null // no process ran
    this.scheduleRespawn(now)
  }

  // → true at --max-boot-failures.
  failedBoot (now) {
    this.bootFailures++
    if (this.bootFailures < this.policy.maxBootFailures) return false
    this.givenUpAt = now
    this.transition('given-up')
    return true
  }

  // A drain's own end: code 0, or after our SIGTERM that signal or any code. Anything else is a crash.
  exitReason (code, signal) {
    if (this.killReason) return { reason: this.killReason, planned: false }
    const d = this.drain
    const answered = d && (d.termSent ? signal === null || signal === 'SIGTERM' : code === 0 && signal === null)
    if (answered) return { reason: d.reason, planned: true }
    return { reason: this.readyAt !== null ? 'crashed' : 'boot-failed', planned: false }
  }

  respawnNow (now) {
    this.respawnDelay = 0
    this.respawnAt = now
    this.transition('dead')
  }

  // --restart-delay × --restart-factor per consecutive crash, capped at --restart-max-delay.
  scheduleRespawn (now) {
    const p = this.policy
    this.crashes++
    this.respawnDelay = Math.min(p.restartDelay * p.restartFactor ** (this.crashes - 1), p.restartMaxDelay)
    this.respawnAt = now + this.respawnDelay
    this.transition('dead')
  }

  // New code, or --given-up-retry: start over at once, given up or backing off.
  revive (now) {
    this.bootFailures = 0
    this.crashes = 0
    this.givenUpAt = null
    this.respawnAt = now
    this.transition('dead')
  }

  dueForRespawn (now) { return this.#state === 'dead' && !this.alive && now >= this.respawnAt }
  waitingToRespawn (now) { return this.#state === 'dead' && !this.alive && now < this.respawnAt }

  // The cause may be outside the app (a database down); 0: only a reload revives it.
  dueForRetry (now) {
    const after = this.policy.givenUpRetry
    return this.#state === 'given-up' && after > 0 && now >= this.givenUpAt + after
  }

  detach () {
    if (!this.child) return
    this.previousChild = this.child // its last message may still be on the way
    this.child = null
  }

  // Plain data for fronts, events, status and metrics; instants in epoch ms.
  snapshot (now = this.clock.now()) {
    const wall = this.clock.wall
    return {
      slot: this.slot,
      name: this.name,
      pid: this.pid,
      host: this.host,
      port: this.port,
      state: this.state,
      startedAt: this.spawnedAt === null ? null : wall(this.spawnedAt),
      readyAt: this.readyAt === null ? null : wall(this.readyAt),
      uptime: this.readyAt !== null ? now - this.readyAt : 0,
      requests: this.requests,
      totalRequests: this.totalRequests,
      queued: this.queued,
      restarts: this.restarts,
      rss: this.rss,
      open: this.open,
      tunnels: this.tunnels,
      tunnelsOpened: this.tunnelsOpened,
      request: this.request
        ? { method: this.request.method, url: this.request.url, age: now - this.request.startedAt }
        : null,
      concurrency: this.policy.workerConcurrency ?? 1,
      lastExit: this.lastExit && { ...this.lastExit, at: wall(this.lastExit.at) }
    }
  }
}

const MONOTONIC = {
  now: () => Math.floor(performance.now()),
  wall: (at) => Date.now() - (Math.floor(performance.now()) - at)
}

// How often a worker holding requests checks in (POOL_CHECK_IN_INTERVAL): added to --timeout before a stuck
// loop is seen.
const CHECK_IN_MAX = 500
function checkInInterval ({ timeout }) {
  return Math.max(10, Math.min(CHECK_IN_MAX, Math.floor(timeout / 4)))
}

module.exports = { WorkerHandle, TRANSITIONS, checkInInterval }
