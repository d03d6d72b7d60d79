'use strict'

// HAProxy as the pool's front (`pool start --balancer haproxy`): HAProxy owns the listener and
// the queue; the pool tells it, over the runtime API, which servers may be given requests.
//
//   worker ready       → set server BE/worker<slot> state ready (and in BE_streams, the
//                        long-lived requests' backend over the same workers, when the config
//                        has one: every state below goes to both)
//   worker exits       → state maint, at once (before the respawn): a dead server has no
//                        sessions, so to HAProxy it is always the free one, and every queued
//                        request would be sent to it, refused and failed
//   graceful stop      → state drain, wait for HAProxy's scur/qcur of that server to reach 0,
//                        then state maint; only then is the worker told to stop
//   HAProxy reloaded   → it forgot all of the above, unless --haproxy-state-file kept it for
//   or restarted         the new process (./state-file.js); the periodic check re-asserts what
//                        differs from the wanted states (./servers.js)
//   HAProxy down       → warn, retry with backoff, keep the workers serving on their ports
//
// This module is the adapter: the hooks the supervisor calls (the Front interface), each told
// to the reconciler (./servers.js), which holds the wanted states and the check; the drain's
// wait (./drain.js), the ports check (./ports.js) and status() (./status.js) are their own.

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
    // verify: the backend, worker1..N and level admin; each failure is a coded one-line error.
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

  // The long-lived requests' backend (`pool config haproxy` writes one), or null when the config
  // has none. It must hold the same servers on the same ports: else it is an error, named.
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

  // Sync and fast: the command goes into this server's own queue (normally empty) and its
  // connection is opened a microtask later, before the event loop turns; nothing else the pool
  // does (checks, drain polls, other servers) can delay it. The call comes from the worker's
  // exit event itself, or before the signal of a kill by the pool; the latency logged is from
  // the call to HAProxy's reply (bench/death-notice.js measures from the SIGKILL).
  workerGone (w) {
    // A retired process left its server long ago: the slot's new process serves there now.
    if (w.retired) return
    const name = nameOf(w)
    // A drained server was set MAINT before its worker was told to stop; if that command
    // failed, the periodic check re-asserts it, since MAINT is what the pool wants.
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

  // DRAIN, then wait until HAProxy holds no session and no queued request for that server.
  // The supervisor bounds the wait with its graceful timeout; a change of plan for the server
  // (it exited: MAINT) or stop() ends the wait too. A stop's drains wait for its announcement.
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

  // A drained worker is told to stop only after this lands. Set after its exit instead, MAINT
  // would leave a moment when the server is still DRAIN but its port refuses connections, and
  // a health check in it marks the server DOWN and logs an outage that is not one.
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

  // The pool stops. An edge that asks the pool's agent (--agent-port) hears `drain` at its next
  // check; until it has had time to (--stop-announce), the servers stay READY and serve what
  // the edge still sends, which DRAIN would leave queued here with no server to take it. Then
  // the stop's drains go on. Nothing watched: nobody to wait for.
  stopping () {
    if (!this.context?.agentAsked?.() || !(this.opts.stopAnnounce > 0)) return
    this.announced = new Promise((resolve) => {
      this.endAnnouncement = resolve
      this.announceTimer = setTimeout(resolve, this.opts.stopAnnounce)
    })
    this.logger.info({ event: 'haproxy-stop-announced', ms: this.opts.stopAnnounce },
      `stopping: the servers stay READY for ${this.opts.stopAnnounce} ms while the agent tells the edge`)
  }

  // Every worker has exited, so every server was set MAINT. Let the last of those commands
  // land before the process exits (each is bounded by --haproxy-timeout), then stop checking.
  async stop () {
    clearTimeout(this.announceTimer)
    this.endAnnouncement?.()
    await this.states.stop(this.opts.haproxyTimeout * 2)
    // With the pool gone, a HAProxy reload must take everything from its config again: every
    // worker `disabled`, and the ports the config says (a state file would carry the old ones
    // over a config that changed them).
    const { stateFile } = this.states
    if (stateFile) await Promise.race([stateFile.remove(), sleep(this.opts.haproxyTimeout * 2)])
  }

  // `pool scale n`: refuse before anything changes when HAProxy has no server for a new slot.
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
      // Requests waiting in HAProxy's backend queue at the last check (HAProxy owns the queue).
      queue: s.queue,
      maintLatency: this.maintLatency.toJSON(),
      stateFile: s.stateFile ? { file: s.stateFile.file, error: s.stateFile.lastError } : null,
      servers
    }
  }
}

module.exports = { HaproxyFront }
