'use strict'

// HAProxy as the front (`--balancer haproxy`): HAProxy owns the listener and the queue; the pool sets server
// states over the runtime API (each also in BE_streams, the long-lived requests' backend, when configured):
//   worker ready → READY; exits → MAINT at once (a dead server looks free to HAProxy, so the queue would go to it)
//   graceful stop → DRAIN, wait for scur/qcur 0, MAINT, then the worker is told to stop
//   HAProxy reloaded → --haproxy-state-file (./state-file.js) and the periodic check (./servers.js) restore them
//   HAProxy down → warn, retry with backoff, workers keep serving on their ports
// The Front adapter; the wanted states and the check are ./servers.js's.

const { performance } = require('node:perf_hooks')
const { serverName, slotOfServer, streamsBackend } = require('../../haproxy/names')
const { ServerStates } = require('./servers')
const { untilDrained, sleep } = require('./drain')
const { checkServerPorts } = require('./ports')
const { describeServers } = require('./status')
const { Latency } = require('./latency')
const { addHaproxyMetrics } = require('./metrics')
const { codes } = require('../../errors')

const NO_LOGGER = { trace () {}, debug () {}, info () {}, warn () {}, error () {}, fatal () {} }

function nameOf (w) {
  return w.name ?? serverName(w.slot)
}

function serverNames (n) {
  return Array.from({ length: n }, (_, i) => serverName(i + 1))
}

function round (ms) {
  return Math.round(ms * 100) / 100
}

class HaproxyFront {
  // `opts`: resolved (./options.js).
  constructor (opts, { logger } = {}) {
    this.name = 'haproxy'
    this.opts = opts
    this.socket = opts.haproxySocket
    this.backend = opts.haproxyBackend
    this.logger = logger ?? NO_LOGGER
    this.states = new ServerStates({
      socket: this.socket,
      backend: this.backend,
      timeout: opts.haproxyTimeout,
      checkInterval: opts.haproxyCheckInterval,
      stateFile: opts.haproxyStateFile,
      logger: this.logger
    })
    this.maintLatency = new Latency()
    this.context = null
  }

  async start (context) {
    this.context = context ?? null // the pool's FrontContext
    if (context?.metrics) addHaproxyMetrics(this.states, context.metrics.registry)
    const n = this.opts.workers ?? context?.target()
    const { reader } = this.states
    // The backend, worker1..N and level admin; each failure a coded one-line error.
    await reader.verify(this.backend, serverNames(n))
    const state = await reader.serversState(this.backend)
    const info = await reader.info()
    const owned = Object.keys(state).filter((name) => slotOfServer(name) !== null)
    this.checkPorts(state, owned, n)
    const streams = await this.streamsBackendOf(owned)
    this.states.mirror(streams ? [streams] : [])
    await this.states.takeOver(owned, info)
    const also = streams ? ` and ${streams} (its long-lived requests)` : ''
    this.logger.info({
      event: 'haproxy-connected',
      socket: this.socket,
      backend: this.backend,
      streamsBackend: streams,
      servers: owned.length,
      haproxyPid: info.Pid,
      version: info.Version
    },
      `HAProxy ${info.Version} (pid ${info.Pid}): driving ${this.backend}/worker1..worker${n}${also} ` +
        `over ${this.socket}`)
  }

  // The long-lived requests' backend, or null; it must hold the same servers on the same ports.
  async streamsBackendOf (owned) {
    const name = streamsBackend(this.backend)
    let state
    try {
      state = await this.states.reader.serversState(name)
    } catch (err) {
      if (err.code === codes.HAPROXY_NO_BACKEND) return null
      throw err
    }
    this.checkPorts(state, owned, owned.length)
    return name
  }

  workerReady (w) {
    const name = nameOf(w)
    const startedAt = performance.now()
    this.states.want(name, 'ready').then((r) => {
      if (r.ok) {
        this.logger.debug({
          event: 'haproxy-ready',
          server: name,
          slot: w.slot,
          pid: w.pid,
          ms: round(performance.now() - startedAt)
        }, `${this.backend}/${name} READY`)
      }
    })
  }

  // Sync: the command goes to this server's own queue, connected a microtask later, so nothing else the pool
  // does can delay it. Latency logged: call to HAProxy's reply (bench/death-notice.js: from the SIGKILL).
  workerGone (w) {
    // A retired process left its server long ago: the slot's new process serves there.
    if (w.retired) return
    const name = nameOf(w)
    // Already MAINT after its drain (if that failed, the check re-asserts it).
    if (this.states.record(name).wanted === 'maint') return
    const startedAt = performance.now()
    this.states.want(name, 'maint').then((r) => {
      if (!r.ok) return
      const ms = round(performance.now() - startedAt)
      this.maintLatency.record(ms)
      this.logger.debug({ event: 'haproxy-maint', server: name, slot: w.slot, pid: w.pid, ms },
        `${this.backend}/${name} MAINT ${ms} ms after the worker was gone`)
    })
  }

  // DRAIN, then wait for no session nor queued request; bounded by the pool's graceful timeout, ended by a MAINT
  // or stop(). A stop's drains wait for its announcement.
  async drain (w) {
    if (this.announced) await this.announced
    const name = nameOf(w)
    const rec = this.states.record(name)
    const sent = this.states.want(name, 'drain')
    const version = rec.version // before the await: a MAINT that follows must end the wait
    // HAProxy unreachable: it cannot be sending this worker anything we could wait for.
    if (!(await sent).ok) return
    const startedAt = performance.now()
    const drained = await untilDrained({
      reader: this.states.reader,
      backend: this.backend,
      name,
      current: () => !this.states.stopped && rec.version === version,
      onError: (err) => this.states.failed(err, { server: name, during: 'drain' })
    })
    if (!drained) return
    this.logger.debug({
      event: 'haproxy-drained',
      server: name,
      slot: w.slot,
      ms: round(performance.now() - startedAt)
    }, `${this.backend}/${name} drained`)
    await this.maintAfterDrain(name, w)
  }

  // Before the worker stops: a DRAIN server whose port refuses would fail a health check, a false outage.
  async maintAfterDrain (name, w) {
    const startedAt = performance.now()
    const r = await this.states.want(name, 'maint')
    if (r.ok) {
      this.logger.debug({
        event: 'haproxy-maint',
        server: name,
        slot: w.slot,
        pid: w.pid,
        ms: round(performance.now() - startedAt),
        reason: 'drained'
      }, `${this.backend}/${name} MAINT: drained, its worker stops next`)
    }
  }

  // If an edge asks the agent (--agent-port), servers stay READY --stop-announce ms while it hears `drain`:
  // DRAIN would strand what the edge still sends in HAProxy's queue.
  stopping () {
    if (!this.context?.agentAsked?.() || !(this.opts.stopAnnounce > 0)) return
    this.announced = new Promise((resolve) => {
      this.endAnnouncement = resolve
      this.announceTimer = setTimeout(resolve, this.opts.stopAnnounce)
    })
    this.logger.info({ event: 'haproxy-stop-announced', ms: this.opts.stopAnnounce },
      `stopping: the servers stay READY for ${this.opts.stopAnnounce} ms while the agent tells the edge`)
  }

  // Every server is MAINT by now: let the last commands land (each bounded by --haproxy-timeout).
  async stop () {
    clearTimeout(this.announceTimer)
    this.endAnnouncement?.()
    await this.states.stop(this.opts.haproxyTimeout * 2)
    // A later HAProxy reload must take states and ports from its config again.
    const { stateFile } = this.states
    if (stateFile) await Promise.race([stateFile.remove(), sleep(this.opts.haproxyTimeout * 2)])
  }

  async checkScale (n) {
    const { reader } = this.states
    const state = await reader.verify(this.backend, serverNames(n)).then(() => reader.serversState(this.backend))
    this.checkPorts(state, serverNames(n), n)
  }

  checkPorts (state, names, workers) {
    const portOf = this.context?.portOf
    if (!portOf) return
    checkServerPorts(state, names, { backend: this.backend, portOf, workers, stateFile: this.states.stateFile })
  }

  status () {
    const s = this.states
    const servers = s.snapshot()
    const known = {
      backend: this.backend,
      socket: this.socket,
      reachable: s.reachable,
      lastError: s.lastError,
      haproxyPid: s.haproxy?.pid ?? null,
      queue: s.queue
    }
    return {
      type: 'haproxy',
      ...describeServers(servers, known),
      socket: this.socket,
      backend: this.backend,
      reachable: s.reachable,
      lastError: s.lastError,
      haproxyPid: known.haproxyPid,
      checkedAt: s.checkedAt,
      // HAProxy's backend queue at the last check.
      queue: s.queue,
      maintLatency: this.maintLatency.toJSON(),
      stateFile: s.stateFile ? { file: s.stateFile.file, error: s.stateFile.lastError } : null,
      servers
    }
  }
}

module.exports = { HaproxyFront }
