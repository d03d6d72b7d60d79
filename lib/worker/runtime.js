'use strict'

// A worker's life under a pool: boot the app, serve it on the slot's port, leave when told or orphaned. The
// worker only reports; the supervisor decides (a blocked loop cannot). Holds the state and ties the parts.

const msg = require('../protocol/messages')
const { readEnvironment, forgetRuntimeVariables } = require('./environment')
const { SupervisorLink } = require('./link')
const { loadModule, awaitListen, forbidCluster } = require('./load')
const { SlotServer } = require('./slot-server')
const { isServable, isThenable, unwrapDefault } = require('./servable')
const draining = require('./draining')
const { appListens, reraise } = require('./signals')
const exit = require('./exit')

// The runtime lives on globalThis so that an app requiring its own copy of `pool` (say, from its
// own node_modules) still finds the runtime that forked it: that copy's listen() calls serve().
const RUNTIME_KEY = Symbol.for('pool.worker.runtime')

class WorkerRuntime {
  constructor (env = process.env) {
    this.env = readEnvironment(env)
    this.booted = false
    this.failed = false
    this.stopping = false
    this.exiting = false
    this.terminating = false // a SIGTERM is saying goodbye to the tunnels
    this.onTerm = () => this.terminated()
    this.log = null // made when first needed (the logger)
    this.onBootFailure = (err) => this.failBoot(err)
    const logger = () => this.logger
    this.link = new SupervisorLink({
      heartbeatInterval: this.env.heartbeatInterval,
      activeInterval: this.env.activeInterval,
      logger
    })
    this.slotServer = new SlotServer({
      slot: this.env.slot,
      port: this.env.port,
      host: this.env.host,
      concurrency: this.env.concurrency,
      limits: this.env.requestLimits,
      link: this.link,
      logger,
      failBoot: this.onBootFailure,
      booted: () => this.booted,
      stopping: () => this.stopping,
      onReady: (port) => this.becomeReady(port),
      onDrained: () => this.exit(),
      onTunnels: (open) => this.watchTerm(open)
    })
  }

  // JSON lines through process.stdout, console.log's queue, so they never land inside the app's lines.
  // Made at the first line: pino would cost each worker some 7 MB.
  get logger () {
    this.log ??= require('../shared/logger').createLogger({
      level: this.env.logLevel,
      format: 'json',
      base: { pid: process.pid, slot: this.env.slot, port: this.slotServer.port },
      destination: process.stdout
    })
    return this.log
  }

  install () {
    globalThis[RUNTIME_KEY] = this
    draining.underPool()
    this.link.open({
      onStop: (reason) => this.stop(reason),
      onWatch: (id) => this.slotServer.watch(id),
      onGone: () => this.orphaned(),
      beforeCheckIn: () => this.slotServer.checkListener(),
      counts: () => this.slotServer.counts()
    })
    forgetRuntimeVariables() // after the link has read its own
    forbidCluster({ workers: this.env.workers, booting: () => !this.booted, failBoot: this.onBootFailure })
    exit.prepareForExit({ supervisorGone: () => exit.parentGone(this.env.supervisorPid) })
    // Until the worker is ready, any throw is a failed boot the supervisor must hear about.
    process.on('uncaughtException', this.onBootFailure)
    process.on('unhandledRejection', this.onBootFailure)
    this.slotServer.intercept()
  }

  async boot (appPath) {
    this.install()
    const claimed = () => this.slotServer.claimed
    let exported
    try {
      if (this.slotServer.port === 0) await this.slotServer.pickPort()
      exported = await loadModule(appPath)
    } catch (err) {
      return this.failBoot(err)
    }
    if (claimed()) return // the app listened while loading: through pool's listen(), or on PORT itself
    let app = unwrapDefault(exported)
    if (!isServable(app) && isThenable(app)) app = unwrapDefault(await app) // a promise of an app
    if (claimed()) return
    if (isServable(app)) return this.serve(app)
    awaitListen(app,
      { link: this.link, claimed, failBoot: this.onBootFailure, hint: () => this.slotServer.hintWaiting() })
  }

  serve (target) {
    return this.slotServer.serve(target)
  }

  // Until the supervisor has been told, a throw (in the app's listen() callback, say) is still a
  // failed boot, reported with its stack, not a crash the supervisor hears nothing about.
  becomeReady (port) {
    this.booted = true
    process.off('uncaughtException', this.onBootFailure)
    process.off('unhandledRejection', this.onBootFailure)
    this.link.send(msg.READY, { port, rss: process.memoryUsage.rss() })
  }

  failBoot (err) {
    if (this.failed) return
    this.failed = true
    const error = msg.serializeError(err)
    if (err && err.code === 'EADDRINUSE') error.message = this.slotServer.describePortInUse(err)
    const leave = () => exit.exitAfterOutput(1)
    if (!this.link.send(msg.BOOT_ERROR, { error }, leave)) return leave()
    setTimeout(() => process.exit(1), 1000 + exit.OUTPUT_WAIT).unref()
  }

  // Finish what is running and queued, and the tunnels, then leave. New connections are refused
  // from now on, and the app hears it drains (`reason`: the drain's, as the supervisor says it).
  stop (reason = null) {
    if (this.stopping) return
    this.stopping = true
    if (this.slotServer.server) this.slotServer.stopListening()
    const why = reason ? ` (${reason})` : ''
    draining.drain(reason ?? 'stop', `the pool is draining this worker${why}: finish, and close long-lived connections`)
    if (!this.slotServer.busy) this.exit()
  }

  // The drain is over: leave, the app's processes first (tunnels still open, its supervisor gone:
  // their goodbye before).
  exit () {
    if (this.exiting) return
    this.exiting = true
    this.slotServer.closeAll()
    const leave = () => exit.leave({ grace: this.env.killTimeout, logger: () => this.logger })
    this.slotServer.tunnels.goodbye().then(leave)
  }

  // Only while tunnels are open does a SIGTERM say goodbye first: a worker without any still dies
  // by it at once, even with its loop stuck.
  watchTerm (open) {
    const listening = process.listeners('SIGTERM').includes(this.onTerm)
    if (open > 0 && !listening) process.on('SIGTERM', this.onTerm)
    else if (open === 0 && listening && !this.terminating) process.off('SIGTERM', this.onTerm)
  }

  // The goodbye; then, without a SIGTERM listener of the app's, the worker dies by SIGTERM as it
  // would have (the drain's end to the supervisor); with one, that listener decides.
  terminated () {
    if (this.terminating) return
    this.terminating = true
    const said = this.slotServer.tunnels.goodbye()
    if (!appListens('SIGTERM')) said.then(() => reraise('SIGTERM', this.onTerm))
  }

  // The supervisor died without stopping us: the port and running requests go at once, then the worker
  // leaves as after a drain (the pool's reaper, doing the same, ends this process too).
  orphaned () {
    this.stopping = true
    this.slotServer.close()
    draining.drain('supervisor-gone', 'the pool that ran this worker is gone')
    this.exit()
  }
}

function currentRuntime () {
  return globalThis[RUNTIME_KEY] || null
}

module.exports = { WorkerRuntime, currentRuntime }
