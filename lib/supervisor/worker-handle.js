'use strict'

// One object per slot: which process holds the slot, in which state, until when, and what
// happens when that time comes. The policy of a worker's life is the handle's own: the deadline
// of each state, the drain's STOP → SIGTERM → SIGKILL escalation, what an exit was, and when the
// slot may start again. The supervisor tells the handle what happened
// through methods named for it (attach, heard, checkedIn, released, retired, exited…) and never
// writes its fields; it asks what is due (`due`, a question only) and acts on the answer where
// other parties are concerned (fronts hear of a kill before the signal, events, logs), recording
// what it did through the handle again (kill, terminate, askToStop). It never re-implements the
// policy.
//
// States and the only changes allowed between them; each change is reported to `onState` once,
// and `state` cannot be written from outside:
//
//   from       to                                   on
//   dead       booting                              a process is forked for the slot
//   booting    ready                                the worker listens (message 'ready')
//   booting    warming → ready                      with --warmup: it listens, then answered
//                                                   its warm-up requests
//   ready      busy ⇄ ready                         its check-in says it holds requests, or none
//   booting, warming, ready, busy  draining         stop, reload, scale-down, recycling, a
//                                                   listener that closed (the port refuses)
//   any live   dead                                 the process exited, or its fork failed
//                                                   (respawn at `respawnAt`)
//   draining   dead                                 it left the slot's port with requests still
//                                                   open (retired: it finishes them outside the
//                                                   slot, which respawns)
//   booting, warming  given-up                      it exited before ready, the last allowed time
//   given-up   dead                                 a reload revives the slot with new code, or
//                                                   --given-up-retry has passed

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

// Exit reasons: 'crashed', 'boot-failed' (exited before ready), a kill reason ('timeout' (its
// loop stopped while it was active: it held requests, or had just now) and 'heartbeat' (it went
// silent while idle) for a hung worker, 'boot-timeout', 'warmup-failed', 'channel-broken' (it broke
// the pool channel's framing), 'pool-killed', '<drain>-killed'), or, for a
// drained process that ended as asked, the drain's reason ('stop', 'reload', 'scale-down',
// 'max-requests', 'max-rss', 'recycle', 'listener-closed').

class WorkerHandle {
  #state = 'dead'
  #onState

  // policy: the pool's options (timeouts, restart backoff, recycling limits). clock: the pool's,
  // { now() monotonic ms, wall(at) → epoch ms }, for snapshots.
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

  // A fork that failed hands back a child without a pid, its 'error' to follow (spawnFailed):
  // no process started, so none is counted.
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

  // The worker listens and its warm-up begins (--warmup). Returns true when this began it.
  beganWarmup () {
    if (this.#state !== 'booting') return false
    this.transition('warming')
    return true
  }

  // Its `count` warm-up requests were answered: the worker's own count of what it answered
  // includes them, and --max-requests does not.
  warmedUp (count) {
    if (this.#state === 'warming') this.warmups = count
  }

  // Returns true when this made the worker ready (a late or repeated 'ready' does nothing).
  becameReady (now) {
    if (this.#state !== 'booting' && this.#state !== 'warming') return false
    this.readyAt = now
    this.bootFailures = 0
    this.transition('ready')
    return true
  }

  // A check-in: its event loop came round, holding `open` requests and `tunnels`, having answered
  // `answered` since it started. Past --max-requests the process is due for recycling.
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

  // The process's resident memory, as a check-in reported it (null: not measured). A serving
  // process past --max-rss is due for recycling, busy or idle.
  measured (rss) {
    if (rss === null || rss === undefined) return
    this.rss = rss
    const maxRss = this.policy.maxRss
    if (this.ready && this.recycleDue === null && maxRss > 0 && rss > maxRss * 1024 * 1024) this.recycleDue = 'max-rss'
  }

  // Asked for (`pool recycle SLOT`): this process is due for replacing, as past --max-requests.
  recycleWhenPossible (reason) {
    if (this.alive && !this.recycleDue) this.recycleDue = reason
  }

  // The worker said something: its loop came round. Its silence counts from the last word.
  heard (now) { this.lastSeen = now }

  // A request found every render place of the worker taken (message 'queued').
  requestQueued () { this.queued++ }

  // Every front has finished with the draining worker: nothing more will reach it, and it may be
  // asked to leave the port (it finishes what it holds first).
  released () { if (this.drain) this.drain.released = true }

  // The fronts were told this process is gone (before its signal, or at its exit): once is enough.
  announcedGone () { this.goneAnnounced = true }

  // Why the process failed to boot, as far as anyone knows: the app's own error (message
  // 'boot-error') wins; what the supervisor saw only fills in when the app said nothing.
  reportedBootError (error) { this.lastError = error }
  warmupFailed (error) { this.lastError = { message: `warm-up failed: ${error.message}` } }
  brokeChannel (problem) {
    if (this.readyAt === null) this.lastError = this.lastError || { message: `broke the pool channel: ${problem}` }
  }

  // The process could not listen: its port was taken (EADDRINUSE) by someone else for a moment.
  portTaken () { this.portInUse = true }

  bootTimedOut () {
    this.lastError = this.lastError || { message: `not ready within ${this.policy.bootTimeout} ms (boot timeout)` }
  }

  // What is overdue now, for the supervisor to carry out, or null. Only a question: the answer is
  // carried out by the tick, which records it here (kill, terminate, askToStop):
  //   { do: 'kill', reason, ms }   boot-timeout, timeout (its loop stopped while it held
  //                                requests), heartbeat (it went silent idle), '<drain>-killed'
  //   { do: 'stop' }               the fronts let go of the drained worker: ask it to leave
  //   { do: 'term' }               the drain's graceful time is up: SIGTERM
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

  // The first instant at which, time passing and nothing else happening, `due` has an answer or
  // the slot may start again (dueForRespawn, dueForRetry); Infinity when no time runs. A question
  // too: the supervisor's tick runs at the earliest of its handles', and
  // whatever moves a deadline (a check-in, any word from the worker) only needs to ask again.
  // What no clock decides (the fronts letting go of a drained worker) is not in it.
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

  // When the current process runs out of time, each the first whole ms strictly past its limit:
  // its boot (the warm-up included: ready in time means warmed up in time), and its silence. A
  // worker that never became ready is still loading, drained or not: the boot timeout covers it.
  // Silence is judged by its last check-in: active, its loop has not come round for --timeout
  // (one check-in interval is the most it can have turned unseen); idle, --heartbeat-timeout.
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

  // The signals (to the worker's whole process group).
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

  // The drained worker holds nothing any more: ask it, once, to exit.
  askToStop (message) {
    this.drain.stopSent = true
    return this.send(message)
  }

  send (message) {
    return this.child !== null && channel.sendFrame(channel.supervisorEnd(this.child), message)
  }

  // Take the process out of service: it stops at `timeout`'s end at the latest, SIGTERM then,
  // SIGKILL `killTimeout` later. Draining again (a stop during a reload's drain) only brings
  // those deadlines closer. Returns whether this began a drain.
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

  // The drained process left the slot's port with requests still open: it finishes them outside
  // the slot (the pool's Retiree, with this drain's deadlines), and the slot starts again now, or
  // after the crash backoff for a closed listener (see exited). Returns what the Retiree takes.
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

  // The process exited. Classifies the exit, sets the slot's next step, and returns what the
  // supervisor reports: { reason, planned, draining, next: 'dead' | 'respawn' | 'given-up' }.
  // A process that was draining was going away anyway: however it ended, its slot goes on as the
  // drain meant (replaced, removed, or left dead by a stop) with no crash backoff; so does any
  // exit while the pool stops. Except a drain for a closed listener: that process failed, and
  // its slot respawns as after a crash, so an app that closes its server at every start is not
  // forked again in a tight loop.
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

  // Backoff guards against crash loops: an app that cannot boot, or that dies at once. A process
  // that became ready and answered a request (warm-up aside), or stayed up --healthy-after, was
  // neither: whatever ended it (the OOM killer, an operator's kill -9, a crash on one request),
  // its slot respawns at once and its crash count starts over.
  provedHealthy (now) {
    if (this.readyAt === null) return false
    return this.requests > 0 || now - this.readyAt >= this.policy.healthyAfter
  }

  // The fork failed (thrown, or the child's 'error' without a pid): out of descriptors (EMFILE,
  // ENFILE), of processes (EAGAIN) or of memory (ENOMEM). The system's failure, not the app's:
  // it counts toward no crash-loop breaker, and the slot tries again after its backoff.
  spawnFailed (error, now) {
    this.lastError = error
    this.spawnErrors++
    this.detach()
    this.pid = null // no process ran
    this.scheduleRespawn(now)
  }

  // One more failure before ready; true when that is one too many (--max-boot-failures).
  failedBoot (now) {
    this.bootFailures++
    if (this.bootFailures < this.policy.maxBootFailures) return false
    this.givenUpAt = now
    this.transition('given-up')
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

  respawnNow (now) {
    this.respawnDelay = 0
    this.respawnAt = now
    this.transition('dead')
  }

  // Backoff per slot: --restart-delay × --restart-factor per consecutive crash, capped at
  // --restart-max-delay; the count starts over once a process proved healthy (exited).
  scheduleRespawn (now) {
    const p = this.policy
    this.crashes++
    this.respawnDelay = Math.min(p.restartDelay * p.restartFactor ** (this.crashes - 1), p.restartMaxDelay)
    this.respawnAt = now + this.respawnDelay
    this.transition('dead')
  }

  // New code, or --given-up-retry later: a given-up slot, or one waiting out its backoff, starts
  // over, at once.
  revive (now) {
    this.bootFailures = 0
    this.crashes = 0
    this.givenUpAt = null
    this.respawnAt = now
    this.transition('dead')
  }

  dueForRespawn (now) { return this.#state === 'dead' && !this.alive && now >= this.respawnAt }
  waitingToRespawn (now) { return this.#state === 'dead' && !this.alive && now < this.respawnAt }

  // What made the slot fail may have been outside the app (a database down, a full disk): a
  // given-up slot tries again --given-up-retry after it gave up (0: only a reload revives it).
  dueForRetry (now) {
    const after = this.policy.givenUpRetry
    return this.#state === 'given-up' && after > 0 && now >= this.givenUpAt + after
  }

  detach () {
    if (!this.child) return
    this.previousChild = this.child // its last message may still be on the way
    this.child = null
  }

  // What fronts, events, `pool status` and metrics see: plain data, no process object, its instants
  // in epoch ms (the handle keeps them on the pool's monotonic clock).
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

// How often a worker holding requests checks in (the worker's POOL_CHECK_IN_INTERVAL): at most
// this much is added to --timeout before a stuck loop is seen. A quarter of --timeout, at most
// half a second.
const CHECK_IN_MAX = 500
function checkInInterval ({ timeout }) {
  return Math.max(10, Math.min(CHECK_IN_MAX, Math.floor(timeout / 4)))
}

module.exports = { WorkerHandle, TRANSITIONS, checkInInterval }
