'use strict'

// The supervisor. Event sources (child exits, IPC messages, front callbacks, commands) only
// record what happened and ask for a tick. One `tick()` then handles the recorded events, kills
// what is overdue, and reconciles the live workers with the wanted set. To know what the pool
// does, read `tick` and the handlers it calls; no feature keeps a timer of its own.

const { EventEmitter } = require('node:events')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const msg = require('./messages')
const { WorkerHandle } = require('./worker-handle')
const { RollingReload } = require('./rolling-reload')
const { resolveOptions } = require('./options')
const { createLogger } = require('./logger')
const { NoFront } = require('./front')
const { captureRemnant, Remnants } = require('./process-group')
const { forkWorker } = require('./worker-process')
const { poolError, codes, EXIT } = require('./errors')

const TICK_INTERVAL = 50 // ms: the resolution of every deadline (boot, request, drain, respawn)
const FRONT_START_BOUND = 10000 // ms a stop waits for a front still starting before stopping it

class Pool extends EventEmitter {
  constructor (options = {}) {
    super()
    this.options = resolveOptions(options)
    this.app = resolveApp(this.options.app, this.options.cwd)
    this.logger = this.options.logger || createLogger({ level: this.options.logLevel, format: this.options.logFormat })
    const fronts = [].concat(this.options.fronts ?? this.options.front ?? [])
    this.fronts = fronts.length ? fronts : [new NoFront()]
    this.target = this.options.workers
    this.handles = new Map() // slot → WorkerHandle
    this.canaries = new Set() // reload canaries still running: a stop waits for them too
    this.remnants = new Remnants({ logger: this.logger, killTimeout: this.options.killTimeout })
    this.startedFronts = [] // fronts whose start() resolved: the ones a stop must stop
    this.frontsStarting = null
    this.phase = 'idle' // idle → starting → running → stopping → stopped
    this.events = []
    this.tickScheduled = false
    this.timer = null
    this.bootErrorsSeen = new Map() // app error message → times seen, so a crash loop logs it once
    this.unclean = false // the stop had to signal a worker (set only while stopping)
    this.startedAt = null
    this.reloading = null // the RollingReload in progress
    this.waiters = [] // { done(): boolean, resolve } settled by checkProgress
  }

  // ── public API ────────────────────────────────────────────────────────────────────────────

  // Resolves when every slot is ready or given up and at least one is ready. Rejects when the
  // app cannot boot at all, a worker port is taken, or a front refuses to start.
  async start () {
    if (this.phase !== 'idle') throw poolError(codes.BAD_OPTION, 'pool.start() was already called')
    this.phase = 'starting'
    this.startedAt = Date.now()
    try {
      await this.checkPorts()
      this.assertStillStarting()
      await this.startFronts()
      this.assertStillStarting()
    } catch (err) {
      if (this.phase === 'starting') this.phase = 'stopped'
      throw err
    }
    const started = new Promise((resolve, reject) => { this.startWaiter = { resolve, reject } })
    this.timer = setInterval(() => this.wake(), TICK_INTERVAL)
    this.logger.info({ event: 'starting', app: this.app, workers: this.target, ports: `${this.portOf(1)}-${this.portOf(this.target)}` }, `starting ${this.target} workers of ${this.app}`)
    this.wake()
    return started
  }

  // Graceful: stop giving work, let running requests finish up to `timeout`, then TERM, then
  // KILL. Resolves { clean } where clean is false when this stop had to signal a worker. It
  // resolves once the processes the workers' apps left behind are gone too (process-group.js).
  stop ({ timeout = this.options.gracefulTimeout } = {}) {
    if (this.stopPromise) return this.stopPromise
    if (this.phase === 'idle' || this.phase === 'stopped') return Promise.resolve({ clean: true })
    const wasStarting = this.phase === 'starting'
    this.phase = 'stopping'
    this.stopPromise = new Promise((resolve) => { this.stopWaiter = resolve })
    // A start still in progress ends here, with an answer rather than a promise left hanging.
    if (wasStarting && this.startWaiter && !this.failure) this.startWaiter.reject(poolError(codes.STOPPING, 'the pool was stopped before it finished starting'))
    this.logger.info({ event: 'stopping', timeout }, 'stopping: finishing running requests')
    this.emit('stopping')
    this.reloading?.abort({ message: 'the pool is stopping' }, codes.STOPPING)
    this.eachFront('stopping', (front) => front.stopping?.())
    // A worker already draining (reload, scale-down) keeps its reason, with the stop's deadlines
    // if they come sooner.
    for (const h of this.handles.values()) this.beginDrain(h, { reason: 'stop', timeout })
    this.wake()
    return this.stopPromise
  }

  // Immediate: SIGKILL every worker, and what their apps left running (a second Ctrl-C).
  kill () {
    if (this.phase === 'idle' || this.phase === 'stopped') return this.stop()
    for (const h of this.handles.values()) {
      if (!h.alive) continue
      this.unclean = true
      this.killWorker(h, 'pool-killed')
    }
    for (const c of this.canaries) c.signal('SIGKILL')
    this.remnants.killAll(Date.now())
    return this.stop({ timeout: 0 })
  }

  workers () {
    const now = Date.now()
    return [...this.handles.values()].sort((a, b) => a.slot - b.slot).map((h) => h.snapshot(now))
  }

  // Replace every worker with one running the code now on disk, without failing a request.
  async reload () {
    this.assertRunning('reload')
    if (this.reloading) return Promise.reject(poolError(codes.BUSY, 'a reload is already running'))
    const reload = new RollingReload(this, Date.now())
    this.reloading = reload
    this.logger.info({ event: 'reload', workers: this.target }, `reloading ${this.target} workers`)
    const clear = () => { if (this.reloading === reload) this.reloading = null }
    reload.done.then(clear, clear)
    this.wake()
    return reload.done
  }

  // Grow or shrink the pool. Shrinking drains the highest slots first.
  async scale (n) {
    this.assertRunning('scale')
    if (!Number.isInteger(n) || n < 1) throw poolError(codes.BAD_OPTION, `scale needs a positive integer (got ${JSON.stringify(n)})`)
    const max = this.options.maxWorkers
    if (max > 0 && n > max) throw poolError(codes.BAD_OPTION, `cannot scale to ${n} workers: --max-workers is ${max}`)
    for (const front of this.fronts) await front.checkScale?.(n)
    this.assertRunning('scale') // a stop may have come while a front was checking
    const from = this.target
    this.target = n
    this.logger.info({ event: 'scale', from, to: n }, `scaling from ${from} to ${n} workers`)
    this.wake()
    await this.until(() => {
      if (this.target !== n) return true // a later scale took over; it reports its own outcome
      const slots = [...this.handles.values()]
      return slots.every((h) => h.slot <= n) && slots.length >= n && slots.every((h) => h.ready || h.state === 'given-up')
    })
    if (this.target !== n) throw poolError(codes.BUSY, `scaling to ${n} was superseded by a scale to ${this.target}`)
    return { from, to: n }
  }

  status () {
    const fronts = this.fronts.map((f) => f.status())
    const front = fronts.length === 1 ? fronts[0] : fronts
    const queue = fronts.reduce((sum, f) => sum + (Number(f.queue) || 0), 0)
    return {
      pid: process.pid,
      app: this.app,
      phase: this.phase,
      target: this.target,
      front,
      queue,
      reload: this.reloading ? this.reloading.status() : null,
      workers: this.workers()
    }
  }

  portOf (slot) { return this.options.workerPort + slot - 1 }

  // Wanted slots not serving right now (draining, stopped, booting, waiting to respawn). Reload
  // and recycling start a new replacement only while this is below the batch size, which is
  // what keeps capacity at workers − batch or more.
  unavailableCount () {
    let n = 0
    for (const h of this.handles.values()) {
      if (h.slot <= this.target && !h.ready && h.state !== 'given-up') n++
    }
    return n
  }

  // start() awaits port checks and fronts; a stop() in between wins.
  assertStillStarting () {
    if (this.phase !== 'starting') throw poolError(codes.STOPPING, 'the pool was stopped before it finished starting')
  }

  assertRunning (what) {
    if (this.phase === 'running') return
    const code = this.phase === 'stopping' || this.phase === 'stopped' ? codes.STOPPING : codes.NOT_STARTED
    throw poolError(code, `cannot ${what}: the pool is ${this.phase}`)
  }

  // Resolves once `done()` holds, checked after every tick; rejects if the pool stops first.
  until (done) {
    return new Promise((resolve, reject) => {
      if (this.phase === 'stopped') return reject(poolError(codes.STOPPING, 'the pool stopped'))
      this.waiters.push({ done, resolve, reject })
      this.wake()
    })
  }

  // ── event sources: record and wake ────────────────────────────────────────────────────────

  enqueue (event) {
    this.events.push(event)
    this.wake()
  }

  wake () {
    if (this.tickScheduled) return
    this.tickScheduled = true
    setImmediate(() => this.tick())
  }

  // ── the loop ──────────────────────────────────────────────────────────────────────────────

  tick () {
    this.tickScheduled = false
    const now = Date.now()
    while (this.events.length > 0) this.handleEvent(this.events.shift(), now)
    for (const h of this.handles.values()) this.enforceDeadlines(h, now)
    this.remnants.sweep(now)
    this.reconcile(now)
    if (this.reloading && !this.reloading.finished) this.reloading.advance(now)
    this.recycle()
    this.checkProgress()
  }

  handleEvent (event, now) {
    const h = event.handle
    if (event.remnant) this.remnants.add(event.remnant, { who: h.isCanary ? 'the reload canary' : `worker ${h.slot}`, slot: h.slot, pid: event.child.pid }, now)
    if (h.isCanary) return this.onCanaryEvent(h, event, now)
    // Node may deliver a child's last IPC message after its 'exit': keep its boot error.
    if (event.child !== h.child && event.child === h.previousChild && event.type === 'message' && event.message?.type === msg.BOOT_ERROR) {
      return this.onBootError(h, event.message.error)
    }
    // Events from a process that no longer holds the slot are history, not news.
    if (event.child !== h.child) return
    if (event.type === 'exit') return this.onExit(h, event, now)
    if (event.type === 'released') { if (h.drain) h.drain.released = true; return }
    if (event.type === 'message') return this.onMessage(h, event.message, now)
  }

  // The canary reports to its reload; once that reload is over, its exit still ends it here.
  onCanaryEvent (h, event, now) {
    const lateMessage = event.type === 'message' && event.child === h.previousChild // its boot error, say
    if (event.child !== h.child && !lateMessage) return
    if (event.type === 'exit') {
      h.detach()
      this.canaries.delete(h)
    }
    const reload = this.reloading
    if (reload && reload.canary === h) reload.onCanaryEvent(event, now)
  }

  onMessage (h, m, now) {
    h.lastSeen = now
    switch (m.type) {
      case msg.READY: return this.onReady(h, now)
      case msg.BUSY: return this.onBusy(h, m, now)
      case msg.IDLE: return this.onIdle(h, m)
      case msg.HEARTBEAT: h.rss = m.rss; return
      case msg.QUEUED: h.queued++; return this.emit('queued', { ...h.snapshot(now), waiting: m.waiting })
      case msg.BOOT_ERROR: return this.onBootError(h, m.error)
    }
  }

  onReady (h, now) {
    if (h.state !== 'booting') return
    h.readyAt = now
    h.bootFailures = 0
    h.transition('ready')
    const view = h.snapshot(now)
    this.logger.info({ event: 'ready', slot: h.slot, pid: h.pid, port: h.port, bootMs: now - h.spawnedAt }, `worker ${h.slot} ready`)
    this.eachFront('workerReady', (front) => front.workerReady(view))
    this.emit('ready', view)
  }

  onBusy (h, m, now) {
    h.request = { method: m.method, url: m.url, startedAt: now }
    if (h.state === 'ready') h.transition('busy')
    this.emit('busy', h.snapshot(now))
  }

  onIdle (h, m) {
    h.request = null
    h.requests = m.requests
    h.totalRequests++
    h.rss = m.rss
    if (h.state === 'busy') h.transition('ready')
    this.emit('idle', h.snapshot())
    const o = this.options
    if (h.requests >= h.requestLimit) h.recycleDue = 'max-requests'
    else if (o.maxRss > 0 && m.rss > o.maxRss * 1024 * 1024) h.recycleDue = 'max-rss'
  }

  onBootError (h, error) {
    h.lastError = error
    const seen = this.bootErrorsSeen.get(error.message) || 0
    this.bootErrorsSeen.set(error.message, seen + 1)
    const fields = { event: 'boot-error', slot: h.slot, pid: h.pid, port: h.port, error: error.message }
    // The app's stack once; the crash loop that follows repeats only the short line, at debug.
    if (seen === 0) this.logger.error({ ...fields, stack: error.stack }, `worker ${h.slot} failed to boot: ${error.message}`)
    else this.logger.debug(fields, `worker ${h.slot} failed to boot again (seen ${seen + 1} times)`)
    if (error.code === 'EADDRINUSE' && this.phase === 'starting') {
      this.fail(poolError(codes.PORT_IN_USE, error.message))
    }
  }

  onExit (h, { code, signal }, now) {
    const wasReady = h.readyAt !== null
    const { reason, planned } = h.exitReason(code, signal)
    const draining = h.drain?.reason ?? null
    const pid = h.pid
    h.lastExit = { code, signal, reason, at: now }
    this.announceGone(h)
    h.detach()
    h.request = null
    const view = { ...h.snapshot(now), code, signal, reason }
    const line = { event: 'exit', slot: h.slot, pid, port: h.port, code, signal, reason }
    if (planned) this.logger.info(line, `worker ${h.slot} stopped`)
    else if (draining) this.logger.warn({ ...line, draining }, `worker ${h.slot} exited (${signal || `code ${code}`}, ${reason}) while draining for ${draining}`)
    else this.logger.warn(line, `worker ${h.slot} exited (${signal || `code ${code}`}, ${reason})`)
    this.emit('exit', view)

    // A process that was draining was going away anyway: however it ended (its drain's end, a
    // crash, a kill), its slot goes on as the drain meant: replaced at once (reload, recycling),
    // removed (scale-down) or left dead (stop), with no crash backoff.
    if (this.phase === 'stopping' || this.phase === 'stopped' || draining) {
      h.respawnAt = now
      h.transition('dead')
      return
    }
    if (!wasReady) {
      h.bootFailures++
      this.emit('boot-failed', { ...view, error: h.lastError })
      if (h.bootFailures >= this.options.maxBootFailures) return this.giveUp(h)
    }
    this.scheduleRespawn(h, now, wasReady ? now - h.readyAt : 0)
  }

  scheduleRespawn (h, now, uptime) {
    const o = this.options
    if (uptime >= o.healthyAfter) h.crashes = 0
    h.crashes++
    const delay = Math.min(o.restartDelay * o.restartFactor ** (h.crashes - 1), o.restartMaxDelay)
    h.respawnAt = now + delay
    h.transition('dead')
    this.logger.info({ event: 'respawn-scheduled', slot: h.slot, port: h.port, delay: Math.round(delay), crashes: h.crashes }, `worker ${h.slot} respawns in ${Math.round(delay)} ms`)
  }

  revive (h, now) {
    h.bootFailures = 0
    h.crashes = 0
    h.respawnAt = now
    h.transition('dead')
    this.logger.info({ event: 'revive', slot: h.slot, port: h.port }, `slot ${h.slot} tries again with the new code`)
  }

  giveUp (h) {
    h.transition('given-up')
    const error = h.lastError || { message: `exited ${h.bootFailures} times before becoming ready` }
    this.logger.error({ event: 'give-up', slot: h.slot, port: h.port, failures: h.bootFailures, error: error.message }, `slot ${h.slot} given up after ${h.bootFailures} failed boots in a row`)
    this.emit('give-up', { ...h.snapshot(), error })
  }

  enforceDeadlines (h, now) {
    const o = this.options
    if (!h.alive) return
    if (h.state === 'booting' && h.killReason === null && now - h.spawnedAt > o.bootTimeout) {
      h.lastError = h.lastError || { message: `not ready within ${o.bootTimeout} ms (boot timeout)` }
      this.logger.error({ event: 'boot-timeout', slot: h.slot, pid: h.pid, port: h.port, ms: now - h.spawnedAt }, `worker ${h.slot} not ready within ${o.bootTimeout} ms; killing it`)
      return this.killWorker(h, 'boot-timeout')
    }
    if (h.request && h.killReason === null && now - h.request.startedAt > o.timeout) return this.killHung(h, 'timeout', now)
    // A worker that never became ready is still loading (the boot timeout covers it), even
    // when it is already being drained.
    if (!h.request && h.readyAt !== null && h.killReason === null && now - h.lastSeen > o.heartbeatTimeout) return this.killHung(h, 'heartbeat', now)
    if (h.state === 'ready' && h.crashes > 0 && now - h.readyAt >= o.healthyAfter) h.crashes = 0
    if (h.drain) this.advanceDrain(h, now)
  }

  killHung (h, reason, now) {
    const r = h.request
    const fields = { event: 'hung', reason, slot: h.slot, pid: h.pid, port: h.port }
    if (r) {
      Object.assign(fields, { method: r.method, url: r.url, ms: now - r.startedAt })
      this.logger.error(fields, `worker ${h.slot} (pid ${h.pid}) ran ${r.method} ${r.url} for ${now - r.startedAt} ms (timeout ${this.options.timeout} ms); killing it`)
    } else {
      fields.ms = now - h.lastSeen
      this.logger.error(fields, `worker ${h.slot} (pid ${h.pid}) sent no heartbeat for ${now - h.lastSeen} ms; killing it`)
    }
    this.emit('hung', { ...h.snapshot(now), reason })
    this.killWorker(h, reason)
  }

  // Fronts hear of it before the signal is sent, so no new request races the kill.
  killWorker (h, reason, sig = 'SIGKILL') {
    if (!h.alive) return
    h.killReason = h.killReason || reason
    this.announceGone(h)
    h.signal(sig)
  }

  announceGone (h) {
    if (h.goneAnnounced) return
    h.goneAnnounced = true
    const view = h.snapshot()
    this.eachFront('workerGone', (front) => front.workerGone(view))
  }

  // A front's bug must not stop the supervisor half-way through a change (a worker announced
  // gone but never signalled, say): log it and go on with the other fronts.
  eachFront (hook, call) {
    for (const front of this.fronts) {
      try {
        call(front)
      } catch (err) {
        this.logger.error({ event: 'front-error', front: front.name, hook, error: err.message, stack: err.stack }, `front ${front.name} failed in ${hook}(): ${err.message}`)
      }
    }
  }

  // ── draining: the one path for stop, reload, scale-down and recycling ─────────────────────

  beginDrain (h, { reason, timeout = this.options.gracefulTimeout }) {
    if (!h.alive) return
    const now = Date.now()
    if (!h.startDrain(reason, now, { timeout, killTimeout: this.options.killTimeout })) return
    const wasServing = h.ready
    h.transition('draining')
    const view = h.snapshot(now)
    this.logger.info({ event: 'draining', reason, slot: h.slot, pid: h.pid, port: h.port }, `worker ${h.slot} draining (${reason})`)
    this.emit('draining', { ...view, reason })
    if (!wasServing) { h.drain.released = true; return }
    const child = h.child
    Promise.allSettled(this.fronts.map(async (f) => f.drain(view)))
      .then(() => this.enqueue({ type: 'released', handle: h, child }))
  }

  advanceDrain (h, now) {
    const d = h.drain
    if (d.released && !h.request && !d.stopSent) {
      d.stopSent = true
      h.send(msg.message(msg.STOP))
    }
    if (now >= d.killAt && !d.killSent) {
      d.killSent = true
      this.noteSignalled()
      this.logger.warn({ event: 'kill', slot: h.slot, pid: h.pid }, `worker ${h.slot} still running after SIGTERM; SIGKILL`)
      h.killReason = h.killReason || `${d.reason}-killed`
      h.signal('SIGKILL')
    } else if (now >= d.termAt && !d.termSent) {
      d.termSent = true
      this.noteSignalled()
      this.logger.warn({ event: 'terminate', slot: h.slot, pid: h.pid, request: h.request }, `worker ${h.slot} still busy at the graceful timeout; SIGTERM`)
      this.announceGone(h)
      h.signal('SIGTERM')
    }
  }

  // "Unclean" describes a stop: a reload or recycling that had to signal a worker earlier on
  // does not make the stop that follows unclean.
  noteSignalled () {
    if (this.phase === 'stopping') this.unclean = true
  }

  // ── reconcile: make the live set match the wanted set ─────────────────────────────────────

  // Workers past --max-requests or --max-rss are replaced through the drain path, never
  // mid-request, and no more at once than a reload batch.
  recycle () {
    if (this.phase !== 'running') return
    for (const h of this.handles.values()) {
      // A busy worker may start draining: the drain lets its request finish first. Waiting for
      // an idle moment instead would never come under load, when the next request arrives in
      // the same tick as the end of the last one.
      if (!h.recycleDue || h.drain || !h.ready) continue
      if (this.unavailableCount() >= this.options.reloadBatch) return
      this.logger.info({ event: 'recycle', reason: h.recycleDue, slot: h.slot, pid: h.pid, requests: h.requests, rss: h.rss }, `recycling worker ${h.slot} (${h.recycleDue})`)
      this.beginDrain(h, { reason: h.recycleDue })
    }
  }

  reconcile (now) {
    if (this.phase !== 'starting' && this.phase !== 'running') return
    for (const h of [...this.handles.values()]) {
      if (h.slot <= this.target) continue
      if (h.alive) this.beginDrain(h, { reason: 'scale-down' })
      else this.removeSlot(h)
    }
    for (let slot = 1; slot <= this.target; slot++) {
      let h = this.handles.get(slot)
      if (!h) {
        h = new WorkerHandle({ slot, host: this.options.workerHost, port: this.portOf(slot), onState: (handle, from) => this.emit('state', { ...handle.snapshot(), from }) })
        this.handles.set(slot, h)
      }
      if (h.state === 'dead' && !h.alive && now >= h.respawnAt) this.spawn(h, now)
    }
  }

  removeSlot (h) {
    this.handles.delete(h.slot)
    this.logger.info({ event: 'removed', slot: h.slot, port: h.port }, `slot ${h.slot} removed`)
    this.emit('removed', h.snapshot())
  }

  spawn (h, now) {
    const o = this.options
    let child
    try {
      child = this.forkWorker(h)
    } catch (err) {
      // fork() throws for some spawn errors (ENOMEM): a failed start, not a dead supervisor.
      h.lastError = { message: `cannot start a worker process: ${err.message}`, code: err.code }
      this.logger.error({ event: 'spawn-failed', slot: h.slot, port: h.port, error: err.message }, `worker ${h.slot} could not be started: ${err.message}`)
      if (h.isCanary) { h.lastExit = { code: null, signal: null, at: now }; return }
      h.generation++
      h.bootFailures++
      if (h.bootFailures >= o.maxBootFailures) return this.giveUp(h)
      return this.scheduleRespawn(h, now, 0)
    }
    // Listening before attach(), whose 'state' event runs user code: the exit is heard whatever.
    // What the app sends is checked here, at the door: the loop only sees messages it can use.
    child.on('message', (raw) => {
      const message = msg.parseWorkerMessage(raw)
      if (message) this.enqueue({ type: 'message', handle: h, child, message })
    })
    // The one event source that acts: right at the reap, while the group's number is surely the
    // worker's, what is left of its group gets its SIGTERM (lib/process-group.js).
    child.on('exit', (code, signal) => this.enqueue({ type: 'exit', handle: h, child, code, signal, remnant: captureRemnant(child.pid) }))
    // A fork that failed asynchronously (EAGAIN, EMFILE) emits 'error' and no 'exit'.
    child.on('error', (err) => { if (child.pid === undefined) this.enqueue({ type: 'exit', handle: h, child, code: null, signal: null, error: err }) })
    h.attach(child, now)
    h.requestLimit = o.maxRequests > 0 ? o.maxRequests + Math.floor(Math.random() * (o.maxRequestsJitter + 1)) : Infinity
    if (h.isCanary) {
      this.canaries.add(h)
      return this.logger.info({ event: 'reload-canary', pid: child.pid }, 'booting the new code once before touching any slot')
    }
    this.logger.info({ event: 'spawn', slot: h.slot, pid: child.pid, port: h.port, restarts: h.restarts }, `worker ${h.slot} spawned`)
    this.emit('spawn', h.snapshot(now))
  }

  forkWorker (h) {
    return forkWorker({ options: this.options, app: this.app, workers: this.target, slot: h.slot, host: h.host, port: h.port })
  }

  // ── progress of start and stop ────────────────────────────────────────────────────────────

  checkProgress () {
    const handles = [...this.handles.values()]
    if (this.phase === 'starting' || this.phase === 'running') {
      const wanted = handles.filter((h) => h.slot <= this.target)
      if (wanted.length > 0 && wanted.every((h) => h.state === 'given-up')) return this.fail(this.bootFailure())
    }
    if (this.phase === 'starting') {
      const settled = handles.length >= this.target && handles.every((h) => h.ready || h.state === 'given-up')
      if (settled) {
        this.phase = 'running'
        const ready = handles.filter((h) => h.ready).length
        this.logger.info({ event: 'started', ready, workers: this.target, ms: Date.now() - this.startedAt }, `${ready}/${this.target} workers ready`)
        this.startWaiter.resolve(this)
      }
    }
    for (const w of [...this.waiters]) {
      if (w.done()) { this.waiters.splice(this.waiters.indexOf(w), 1); w.resolve() }
    }
    if (this.phase === 'stopping' && handles.every((h) => !h.alive) && this.canaries.size === 0 && this.remnants.size === 0) this.finishStop()
  }

  bootFailure () {
    const h = [...this.handles.values()].find((x) => x.lastError) || {}
    const appError = h.lastError || { message: 'workers exited before becoming ready' }
    const headline = `the app failed to boot in every slot (${this.target} gave up)`
    return poolError(codes.BOOT_FAILED, `${headline}: ${appError.message}`, { exitCode: EXIT.FAILURE, details: { headline, appError } })
  }

  // Fatal for the pool: during start, start() rejects with `err`; later, 'failed' is emitted.
  fail (err) {
    if (this.failure) return
    this.failure = err
    if (this.phase === 'starting') {
      const waiter = this.startWaiter
      this.stop({ timeout: 0 }).then(() => waiter.reject(err))
    } else {
      this.logger.fatal({ event: 'failed', code: err.code }, err.message)
      this.emit('failed', err)
      this.stop()
    }
  }

  async finishStop () {
    this.phase = 'stopped'
    clearInterval(this.timer)
    for (const w of this.waiters.splice(0)) w.reject(poolError(codes.STOPPING, 'the pool stopped'))
    await this.stopFronts()
    const clean = !this.unclean && !this.failure
    this.logger.info({ event: 'stopped', clean }, clean ? 'stopped' : 'stopped (not clean)')
    this.emit('stopped', { clean })
    this.stopWaiter({ clean })
  }

  // ── start-up checks ───────────────────────────────────────────────────────────────────────

  async checkPorts () {
    for (let slot = 1; slot <= this.target; slot++) {
      const port = this.portOf(slot)
      const err = await bindError(port, this.options.workerHost)
      if (err === 'EADDRINUSE') throw poolError(codes.PORT_IN_USE, `port ${port} (slot ${slot}) is already in use on ${this.options.workerHost}`)
      if (err) throw poolError(codes.PORT_IN_USE, `cannot listen on ${this.options.workerHost}:${port} (slot ${slot}): ${err}`)
    }
  }

  // One front after the other; a stop arriving meanwhile lets the front being started finish
  // starting (stopFronts waits for it) and starts no more.
  async startFronts () {
    this.frontsStarting = (async () => {
      for (const front of this.fronts) {
        if (this.phase !== 'starting') return
        await front.start(this)
        this.startedFronts.push(front)
      }
    })()
    try {
      await this.frontsStarting
    } catch (err) {
      await this.stopFronts()
      throw err
    }
  }

  // Stops each started front once. A front still starting is waited for first, or it would
  // open its listener after its stop() and keep it (bounded: a start that never settles must
  // not keep the pool from stopping).
  async stopFronts () {
    if (this.frontsStarting) await settledWithin(this.frontsStarting, FRONT_START_BOUND)
    const fronts = this.startedFronts.splice(0)
    await Promise.allSettled(fronts.map(async (f) => f.stop()))
  }
}

function settledWithin (promise, ms) {
  let timer
  const bound = new Promise((resolve) => { timer = setTimeout(resolve, ms) })
  return Promise.race([promise.then(() => {}, () => {}), bound]).finally(() => clearTimeout(timer))
}

function resolveApp (app, cwd = process.cwd()) {
  if (typeof app !== 'string' || app === '') throw poolError(codes.APP_NOT_FOUND, 'no app given: pass the path of the app module (options.app)')
  const file = path.resolve(cwd, app)
  try {
    return require.resolve(file)
  } catch {
    const hint = fs.existsSync(file) ? ' (it exists but cannot be resolved as a module)' : ''
    throw poolError(codes.APP_NOT_FOUND, `cannot find app '${app}' (looked for ${file})${hint}`)
  }
}

function bindError (port, host) {
  return new Promise((resolve) => {
    const server = net.createServer()
    server.once('error', (err) => resolve(err.code || err.message))
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(null)))
  })
}

module.exports = { Pool }
