'use strict'

// HAProxy as the pool's front (`pool start --balancer haproxy`): HAProxy owns the listener and
// the queue; the pool tells it, over the runtime API, which servers may be given requests.
//
//   worker ready       → set server BE/worker<slot> state ready
//   worker exits       → state maint, at once (before the respawn): a dead server has no
//                        sessions, so to HAProxy it is always the free one, and every queued
//                        request would be sent to it, refused and failed
//   graceful stop      → state drain, wait for HAProxy's scur/qcur of that server to reach 0,
//                        then state maint; only then is the worker told to stop
//   HAProxy reloaded   → it forgot all of the above, unless --haproxy-state-file kept it for
//   or restarted         the new process (./state-file.js); a periodic check (`show info`,
//                        `show servers state`, `show stat`) re-asserts what differs from the
//                        wanted states, and notes HAProxy's queue for status()
//   HAProxy down       → warn, retry with backoff, keep the workers serving on their ports
//
// Commands for one server go through a queue of their own (one HaproxyClient per server), so
// `ready` then `maint` always land in that order, and a MAINT never waits behind a slow
// `show stat` or another server's command. Reads (checks, drain polls) share one more client.

const { performance } = require('node:perf_hooks')
const { HaproxyClient } = require('../../haproxy/client')
const { StateFile } = require('./state-file')
const { addHaproxyMetrics } = require('./metrics')
const { resolveHaproxyFrontOptions } = require('./options')
const { poolError, codes } = require('../../errors')

const WORKER_SERVER = /^worker([1-9]\d*)$/
const DRAIN_POLL_INTERVAL = 50 // ms between two `show stat` while waiting for a drain
const RETRY_FIRST = 250 // ms: first retry after HAProxy could not be reached, doubling...
const RETRY_MAX = 5000 // ...up to this (or the check interval, if longer)
const REPEAT_WARNING_AFTER = 30000 // the same warning is logged again at most this often
// Errors that mean the socket itself did not answer, as opposed to HAProxy refusing something.
const UNREACHABLE = new Set([codes.HAPROXY_SOCKET, codes.HAPROXY_PERMISSION])

const NO_LOGGER = { trace () {}, debug () {}, info () {}, warn () {}, error () {}, fatal () {} }

function serverName (w) {
  return w.name ?? `worker${w.slot}`
}

function workerNames (n) {
  return Array.from({ length: n }, (_, i) => `worker${i + 1}`)
}

function sleep (ms) {
  return new Promise((resolve) => setTimeout(resolve, ms).unref())
}

function round (ms) {
  return Math.round(ms * 100) / 100
}

class HaproxyFront {
  constructor (opts, { logger } = {}) {
    this.name = 'haproxy'
    this.opts = opts
    this.socket = opts.haproxySocket
    this.backend = opts.haproxyBackend
    this.logger = logger ?? NO_LOGGER
    this.reader = this._client()
    this.channels = new Map() // server name → HaproxyClient: that server's ordered `set server` queue
    this.servers = new Map() // server name → ServerRecord (see _record)
    this.inFlight = new Set() // pending `set server` promises, awaited by stop()
    this.reachable = false
    this.lastError = null
    this.haproxy = null // { pid, startTime, version } of the HAProxy last seen
    this.checkedAt = null
    this.queue = 0
    this.failures = 0 // consecutive failed checks or commands: the retry backoff
    this.unreachableSince = null
    this.lastWarning = { message: null, at: 0 }
    this.maintLatency = { count: 0, lastMs: null, maxMs: null }
    this.timer = null
    this.nextCheckAt = null
    this.checking = false
    this.stopped = false
    // Optional: HAProxy's state dump kept on disk for its next reload (./state-file.js).
    this.stateFile = opts.haproxyStateFile
      ? new StateFile({ file: opts.haproxyStateFile, read: () => this.reader.command(`show servers state ${this.backend}`), logger: this.logger })
      : null
  }

  // ── Front interface (lib/fronts/front.js) ──────────────────────────────────────────────────────

  async start (context) {
    this.context = context ?? null // the pool's FrontContext (lib/fronts/front.js)
    if (context?.metrics) addHaproxyMetrics(this, context.metrics.registry)
    const n = this.opts.workers ?? context?.target()
    // verify: the backend, worker1..N and level admin; each failure is a coded one-line error.
    await this.reader.verify(this.backend, workerNames(n))
    const state = await this.reader.serversState(this.backend)
    const info = await this.reader.info()
    const owned = Object.keys(state).filter((name) => WORKER_SERVER.test(name))
    this._checkPorts(state, owned, n)
    // Before anything changes in HAProxy: a file the pool cannot write is bad input.
    if (this.stateFile) await this.stateFile.saveOrThrow()
    // Every worker<k> server of the backend belongs to the pool: MAINT until its worker says
    // ready. The config starts them `disabled`, but a previous pool may have left some READY.
    await Promise.all(owned.map((name) => this._channel(name).setServerState(this.backend, name, 'maint')))
    const now = performance.now()
    for (const name of owned) Object.assign(this._record(name), { wanted: 'maint', appliedAt: now, seen: 'maint' })
    if (this.stateFile) this.stateFile.changed()
    this.haproxy = { pid: info.Pid, startTime: info.Start_time_sec, version: info.Version }
    this.reachable = true
    this.checkedAt = Date.now()
    this.logger.info({ event: 'haproxy-connected', socket: this.socket, backend: this.backend, servers: owned.length, haproxyPid: info.Pid, version: info.Version },
      `HAProxy ${info.Version} (pid ${info.Pid}): driving ${this.backend}/worker1..worker${n} over ${this.socket}`)
    this._schedule(this.opts.haproxyCheckInterval)
  }

  workerReady (w) {
    const name = serverName(w)
    const startedAt = performance.now()
    this._want(name, 'ready').then((r) => {
      if (r.ok) this.logger.debug({ event: 'haproxy-ready', server: name, slot: w.slot, pid: w.pid, ms: round(performance.now() - startedAt) }, `${this.backend}/${name} READY`)
    })
  }

  // Sync and fast: the command goes into this server's own queue (normally empty) and its
  // connection is opened a microtask later, before the event loop turns; nothing else the pool
  // does (checks, drain polls, other servers) can delay it. The call comes from the worker's
  // exit event itself, or before the signal of a kill by the pool; the latency logged is from
  // the call to HAProxy's reply (bench/death-notice.js measures from the SIGKILL).
  workerGone (w) {
    const name = serverName(w)
    // A drained server was set MAINT before its worker was told to stop; if that command
    // failed, the periodic check re-asserts it, since MAINT is what the pool wants.
    if (this._record(name).wanted === 'maint') return
    const startedAt = performance.now()
    this._want(name, 'maint').then((r) => {
      if (!r.ok) return
      const ms = round(performance.now() - startedAt)
      const m = this.maintLatency
      m.count++
      m.lastMs = ms
      m.maxMs = Math.max(m.maxMs ?? 0, ms)
      this.logger.debug({ event: 'haproxy-maint', server: name, slot: w.slot, pid: w.pid, ms }, `${this.backend}/${name} MAINT ${ms} ms after the worker was gone`)
    })
  }

  // DRAIN, then wait until HAProxy holds no session and no queued request for that server.
  // The supervisor bounds the wait with its graceful timeout; a change of plan for the server
  // (it exited: MAINT) or stop() ends the wait too. A stop's drains wait for its announcement.
  async drain (w) {
    if (this.announced) await this.announced
    const name = serverName(w)
    const rec = this._record(name)
    const sent = this._want(name, 'drain')
    const version = rec.version // before the await: a MAINT that follows must end the wait
    // HAProxy unreachable: it cannot be sending this worker anything we could wait for.
    if (!(await sent).ok) return
    const startedAt = performance.now()
    while (!this.stopped && rec.version === version) {
      let row
      try {
        row = (await this.reader.servers(this.backend))[name]
      } catch (err) {
        this._failed(err, { server: name, during: 'drain' })
        return
      }
      // The plan may have changed while `show stat` was on its way (the worker exited, MAINT;
      // and its replacement may already be READY): this answer is no longer about this drain.
      if (this.stopped || rec.version !== version) return
      if (!row || (row.scur === 0 && !row.qcur)) {
        this.logger.debug({ event: 'haproxy-drained', server: name, slot: w.slot, ms: round(performance.now() - startedAt) }, `${this.backend}/${name} drained`)
        await this._maintAfterDrain(name, w)
        return
      }
      await sleep(DRAIN_POLL_INTERVAL)
    }
  }

  // A drained worker is told to stop only after this lands. Set after its exit instead, MAINT
  // would leave a moment when the server is still DRAIN but its port refuses connections, and
  // a health check in it marks the server DOWN and logs an outage that is not one.
  async _maintAfterDrain (name, w) {
    const startedAt = performance.now()
    const r = await this._want(name, 'maint')
    if (r.ok) this.logger.debug({ event: 'haproxy-maint', server: name, slot: w.slot, pid: w.pid, ms: round(performance.now() - startedAt), reason: 'drained' }, `${this.backend}/${name} MAINT: drained, its worker stops next`)
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
    this.logger.info({ event: 'haproxy-stop-announced', ms: this.opts.stopAnnounce }, `stopping: the servers stay READY for ${this.opts.stopAnnounce} ms while the agent tells the edge`)
  }

  // Every worker has exited, so every server was set MAINT. Let the last of those commands
  // land before the process exits (each is bounded by --haproxy-timeout), then stop checking.
  async stop () {
    this.stopped = true
    clearTimeout(this.timer)
    clearTimeout(this.announceTimer)
    this.endAnnouncement?.()
    const settled = Promise.allSettled([...this.inFlight])
    await Promise.race([settled, sleep(this.opts.haproxyTimeout * 2)])
    // With the pool gone, a HAProxy reload must take everything from its config again: every
    // worker `disabled`, and the ports the config says (a state file would carry the old ones
    // over a config that changed them).
    if (this.stateFile) await Promise.race([this.stateFile.remove(), sleep(this.opts.haproxyTimeout * 2)])
  }

  // `pool scale n`: refuse before anything changes when HAProxy has no server for a new slot.
  async checkScale (n) {
    const state = await this.reader.verify(this.backend, workerNames(n)).then(() => this.reader.serversState(this.backend))
    this._checkPorts(state, workerNames(n), n)
  }

  status () {
    const servers = {}
    const names = [...this.servers.keys()].sort((a, b) => slotOf(a) - slotOf(b))
    for (const name of names) {
      const rec = this.servers.get(name)
      servers[name] = { wanted: rec.wanted, seen: rec.seen, up: rec.op === null ? null : rec.op === 'running', sessions: rec.sessions ?? null }
    }
    return {
      type: 'haproxy',
      ...describeServers(servers, this),
      socket: this.socket,
      backend: this.backend,
      reachable: this.reachable,
      lastError: this.lastError,
      haproxyPid: this.haproxy?.pid ?? null,
      checkedAt: this.checkedAt,
      // Requests waiting in HAProxy's backend queue at the last check (HAProxy owns the queue).
      queue: this.queue,
      maintLatency: { ...this.maintLatency },
      stateFile: this.stateFile ? { file: this.stateFile.file, error: this.stateFile.lastError } : null,
      servers
    }
  }

  // ── wanted state and the commands that assert it ───────────────────────────────────────────

  _client () {
    return new HaproxyClient({ socket: this.socket, timeout: this.opts.haproxyTimeout })
  }

  _channel (name) {
    let channel = this.channels.get(name)
    if (!channel) this.channels.set(name, (channel = this._client()))
    return channel
  }

  // What the pool knows of one server:
  //   wanted     'ready' | 'drain' | 'maint': what the pool asked for last
  //   version    bumped at each change of `wanted` (a drain wait ends when it moves on)
  //   pending    `set server` commands not answered yet
  //   appliedAt  when HAProxy last confirmed one (performance.now())
  //   seen, op   admin and operational state in HAProxy's last `show servers state`
  _record (name) {
    let rec = this.servers.get(name)
    if (!rec) this.servers.set(name, (rec = { wanted: 'maint', version: 0, pending: 0, appliedAt: -Infinity, seen: null, op: null }))
    return rec
  }

  _want (name, state) {
    const rec = this._record(name)
    rec.wanted = state
    rec.version++
    return this._send(name, state)
  }

  // Resolves { ok } and never rejects: a failure is logged and retried by the checks.
  _send (name, state) {
    const rec = this._record(name)
    rec.pending++
    const sent = this._channel(name).setServerState(this.backend, name, state).then(
      () => {
        rec.pending--
        rec.appliedAt = performance.now()
        if (this.stateFile) this.stateFile.changed()
        // After failures, a command that passes means HAProxy is back: check (and re-assert
        // the others) now rather than at the next backoff step.
        if (this.failures > 0 && !this.checking) this._schedule(0)
        return { ok: true }
      },
      (err) => {
        rec.pending--
        // HAProxy did not take this state, so a file of the states it holds may be wrong now.
        if (this.stateFile) this.stateFile.invalidate()
        this._failed(err, { server: name, state })
        return { ok: false, error: err }
      })
    this.inFlight.add(sent)
    sent.then(() => this.inFlight.delete(sent))
    return sent
  }

  // ── the periodic check: reachability, restarts, drift ──────────────────────────────────────

  _schedule (delay) {
    if (this.stopped) return
    clearTimeout(this.timer)
    this.nextCheckAt = Date.now() + delay
    this.timer = setTimeout(() => { this.nextCheckAt = null; this._check() }, delay)
    this.timer.unref()
  }

  _retryDelay () {
    const max = Math.max(RETRY_MAX, this.opts.haproxyCheckInterval)
    return Math.min(RETRY_FIRST * 2 ** Math.max(0, this.failures - 1), max)
  }

  async _check () {
    if (this.stopped || this.checking) return
    this.checking = true
    // Only commands answered before this read began can be compared with what it returns.
    const readStartedAt = performance.now()
    try {
      const info = await this.reader.info()
      const state = await this.reader.serversState(this.backend)
      const stat = await this.reader.showStat(this.backend)
      this._reached(info)
      this._reassert(state, readStartedAt)
      this._noteLoad(stat)
      this.checkedAt = Date.now()
    } catch (err) {
      this._failed(err, { during: 'check' })
    } finally {
      this.checking = false
      this._schedule(this.failures > 0 ? this._retryDelay() : this.opts.haproxyCheckInterval)
    }
  }

  // HAProxy answered: note a return after failures, and a restart or reload (new pid or start
  // time), which forgets every runtime state.
  _reached (info) {
    const before = this.haproxy
    const now = { pid: info.Pid, startTime: info.Start_time_sec, version: info.Version }
    this.haproxy = now
    if (this.failures > 0) {
      const downMs = this.unreachableSince === null ? undefined : Date.now() - this.unreachableSince
      this.logger.info({ event: 'haproxy-reachable', socket: this.socket, haproxyPid: now.pid, downMs },
        `HAProxy answers again on ${this.socket}${downMs === undefined ? '' : ` after ${downMs} ms`}; re-asserting the server states`)
      this.lastWarning = { message: null, at: 0 } // a new outage deserves a new warning
    }
    this.reachable = true
    this.failures = 0
    this.unreachableSince = null
    if (before && (before.pid !== now.pid || (now.startTime !== undefined && before.startTime !== now.startTime))) {
      this.logger.warn({ event: 'haproxy-restarted', socket: this.socket, fromPid: before.pid, toPid: now.pid },
        `HAProxy restarted or reloaded (pid ${before.pid} → ${now.pid}): ${this.stateFile ? `it loaded the servers' states from ${this.stateFile.file}; re-asserting any that differ` : 'it forgot the servers\' runtime states; re-asserting them'}`)
    }
  }

  // Compare HAProxy's admin states with the wanted ones and send what differs. After a restart
  // that is every server not in MAINT; in steady state, nothing.
  _reassert (state, readStartedAt) {
    const fixed = []
    const missing = []
    for (const [name, rec] of this.servers) {
      const seen = state[name]
      rec.seen = seen ? seen.admin : null
      rec.op = seen ? seen.op : null
      if (!seen) {
        if (rec.wanted !== 'maint') missing.push(name)
        continue
      }
      const settled = rec.pending === 0 && rec.appliedAt < readStartedAt
      if (settled && seen.admin !== rec.wanted) {
        fixed.push({ server: name, wanted: rec.wanted, seen: seen.admin })
        this._send(name, rec.wanted)
      }
    }
    if (fixed.length > 0) {
      this.logger.info({ event: 'haproxy-reassert', backend: this.backend, servers: fixed },
        `re-asserted ${fixed.length} server state${fixed.length > 1 ? 's' : ''} in HAProxy: ${fixed.map((f) => `${f.server} ${f.seen}→${f.wanted}`).join(', ')}`)
    }
    if (missing.length > 0) {
      this._warn('haproxy-missing-servers', `HAProxy backend '${this.backend}' has no server${missing.length > 1 ? 's' : ''} ${missing.join(', ')} any more (config changed?): those workers get no traffic`,
        { backend: this.backend, missing })
    }
  }

  // HAProxy's backend queue and each server's sessions, for status(), as of the last check.
  _noteLoad (rows) {
    for (const row of rows) {
      if (row.svname === 'BACKEND') this.queue = row.qcur ?? 0
      else if (this.servers.has(row.svname)) this.servers.get(row.svname).sessions = row.scur ?? 0
    }
  }

  // A command or check failed. Never thrown: the workers keep serving on their ports whatever
  // HAProxy does, and the checks retry with backoff.
  _failed (err, context) {
    if (this.stopped) return
    this.lastError = { code: err.code, message: err.message, at: Date.now() }
    this.failures++
    if (UNREACHABLE.has(err.code)) {
      this.reachable = false
      this.unreachableSince = this.unreachableSince ?? Date.now()
      this._warn('haproxy-unreachable', `HAProxy unreachable: ${err.message}; the workers keep serving on their ports; retrying`,
        { socket: this.socket, code: err.code, reason: err.details?.reason, ...context })
    } else {
      this._warn('haproxy-error', `HAProxy refused what the pool asked: ${err.message}; retrying`, { socket: this.socket, code: err.code, ...context })
    }
    if (!this.checking) this._schedule(Math.min(this._retryDelay(), this._remaining()))
  }

  // ms until the next scheduled check.
  _remaining () {
    return this.nextCheckAt === null ? Infinity : Math.max(0, this.nextCheckAt - Date.now())
  }

  // A warning once per distinct message (and again after REPEAT_WARNING_AFTER), debug otherwise:
  // HAProxy down for an hour must not flood the log.
  _warn (event, message, fields) {
    const now = Date.now()
    const last = this.lastWarning
    if (last.message === message && now - last.at < REPEAT_WARNING_AFTER) return this.logger.debug({ event, ...fields }, message)
    this.lastWarning = { message, at: now }
    this.logger.warn({ event, ...fields }, message)
  }

  // Each worker<k> server must send to slot k's port, or HAProxy serves a port nobody listens
  // on (or another pool's). Only ports are compared: addresses may legitimately differ
  // (0.0.0.0 vs 127.0.0.1, a hostname resolved by HAProxy).
  _checkPorts (state, names, n) {
    const portOf = this.context?.portOf
    if (!portOf) return
    const wrong = []
    for (const name of names) {
      const slot = slotOf(name)
      const s = state[name]
      if (s && s.port !== portOf(slot)) wrong.push({ name, slot, port: s.port, expected: portOf(slot) })
    }
    if (wrong.length === 0) return
    const first = wrong[0]
    const workerPort = first.port - first.slot + 1
    throw poolError(codes.BAD_OPTION,
      `HAProxy backend '${this.backend}' sends ${wrong.map((w) => `${w.name} to port ${w.port}`).slice(0, 3).join(', ')}${wrong.length > 3 ? ` (and ${wrong.length - 3} more)` : ''}, ` +
      `but the pool's slot ${first.slot} listens on ${first.expected}: start the pool with --worker-port ${workerPort}, ` +
      `or regenerate the config with \`pool config haproxy -n ${n} --worker-port ${portOf(1)} --backend ${this.backend}\`` +
      (this.stateFile ? ` (a HAProxy reload takes ports from ${this.stateFile.file} while it exists: reload HAProxy after the old pool stopped, which removes it)` : ''),
      { details: { backend: this.backend, wrong } })
  }
}

// The typed part of status() (lib/fronts/front.js FrontStatus): where HAProxy is, what is
// wrong, and each server as `pool status` and the status page show it.
function describeServers (servers, front) {
  const entries = Object.entries(servers)
  const cell = (server, key) => Object.fromEntries(entries.map(([name, s]) => [slotOf(name), server(s)[key]]))
  const shown = (s) => ({ wanted: s.wanted ?? '-', haproxy: haproxyState(s), sessions: s.sessions ?? '-' })
  const error = front.lastError ? `: ${front.lastError.message || front.lastError}` : ''
  return {
    target: `backend ${front.backend}`,
    detail: `via ${front.socket}${front.haproxy?.pid ? ` (HAProxy pid ${front.haproxy.pid})` : ''}`,
    problem: front.reachable === false ? `unreachable${error}` : null,
    columns: [
      { title: 'WANTED', values: cell(shown, 'wanted') },
      { title: 'HAPROXY', values: cell(shown, 'haproxy') },
      { title: 'SESS', right: true, values: cell(shown, 'sessions') }
    ],
    table: {
      caption: `backend ${front.backend || '?'} via ${front.socket || '?'}: ${front.reachable ? 'reachable' : 'not reachable'}, queue ${front.queue ?? '–'}` +
        (front.lastError ? `; last error: ${front.lastError.message || front.lastError}` : ''),
      head: ['Server', 'Wanted', 'Seen', 'Up', 'Sessions'],
      rows: entries.map(([name, s]) => [name, s.wanted, s.seen, s.up === null ? null : { badge: s.up ? 'UP' : 'DOWN', tone: s.up ? 'ready' : 'bad' }, s.sessions])
    }
  }
}

// HAProxy's state of a server, with "down" when its health check says so.
function haproxyState (server) {
  if (!server || !server.seen) return '-'
  return server.up === false && server.seen !== 'maint' ? `${server.seen} (down)` : server.seen
}

function slotOf (name) {
  const m = WORKER_SERVER.exec(name)
  return m ? Number(m[1]) : Infinity
}

function createHaproxyFront (options, { logger } = {}) {
  return new HaproxyFront(resolveHaproxyFrontOptions(options), { logger })
}

module.exports = { createHaproxyFront, HaproxyFront }
