'use strict'

// The supervisor, in the manner of gunicorn's arbiter: event sources (child exits, worker messages,
// front callbacks, commands) only record what happened and ask for a tick. One `tick()` then
// handles what was recorded, carries out what each worker's handle says is overdue, moves a
// reload on (and decides its end: advanceReload, the only place), and reconciles the live
// workers with the wanted set: the target size, the code generation being rolled out,
// recycling, respawns (the Reconciler decides, through a narrow view; the pool acts). Nothing
// outside the tick signals, forks or drains. A worker's own policy (deadlines, escalation,
// backoff, what an exit was) is its handle's (WorkerHandle); the pool tells the handle what
// happened through its methods and never writes its fields.
//
// The tick runs when something happened and at the next deadline, never on a period: one timer,
// armed after each tick at the earliest deadline of any handle (or the remnants' sweep, a
// reload's canary, a retiring process), and moved closer when news brings one closer. The
// supervisor watches processes, never requests: a worker checks in as its event loop comes round
// (twice a second while it holds requests, every --heartbeat-interval idle), and a check-in is
// told to its handle as it comes, waking the tick only when it changed what the tick would decide
// (`news`). Requests are the fronts' business: what a worker says about one (AWAITING,
// REQUEST_ENDED) goes to them at once. Every instant is on a monotonic clock (SYSTEM.now): a step
// of the wall clock moves no deadline. An idle pool's supervisor sleeps until a deadline.

const { EventEmitter } = require('node:events')
const msg = require('../protocol/messages')
const { Reconciler } = require('./reconcile')
const { Reload } = require('./reload')
const { Canary } = require('./canary')
const { WorkerHandle } = require('./worker-handle')
const { Retiree } = require('./retiree')
const { assemblePool, refuseEphemeral } = require('../config/pool')
const { workerCeiling } = require('../options/table')
const { createLogger, logOutputOf } = require('../shared/logger')
const { FrontSet } = require('../fronts/front-set')
const { createFrontContext } = require('../fronts/front')
const { frontFailures } = require('../fronts/registry')
const { PoolListeners } = require('../observe/listeners')
const { PoolPhase } = require('./phase')
const { Remnants } = require('./process-group')
const { WorkerReport } = require('./worker-report')
const { PoolMetrics } = require('../observe/metrics')
const { SYSTEM, resolveApp, checkWorkerPorts, watchChild } = require('./spawn')
const { EVENT } = require('./events')
const { poolError, codes } = require('../errors')
const descriptors = require('../net/descriptors')

const RECENT_EXITS = 20 // kept for /status and the status page
// A timer's longest delay in Node (about 24.8 days); a deadline further away is armed again then.
const LONGEST_TIMER = 2 ** 31 - 1

class Pool extends EventEmitter {
  // `system` (tests only): fork, signal, captureRemnant, bindError, endLeftovers, startReaper,
  // now(), setTimer() and clearTimer(), the pool's only ways to reach processes, ports and the
  // clock (SYSTEM).
  constructor (options = {}, { system = SYSTEM } = {}) {
    super()
    const config = assemblePool(options) // everything checked before anything is made
    this.options = config.options
    this.ceiling = workerCeiling(this.options) // { max, why }: -n and scale stay within it
    if (this.options.workers > this.ceiling.max) {
      throw poolError(codes.BAD_OPTION,
        `workers (-n) ${this.options.workers} is above ${this.ceiling.why}: lower -n, or raise --max-workers (0: no ` +
          'ceiling)')
    }
    this.system = system
    this.app = resolveApp(this.options.app, this.options.cwd)
    this.logger = this.options.logger ||
      createLogger({
        level: this.options.logLevel,
        format: this.options.logFormat,
        bufferBytes: this.options.logBuffer
      })
    // fronts add theirs
    this.metrics = new PoolMetrics(() => this.measuredWorkers(),
      { logOutput: logOutputOf(this.logger), frontFailures: frontFailures() })
    // Each happening in a worker's life, told once: log line, metric, event.
    this.report = new WorkerReport({
      logger: this.logger,
      options: this.options,
      metrics: this.metrics,
      emit: (name, payload) => this.emit(name, payload),
      listens: (name) => this.listenerCount(name) > 0
    })
    // What a front may know of the pool, and all it is given (its FrontContext).
    const frontContext = createFrontContext({
      logger: this.logger,
      metrics: this.metrics,
      workers: () => this.workers(),
      portOf: (slot) => this.portOf(slot),
      target: () => this.target,
      workerRefusing: (worker, detail) => this.workerRefusing(worker, detail),
      agentAsked: () => (this.listeners.agent?.asked ?? 0) > 0,
      watchRequest: (worker, id) => this.watchRequest(worker, id)
    })
    this.fronts = new FrontSet(config.createFronts(this.logger), frontContext)
    // Stats and agent: the pool's own ports, every mode.
    this.listeners = new PoolListeners({
      options: this.options,
      metrics: this.metrics,
      logger: this.logger,
      status: () => this.status(),
      frontHost: () => this.fronts.host()
    })
    this.reconciler = new Reconciler(this.reconcilerView()) // the live set against the wanted set, from the tick
    this.clock = { now: () => this.now(), wall: (at) => this.wall(at) } // the handles' and retirees', for snapshots
    this.target = this.options.workers
    this.slotsWithoutProcess = 0 // wanted slots with no process now, as of the last tick
    this.releaseDescriptors = null // ends the descriptors kept for those slots' processes
    this.handles = new Map() // slot → WorkerHandle
    this.codeGeneration = 0 // the code a new process runs: goes up when a reload's canary proves the new code boots
    this.reloading = null // the Reload in progress (advanceReload ends it)
    this.nextReload = null // a QueuedReload: the reload asked while this one runs, begun when it ends
    this.canaries = new Set() // canary processes still running: a stop waits for them too
    this.retirees = new Map() // child → Retiree: drained processes that left their slot, finishing what they hold
    this.remnants = new Remnants({ logger: this.logger, killTimeout: this.options.killTimeout })
    this.reaper = null // ends what the workers leave if this process dies
    this.life = new PoolPhase() // idle → starting → running → stopping → stopped, and its promises
    this.events = []
    this.tickScheduled = false
    this.timer = null // the tick's timer (SYSTEM.setTimer), due at `timerAt`
    this.timerAt = Infinity
    this.unclean = false // the stop had to signal a worker
    this.recentExits = [] // the last worker exits, newest first
    this.startedAt = null
  }

  get phase () { return this.life.name }
  get failure () { return this.life.failure }

  // ── public API: checks at once, acts in the tick ──────────────────────────────────────────

  // Resolves when every slot is ready or given up and at least one is ready. Rejects when the
  // app cannot boot at all, a worker port is taken, or a front refuses to start.
  async start () {
    this.life.begin()
    this.startedAt = this.now()
    this.slotsWithoutProcess = this.target
    // File descriptors kept for the workers, from before any listener opens.
    this.releaseDescriptors = descriptors.budget.reserveForWorkers(() => this.slotsWithoutProcess)
    try {
      // What a pool that died on these ports left running goes first.
      await this.system.endLeftovers({
        ports: this.portsUpTo(Math.max(this.target, this.options.maxWorkers || 0)),
        killTimeout: this.options.killTimeout,
        logger: this.logger
      })
      await checkWorkerPorts(this.system, { host: this.options.workerHost, ports: this.portsUpTo(this.target) })
      this.life.assertStarting()
      await this.listeners.start()
      this.life.assertStarting()
      await this.fronts.start(() => this.life.is('starting'))
      this.life.assertStarting()
    } catch (err) {
      if (this.life.abandon()) await this.listeners.stop()
      this.releaseDescriptors()
      throw err
    }
    const started = this.life.untilRunning()
    const { killTimeout, logLevel, logFormat } = this.options
    this.reaper = this.system.startReaper({ killTimeout, logLevel, logFormat, logger: this.logger })
    this.logger.info({
      event: 'starting',
      app: this.app,
      workers: this.target,
      ports: `${this.portOf(1)}-${this.portOf(this.target)}`,
      supervisorPid: process.pid,
      reaperPid: this.reaper.pid,
      ...this.listeners.urls()
    },
      `starting ${plural(this.target, 'worker')} of ${this.app}` +
        (this.listeners.stats ? ` (metrics and status on ${this.listeners.stats.url})` : ''))
    this.wake()
    return started
  }

  // Graceful: stop giving work, let running requests finish up to `timeout`, then TERM, then
  // KILL. Resolves { clean } where clean is false when this stop had to signal a worker, once
  // the processes the workers' apps left behind are gone too (process-group.js).
  stop ({ timeout = this.options.gracefulTimeout } = {}) {
    const { promise, began } = this.life.stop()
    if (began) this.enqueue({ type: EVENT.STOP, timeout })
    return promise
  }

  // Immediate: SIGKILL every worker, and what their apps left running (a second Ctrl-C).
  kill () {
    if (this.life.is('idle', 'stopped')) return this.stop()
    const stopped = this.stop({ timeout: 0 })
    this.enqueue({ type: EVENT.KILL })
    return stopped
  }

  workers () {
    const now = this.now()
    return this.slots().map((handle) => handle.snapshot(now))
  }

  // Replace every worker with one running the code now on disk, without failing a request.
  // Asked while a reload runs, it is merged into the one reload that follows it: the running one
  // may have loaded its new code before this caller's deploy, so it cannot answer for it. Every
  // caller is answered when the reload that covers its request ends; however many ask, at most
  // one reload waits. Until the running reload has forked its canary, nothing of the code on
  // disk is loaded yet: a caller then joins it.
  async reload () {
    this.life.assertRunning('reload')
    const running = this.reloading
    if (!running) return this.beginReload().done
    if (!running.began) return running.done
    if (!this.nextReload) {
      this.nextReload = new QueuedReload()
      this.logger.info({ event: 'reload-queued' },
        'a reload is running: the one asked now follows it (every reload asked meanwhile is merged into it)')
    }
    return this.nextReload.join()
  }

  beginReload () {
    const reload = new Reload({ now: this.now(), logger: this.logger })
    this.reloading = reload
    this.logger.info({ event: 'reload', workers: this.target }, `reloading ${plural(this.target, 'worker')}`)
    this.wake()
    return reload
  }

  // Grow or shrink the pool. Shrinking drains the highest slots first.
  async scale (n) {
    this.life.assertRunning('scale')
    if (!Number.isInteger(n) || n < 1) {
      throw poolError(codes.BAD_OPTION, `scale needs a positive integer (got ${JSON.stringify(n)})`)
    }
    if (this.portOf(n) > 65535) {
      throw poolError(codes.BAD_OPTION,
        `cannot scale to ${n} workers: slot ${n}'s port would be ${this.portOf(n)}, above 65535`)
    }
    if (n > this.ceiling.max) {
      throw poolError(codes.BAD_OPTION,
        `cannot scale to ${n} workers: above ${this.ceiling.why}; start the pool with a higher --max-workers (0: no ` +
          'ceiling)')
    }
    if (n > this.target) refuseEphemeral(this.portOf(this.target + 1), this.portOf(n))
    await this.fronts.checkScale(n)
    await this.checkNewPorts(n)
    this.life.assertRunning('scale') // a stop may have come while a front or a port was checked
    const from = this.target
    this.target = n // read by the next tick's reconcile
    this.logger.info({ event: 'scale', from, to: n }, `scaling from ${from} to ${plural(n, 'worker')}`)
    await this.until(() => {
      if (this.target !== n) return true // a later scale took over; it reports its own outcome
      const slots = this.slots()
      return slots.length === n &&
        slots.every((handle) => handle.slot <= n && (handle.ready || handle.state === 'given-up'))
    })
    if (this.target !== n) throw poolError(codes.BUSY, `scaling to ${n} was superseded by a scale to ${this.target}`)
    return { from, to: n }
  }

  // Replace one slot's worker with a new process, as --max-requests does: through the one drain
  // path (its running request finishes; at most --reload-batch slots out of service at once).
  // Resolves once the slot's new worker is ready.
  async recycle (slot) {
    this.life.assertRunning('recycle')
    const handle = this.recyclable(slot)
    const { pid: oldPid, incarnation } = handle
    const began = this.now()
    this.enqueue({ type: EVENT.RECYCLE, handle, child: handle.child })
    const replaced = () => handle.incarnation > incarnation && handle.ready
    await this.until(() => replaced() || handle.state === 'given-up' || this.handles.get(slot) !== handle)
    if (this.handles.get(slot) !== handle) {
      throw poolError(codes.BUSY, `slot ${slot} was removed by a scale-down before its new worker was ready`)
    }
    if (!replaced()) {
      throw poolError(codes.BOOT_FAILED,
        `slot ${slot}'s new worker failed to boot and the slot gave ` +
          `up: ${handle.lastError?.message ?? 'it exited before becoming ready'}`)
    }
    return { slot, oldPid, newPid: handle.pid, ms: this.now() - began }
  }

  // The handle of `slot` when it has a serving worker to recycle; a PoolError saying why not.
  recyclable (slot) {
    if (!Number.isInteger(slot) || slot < 1) {
      throw poolError(codes.BAD_OPTION, `recycle needs a slot number, a positive integer (got ${JSON.stringify(slot)})`)
    }
    const handle = this.handles.get(slot)
    if (!handle || slot > this.target) {
      throw poolError(codes.BAD_OPTION, `there is no slot ${slot}: the pool's slots are 1-${this.target}`)
    }
    if (handle.state === 'given-up') {
      throw poolError(codes.BAD_OPTION,
        `slot ${slot} has given up (its workers kept failing to boot): there is no worker to recycle (it tries again ` +
          'after --given-up-retry, or on pool reload)')
    }
    if (!handle.ready) {
      throw poolError(codes.BUSY, `slot ${slot} is ${handle.state}, not serving: there is no worker to recycle now`)
    }
    return handle
  }

  // New slots' ports must be free now, or the answer would be "scaled" and the slot give up. One
  // scale's checks at a time: two probing the same port at once would each find it taken.
  checkNewPorts (n) {
    const check = async () => {
      const added = Array.from({ length: n }, (_, i) => i + 1).filter((slot) => !this.handles.has(slot))
      await checkWorkerPorts(this.system, {
        host: this.options.workerHost,
        slots: added,
        ports: added.map((slot) => this.portOf(slot)),
        ours: (slot) => this.handles.has(slot)
      })
    }
    this.portChecks = (this.portChecks ?? Promise.resolve()).catch(() => {}).then(check)
    return this.portChecks
  }

  status () {
    const { front, queue } = this.fronts.status()
    const outdated = this.reloading
      ? this.wanted().filter((handle) =>
        handle.codeGeneration < (this.reloading.codeGeneration ?? Infinity) && !handle.drain).length
      : 0
    return {
      pid: process.pid,
      app: this.app,
      phase: this.phase,
      target: this.target,
      front,
      queue,
      ...this.listeners.urls(),
      reload: this.reloading
        ? { ...this.reloading.status({ pending: outdated }), queued: this.nextReload?.callers ?? 0 }
        : null,
      workers: this.measuredWorkers(),
      // Drained processes that left their slot and still finish what they hold.
      retiring: [...this.retirees.values()].map((retiree) => retiree.status(this.now())),
      recentExits: this.recentExits.slice()
    }
  }

  // The snapshots with the CPU time each running process has used (`pool status --watch`, the
  // status page, /metrics), read from /proc when asked for.
  measuredWorkers () {
    const now = this.now()
    return this.slots().map((handle) => ({
      ...handle.snapshot(now),
      cpu: handle.alive && this.system.cpuTime ? this.system.cpuTime(handle.pid) : null
    }))
  }

  // An event source, for fronts (their FrontContext's workerRefusing): `worker`, a snapshot the
  // front was given, refused `refusals` connections in a row while the pool counts it ready. Its
  // app may have closed its listener without a word (the runtime reports the closes it can see
  // itself): the worker is replaced as if it had said so.
  workerRefusing (worker, { refusals, front = 'a front' } = {}) {
    const handle = this.handles.get(worker?.slot)
    if (!handle || !handle.child || handle.pid !== worker.pid) return
    this.enqueue({ type: EVENT.REFUSING, handle, child: handle.child, refusals, front })
  }

  // A front (its FrontContext watchRequest) stopped reading the worker's answer to the request
  // `id`, while the app may still be working on it: the worker is asked to say when that request
  // has ended (REQUEST_ENDED, told to the fronts as workerRequestEnded). False when it cannot be
  // asked (its process is gone, or the slot's process is another).
  watchRequest (worker, id) {
    const handle = this.handleOf(worker)
    if (!handle || typeof id !== 'string') return false
    return handle.send(msg.message(msg.WATCH_REQUEST, { id: id.slice(0, msg.MAX_ID) }))
  }

  // The handle of the process a front speaks of, while it still holds its slot.
  handleOf (worker) {
    const handle = this.handles.get(worker?.slot)
    return handle && handle.child !== null && handle.pid === worker.pid ? handle : undefined
  }

  portOf (slot) { return this.options.workerPort + slot - 1 }
  portsUpTo (slots) { return Array.from({ length: slots }, (_, i) => this.portOf(i + 1)) }
  now () { return this.system.now() }
  // An instant of the pool's monotonic clock as epoch ms, for people to read.
  wall (at) { return this.system.wallClock() - (this.now() - at) }

  // ── event sources: record and wake ────────────────────────────────────────────────────────

  enqueue (event) {
    this.events.push(event)
    this.wake()
  }

  // A worker's event (from watchChild). Its check-in, when nothing waits before it in the queue,
  // is told to its handle at once (news); what it says of a request goes to the fronts at once
  // (it is about their next decision, not the worker's life); anything else, or a check-in behind
  // other events, waits its turn for the tick, so a handle hears everything in order.
  fromWorker (event) {
    const type = event.type === EVENT.MESSAGE && event.handle ? event.message.type : null
    if (type === msg.CHECK_IN && this.events.length === 0) {
      return this.checkedIn(event.handle, event.child, event.message)
    }
    if (type === msg.AWAITING || type === msg.REQUEST_ENDED) {
      return this.toldOfRequest(event.handle, event.child, event.message)
    }
    this.enqueue(event)
  }

  // With --worker-concurrency above 1, every request the worker holds awaits I/O (AWAITING); or a
  // request a front asked about has ended (REQUEST_ENDED). From a retiring process too: a front
  // still holds its streams.
  toldOfRequest (handle, child, message) {
    const worker = child === handle.child ? { slot: handle.slot, pid: handle.pid } : this.retirees.get(child)?.worker()
    if (!worker) return
    if (message.type === msg.AWAITING) this.fronts.workerAwaiting(worker, { open: message.open, last: message.last })
    else this.fronts.workerRequestEnded(worker, message.id)
  }

  checkedIn (handle, child, message) {
    if (child !== handle.child) return // from a process that no longer holds the slot
    this.news(handle, (now) => this.onMessage(handle, message, now))
  }

  // A check-in the tick need not wait for: `record(now)` tells its handle. The rest of the tick
  // runs only if that changed what it decides: a process now due for recycling, or something of
  // the handle's due now. Otherwise at most the timer moves closer, to the handle's new deadline.
  news (handle, record) {
    const now = this.now()
    const recycleDue = handle.recycleDue
    record(now)
    if (handle.recycleDue !== recycleDue || handle.due(now)) this.wake()
    else this.armTimer(handle.nextDeadline())
  }

  wake () {
    if (this.tickScheduled) return
    this.tickScheduled = true
    setImmediate(() => this.tick())
  }

  // Resolves once `done()` holds, checked after every tick; rejects if the pool stops first.
  until (done) {
    const waiting = this.life.until(done)
    this.wake()
    return waiting
  }

  // One of the three exceptions to "events only enqueue" (with toldOfRequest and a check-in's
  // news): a slot's process exited, and the fronts hear it now,
  // from the exit event itself (watchChild says why). Only if that process
  // still holds the slot; the tick handles the exit as usual and its announceGone does nothing.
  announceExit (handle, child) {
    if (handle.child === child) this.announceGone(handle)
  }

  // ── the loop ──────────────────────────────────────────────────────────────────────────────

  tick () {
    this.tickScheduled = false
    const now = this.now()
    // Taken a batch at a time (shift() would make a busy tick quadratic); events enqueued while
    // handling come in the next batch.
    while (this.events.length > 0) {
      const batch = this.events
      this.events = []
      for (const event of batch) this.handleEvent(event, now)
    }
    for (const handle of this.handles.values()) this.carryOut(handle, handle.due(now), now)
    for (const retiree of this.retirees.values()) if (retiree.carryOut(now, this.report)) this.noteSignalled()
    this.remnants.sweep(now)
    this.advanceReload(now)
    if (this.life.is('starting', 'running')) {
      this.slotsWithoutProcess = this.reconciler.reconcile(now, { replace: this.life.is('running') })
    }
    this.checkProgress(now)
    this.scheduleNext(now)
  }

  // The next tick: at once if this one left something due (a drain its reconcile began), else
  // at the earliest deadline to come. A deadline already past is one this tick chose not to act
  // on (a respawn waiting for --max-booting, any respawn while the pool stops): news moves those
  // on, not time.
  scheduleNext (now) {
    this.disarmTimer()
    if (this.life.is('stopped')) return
    let at = Math.min(this.remnants.nextSweep(now), this.reloading?.canary?.deadline() ?? Infinity)
    for (const retiree of this.retirees.values()) at = Math.min(at, retiree.nextDeadline())
    for (const handle of this.handles.values()) {
      if (handle.due(now)) return this.wake()
      const deadline = handle.nextDeadline()
      if (deadline > now && deadline < at) at = deadline
    }
    this.armTimer(at)
  }

  // The timer wakes the tick at `at` (ms, on the pool's clock), unless it is armed sooner already.
  armTimer (at) {
    if (at >= this.timerAt) return
    this.disarmTimer()
    this.timerAt = at
    const delay = Math.min(LONGEST_TIMER, Math.max(0, at - this.now()))
    // From the timers' phase of the event loop: what the workers wrote meanwhile is read in its
    // poll phase, before the tick (setImmediate), so a deadline is decided on everything sent
    // before it.
    this.timer = this.system.setTimer(() => {
      this.timer = null
      this.timerAt = Infinity
      this.wake()
    }, delay)
  }

  disarmTimer () {
    if (this.timer !== null) this.system.clearTimer(this.timer)
    this.timer = null
    this.timerAt = Infinity
  }

  // Each event goes to the handler of its subject: a reload's canary, a retiring process, the
  // pool itself (its commands), a slot's worker.
  handleEvent (event, now) {
    if (event.remnant) this.remnants.add(event.remnant, { who: event.who, slot: event.slot, pid: event.pid }, now)
    if (event.canary) return this.onCanaryEvent(event.canary, event, now)
    const retiree = this.retirees.get(event.child)
    if (retiree) return this.onRetireeEvent(retiree, event, now)
    const handle = event.handle
    if (!handle) return this.onCommand(event, now)
    // A child's last message may be read after its 'exit' (when a process its app started holds
    // the channel open): keep its boot error.
    const lateFromPrevious = event.child !== handle.child && event.child === handle.previousChild
    if (lateFromPrevious && event.message?.type === msg.BOOT_ERROR) {
      return this.onBootError(handle, event.message.error)
    }
    // Events from a process that no longer holds the slot are history, not news.
    if (event.child !== handle.child) return
    return this.onWorkerEvent(handle, event, now)
  }

  onCommand (event, now) {
    switch (event.type) {
      case EVENT.STOP: return this.onStop(event.timeout)
      case EVENT.KILL: return this.onKill(now)
      default: throw unhandled(event, 'the pool')
    }
  }

  onCanaryEvent (canary, event, now) {
    switch (event.type) {
      case EVENT.MESSAGE: return canary.onMessage(event.message, now)
      case EVENT.CHANNEL_BROKEN:
        this.report.canaryChannelBroken(event.pid, event.problem)
        return canary.onChannelBroken(event.problem)
      case EVENT.EXIT:
        canary.onExit(event.code, event.signal)
        return this.canaryGone(canary)
      case EVENT.SPAWN_ERROR:
        canary.onSpawnError(event.error)
        return this.canaryGone(canary)
      default: throw unhandled(event, 'a canary')
    }
  }

  // A retiring process still serves what it holds, and its exit ends it; nothing else of it matters.
  onRetireeEvent (retiree, event, now) {
    switch (event.type) {
      case EVENT.MESSAGE:
        if (event.message.type === msg.AWAITING || event.message.type === msg.REQUEST_ENDED) {
          this.toldOfRequest(event.handle, event.child, event.message)
        }
        return
      case EVENT.CHANNEL_BROKEN: return retiree.kill()
      case EVENT.EXIT:
        this.retirees.delete(retiree.child)
        this.fronts.workerGone(retiree.worker())
        return this.report.retireeExited(retiree, event, now)
    }
  }

  onWorkerEvent (handle, event, now) {
    switch (event.type) {
      case EVENT.MESSAGE: return this.onMessage(handle, event.message, now)
      case EVENT.CHANNEL_BROKEN: return this.onChannelBroken(handle, event.problem)
      case EVENT.EXIT: return this.onExit(handle, event, now)
      case EVENT.SPAWN_ERROR: return this.onSpawnError(handle, event.error, now)
      case EVENT.WARMED:
        handle.warmedUp(this.options.warmupRequests)
        return this.onReady(handle, now)
      case EVENT.WARMUP_FAILED: return this.onWarmupFailed(handle, event.error)
      case EVENT.RELEASED: return handle.released()
      case EVENT.RECYCLE: return handle.recycleWhenPossible('recycle') // the replace step drains it
      case EVENT.REFUSING: return this.onListenerClosed(handle, { by: event.front, refusals: event.refusals }, now)
      default: throw unhandled(event, 'a slot\'s worker')
    }
  }

  // A reload's canary ended, however: it holds nothing the pool waits for any more.
  canaryGone (canary) {
    this.canaries.delete(canary)
  }

  onMessage (handle, m, now) {
    handle.heard(now)
    switch (m.type) {
      case msg.READY: handle.measured(m.rss); return this.onReady(handle, now)
      case msg.CHECK_IN: return handle.checkedIn(m, now)
      case msg.QUEUED: handle.requestQueued(); return this.report.queued(handle, now, m.waiting, m.running)
      case msg.BOOT_ERROR: return this.onBootError(handle, m.error)
      case msg.LISTENER_CLOSED: return this.onListenerClosed(handle, { by: 'worker', error: m.error }, now)
      case msg.LEFT_PORT: return this.onLeftPort(handle, m, now)
      case msg.AWAITING: case msg.REQUEST_ENDED: return this.toldOfRequest(handle, handle.child, m)
    }
  }

  // The drained worker, asked to stop, closed its listener: the port is free. With requests or
  // tunnels still open and a slot that starts again (reload, recycling, a closed listener), the
  // process retires: it finishes them outside the slot, within its drain's deadlines, and the
  // slot's next process boots now instead of after the longest stream. A stop or a scale-down
  // has no next process: the worker stays in its slot until it exits.
  onLeftPort (handle, { open, tunnels }, now) {
    if (!handle.drain || open + tunnels === 0 || !this.life.is('running') || handle.slot > this.target) return
    const retiree = new Retiree(handle.retired(now), { signal: this.system.signal })
    this.retirees.set(retiree.child, retiree)
    this.report.retired(handle, retiree, { open, tunnels })
  }

  // The worker's port refuses connections while its process lives on, heartbeating: it said so
  // (its server closed or failed), or a front found out (workerRefusing). It serves nothing, so
  // it leaves 'ready' now, and is drained and replaced at once, outside the replace step's batch
  // budget; its slot respawns with the crash backoff (worker-handle.js). Once per process: a
  // worker already draining is on its way out anyway.
  onListenerClosed (handle, cause, now) {
    if (handle.drain) return
    this.report.listenerClosed(handle, cause, now)
    this.beginDrain(handle, { reason: 'listener-closed' })
  }

  // The worker listens; with --warmup, it is ready once warmed up ('warmed' comes back here).
  onReady (handle, now) {
    if (this.options.warmup.length > 0 && handle.beganWarmup()) return this.warmUp(handle, now)
    if (!handle.becameReady(now)) return
    this.fronts.workerReady(this.report.ready(handle, now))
    this.reloading?.slotReady(handle)
  }

  warmUp (handle, now) {
    const { warmup: paths, warmupRequests: count, timeout } = this.options
    this.report.warming(handle, now)
    const done = (type, error) => this.enqueue({ type, handle, child: handle.child, error })
    this.system.warmUp({ host: handle.host, port: handle.port, paths, count, timeout }).then(() => done(EVENT.WARMED),
      (err) => done(EVENT.WARMUP_FAILED, err))
  }

  // A failed warm-up is a failed boot: the process goes, the slot tries again (with backoff).
  onWarmupFailed (handle, err) {
    handle.warmupFailed(err)
    this.report.bootError(handle, handle.lastError)
    this.announceGone(handle)
    handle.kill('warmup-failed')
  }

  // What came on the worker's channel was not a frame (garbage, or more than a frame may hold):
  // the app broke the channel, and a worker that cannot be heard cannot be supervised. It is
  // killed and its slot respawns with backoff, like a crash.
  onChannelBroken (handle, problem) {
    this.report.channelBroken(handle, problem)
    handle.brokeChannel(problem)
    this.announceGone(handle)
    handle.kill('channel-broken')
  }

  // A port in use fails a start (something else holds it); once running, it is the system's
  // doing (a port taken a moment while its worker was down), not the app's: the slot tries again
  // with its backoff, as after a failed fork, and is never given up for it.
  onBootError (handle, error) {
    handle.reportedBootError(error)
    this.report.bootError(handle, error)
    if (error.code !== 'EADDRINUSE') return
    if (this.life.is('starting')) this.fail(poolError(codes.PORT_IN_USE, error.message))
    else handle.portTaken()
  }

  onExit (handle, { code, signal }, now) {
    const pid = handle.pid
    const wasReady = handle.readyAt !== null
    this.announceGone(handle)
    const outcome = handle.exited(code, signal, now, { poolStopping: this.life.is('stopping', 'stopped') })
    const view = this.report.exited(handle, pid, { code, signal, ...outcome }, now)
    this.recentExits.unshift({
      slot: handle.slot,
      name: handle.name,
      pid,
      code,
      signal,
      reason: outcome.reason,
      planned: outcome.planned,
      at: this.wall(now)
    })
    this.recentExits.length = Math.min(this.recentExits.length, RECENT_EXITS)
    if (!wasReady && !outcome.draining && outcome.next !== 'dead' && !outcome.portTaken) this.bootFailed(handle, view)
    if (outcome.next === 'given-up') this.report.gaveUp(handle)
    if (outcome.next === 'respawn') this.report.respawnScheduled(handle)
  }

  // The fork failed (thrown by fork(), or the child's 'error' without a pid): nothing the app
  // did. No boot failure is counted: the slot tries again with its backoff, however often.
  onSpawnError (handle, err, now) {
    handle.spawnFailed({
      message: `cannot fork a worker process: ${err.message}`,
      code: err.code,
      errno: err.errno,
      syscall: err.syscall
    }, now)
    this.report.spawnError(handle, err)
  }

  bootFailed (handle, view) {
    this.report.bootFailed(handle, view)
    this.reloading?.workerFailedBoot(handle) // the reload ends there if it rolls out its code
  }

  // What a handle says is overdue, done in the order the world needs: fronts hear of a worker
  // going before the signal, so no new request races it.
  carryOut (handle, action, now) {
    if (!action) return
    if (action.do === 'stop') return handle.askToStop(msg.message(msg.STOP, { reason: handle.drain.reason }))
    this.report.overdue(handle, action, now)
    if (action.do === 'term' || action.reason.endsWith('-killed')) this.noteSignalled()
    if (action.reason === 'boot-timeout') handle.bootTimedOut()
    this.announceGone(handle)
    if (action.do === 'term') handle.terminate()
    else handle.kill(action.reason)
  }

  // The fronts hear once per process that it is gone: from its exit event (announceExit), or
  // from the tick, before a kill's signal or on the exit's handling, whichever comes first.
  announceGone (handle) {
    if (handle.goneAnnounced) return
    handle.announcedGone()
    this.fronts.workerGone(handle.snapshot())
  }

  // "Unclean" describes a stop: a reload or recycling that had to signal a worker earlier on
  // does not make the stop that follows unclean.
  noteSignalled () {
    if (this.life.is('stopping')) this.unclean = true
  }

  // ── commands ──────────────────────────────────────────────────────────────────────────────

  onStop (timeout) {
    this.logger.info({ event: 'stopping', timeout }, 'stopping: finishing running requests')
    this.emit('stopping')
    this.fronts.stopping()
    // A worker already draining (reload, scale-down) keeps its reason, with the stop's deadlines
    // if they come sooner.
    for (const handle of this.handles.values()) this.beginDrain(handle, { reason: 'stop', timeout })
    for (const retiree of this.retirees.values()) retiree.hurry(this.now() + timeout, this.options.killTimeout)
  }

  onKill (now) {
    for (const handle of this.handles.values()) {
      if (!handle.alive) continue
      this.unclean = true
      this.announceGone(handle)
      handle.kill('pool-killed')
    }
    for (const canary of this.canaries) canary.kill()
    for (const retiree of this.retirees.values()) { this.unclean = true; retiree.kill() }
    this.remnants.killAll(now)
  }

  // ── draining: the one path for stop, reload, scale-down and recycling ─────────────────────

  beginDrain (handle, { reason, timeout = this.options.gracefulTimeout }) {
    if (!handle.alive) return
    const now = this.now()
    const serving = handle.ready
    if (!handle.startDrain(reason, now, timeout)) return
    const view = this.report.draining(handle, reason, now)
    if (!serving) return
    const child = handle.child
    this.fronts.drain(view).then(() => this.enqueue({ type: EVENT.RELEASED, handle, child }))
  }

  // ── a reload: every step and its end, decided here, once per tick ──────────────────────────

  // The canary boots and is judged; once it was ready the new code generation rolls out (the
  // replacing itself is the Reconciler's replace step). The reload ends here and nowhere else:
  // done when every wanted slot runs the new code and is ready; failed when the canary fails, a
  // worker of the new code dies before ready (the books say so), or the pool stops.
  advanceReload (now) {
    const reload = this.reloading
    if (!reload) return
    if (!this.life.is('running')) {
      return this.endReload(reload, now, { error: { message: 'the pool is stopping' }, code: codes.STOPPING })
    }
    if (reload.failure) return this.endReload(reload, now, { error: reload.failure })
    if (reload.stage === 'canary') {
      const verdict = reload.canary ? reload.canary.check(now) : this.startCanary(reload, now)
      if (verdict === 'booting') return
      reload.canary?.kill() // ready or failed, it served its purpose
      if (verdict !== 'ready') return this.endReload(reload, now, { error: verdict.failed })
      this.rollOut(reload, now)
    }
    const rolledOut = (handle) => handle.codeGeneration >= reload.codeGeneration && handle.ready
    if (this.wanted().every(rolledOut)) this.endReload(reload, now)
  }

  rollOut (reload, now) {
    reload.roll(++this.codeGeneration)
    // The new code boots: slots given up on the old code, or waiting out a crash backoff, get
    // another chance with it, now.
    for (const handle of this.wanted()) {
      if (handle.state !== 'given-up' && !handle.waitingToRespawn(now)) continue
      handle.revive(now)
      this.report.revived(handle)
    }
  }

  // The reload merged while this one ran begins now, whatever this one's outcome: its callers
  // may have deployed a fix. A stopping pool answers them as it answered this one.
  endReload (reload, now, { error, code } = {}) {
    this.reloading = null
    reload.canary?.kill()
    if (error) reload.abort(error, code)
    else reload.finish(now)
    const next = this.nextReload
    this.nextReload = null
    if (!next) return
    if (this.life.is('running')) next.follow(this.beginReload().done)
    else next.follow(reload.done)
  }

  // ── the wanted set: the Reconciler decides, through this view; the pool acts ──────────────

  slots () { return [...this.handles.values()].sort((a, b) => a.slot - b.slot) }
  wanted () { return this.slots().filter((handle) => handle.slot <= this.target) }

  // What the Reconciler sees and may do (each is described at the top of reconcile.js).
  reconcilerView () {
    const pool = this
    return {
      get handles () { return pool.handles },
      wanted: () => this.wanted(),
      get target () { return pool.target },
      get rollingOut () { return pool.reloading?.rolling ? pool.reloading.codeGeneration : null },
      get reloadBatch () { return pool.options.reloadBatch },
      get maxBooting () { return pool.options.maxBooting },
      addSlot: (slot) => this.addSlot(slot),
      removeSlot: (handle) => { this.handles.delete(handle.slot); this.report.removed(handle) },
      spawn: (handle, now) => this.spawn(handle, now),
      drain: (handle, reason) => this.beginDrain(handle, { reason }),
      replace: (handle, reason) => {
        if (reason === 'reload') this.reloading.draining(handle)
        else this.report.recycling(handle, reason)
        this.beginDrain(handle, { reason })
      },
      retry: (handle, now) => { handle.revive(now); this.report.retrying(handle) }
    }
  }

  addSlot (slot) {
    const handle = new WorkerHandle({
      slot,
      host: this.options.workerHost,
      port: this.portOf(slot),
      policy: this.options,
      signal: this.system.signal,
      onState: (changed, from) => this.announceState(changed, from),
      clock: this.clock
    })
    this.handles.set(slot, handle)
    return handle
  }

  // A snapshot only for someone listening: busy and ready change with the check-ins.
  announceState (handle, from) {
    const event = handle.state === 'busy' ? 'busy' : from === 'busy' && handle.state === 'ready' ? 'idle' : null
    if (event && this.listenerCount(event) > 0) this.emit(event, handle.snapshot())
    if (this.listenerCount('state') > 0) this.emit('state', { ...handle.snapshot(), from })
  }

  // ── processes: forked through SYSTEM, only from the tick ──────────────────────────────────

  spawn (handle, now) {
    let child
    try {
      const { slot, host, port } = handle
      child = this.fork({ slot, host, port }, { handle, who: `worker ${slot}` })
    } catch (err) {
      // fork() throws for some spawn errors (ENOMEM): the slot tries again, the supervisor lives.
      return this.onSpawnError(handle, err, now)
    }
    handle.attach(child, now, { codeGeneration: this.codeGeneration })
    // Without a pid the fork failed; why comes as the child's 'error' (a 'spawn-error' event).
    if (child.pid !== undefined) this.report.spawned(handle, now)
  }

  // The reload's canary: 'booting', or { failed } when fork() threw (a fork that fails later is
  // the canary's own 'spawn-error', and its check says so).
  startCanary (reload, now) {
    const canary = new Canary({ now, bootTimeout: this.options.bootTimeout, signal: this.system.signal })
    try {
      canary.forked(this.fork({ slot: 0, host: this.options.workerHost, port: 0 },
        { canary, who: 'the reload canary' }))
    } catch (err) {
      return { failed: { message: `cannot start a process of the new code: ${err.message}` } }
    }
    reload.canaryStarted(canary)
    this.canaries.add(canary)
    this.logger.info({ event: 'reload-canary', pid: canary.pid }, 'booting the new code once before touching any slot')
    return 'booting'
  }

  // A new process for a slot or a canary, its events routed to the loop (spawn.js watchChild),
  // and a slot's exit to the fronts at once (announceExit). Throws what fork() throws.
  fork ({ slot, host, port }, about) {
    const child = this.system.fork({
      options: this.options,
      logger: this.logger,
      app: this.app,
      workers: this.target,
      slot,
      host,
      port
    })
    const onGone = about.handle ? () => this.announceExit(about.handle, child) : undefined
    watchChild(child, {
      ...about,
      slot,
      captureRemnant: this.system.captureRemnant,
      enqueue: (event) => this.fromWorker(event),
      onGone
    })
    return child
  }

  // ── progress of start and stop ────────────────────────────────────────────────────────────

  checkProgress (now) {
    const handles = this.slots()
    if (this.life.is('starting', 'running')) {
      const wanted = this.wanted()
      const givenUp = wanted.length > 0 && wanted.every((handle) => handle.state === 'given-up')
      if (givenUp) return this.fail(this.bootFailure())
    }
    if (this.life.is('starting') && handles.length >= this.target &&
      handles.every((handle) => handle.ready || handle.state === 'given-up')) {
      const ready = handles.filter((handle) => handle.ready).length
      this.logger.info({ event: 'started', ready, workers: this.target, ms: now - this.startedAt },
        `${ready}/${this.target} workers ready`)
      this.life.running(this)
    }
    this.life.settle()
    if (this.life.is('stopping') && handles.every((handle) => !handle.alive) && this.canaries.size === 0 &&
      this.retirees.size === 0 && this.remnants.size === 0) {
      this.finishStop()
    }
  }

  bootFailure () {
    const handle = this.slots().find((candidate) => candidate.lastError) || {}
    const appError = handle.lastError || { message: 'workers exited before becoming ready' }
    const headline = `the app failed to boot in every slot (${this.target} gave up)`
    return poolError(codes.BOOT_FAILED, `${headline}: ${appError.message}`, { details: { headline, appError } })
  }

  // Fatal for the pool: during start, start() rejects with `err`; later, 'failed' is emitted.
  fail (err) {
    if (!this.life.fail(err)) return
    if (this.life.is('starting')) {
      this.life.rejectStartAfter(this.stop({ timeout: 0 }))
    } else {
      this.logger.fatal({ event: 'failed', code: err.code }, err.message)
      this.emit('failed', err)
      this.stop()
    }
  }

  async finishStop () {
    this.life.end()
    this.disarmTimer()
    this.reaper?.stop() // every process of the pool is gone
    this.releaseDescriptors()
    await this.fronts.stop()
    await this.listeners.stop()
    this.metrics.close()
    const clean = !this.unclean && !this.life.failure
    this.logger.info({ event: 'stopped', clean }, clean ? 'stopped' : 'stopped (not clean)')
    this.emit('stopped', { clean })
    this.life.ended({ clean })
  }
}

// A reload asked while one runs, before it begins: how many callers wait for it, and the promise
// each of them is answered with once it has run (`follow`).
class QueuedReload {
  constructor () {
    this.callers = 0
    this.done = new Promise((resolve, reject) => { this.resolve = resolve; this.reject = reject })
  }

  join () {
    this.callers++
    return this.done
  }

  follow (outcome) { outcome.then(this.resolve, this.reject) }
}

// An event its subject has no handler for: a bug of whoever enqueued it.
function unhandled (event, subject) {
  return new Error(`no handler for a '${event.type}' event about ${subject}`)
}

function plural (n, word) { return `${n} ${word}${n === 1 ? '' : 's'}` }

module.exports = { Pool }
