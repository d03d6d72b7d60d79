'use strict'

// The HAProxy front's reconciler: the state the pool wants for each worker<k> server of its
// backend (READY, DRAIN or MAINT), the commands that assert it, and a check on a timer of its own
// (`show info`, `show servers state`, `show stat`, every --haproxy-check-interval) that notes
// HAProxy's restarts, its queue and each server's sessions, and re-asserts whatever differs.
// When HAProxy cannot be reached, it retries with backoff and the workers keep serving on their
// ports; nothing here ever throws at the pool.
//
// A server may be mirrored in other backends over the same workers (the long-lived requests'
// backend, `<backend>_streams`): each state the pool sets goes to the server of every one of them,
// in one command line, and the check re-asserts it in each.
//
// Commands for one server go through a queue of their own (one HaproxyClient per server), so
// `ready` then `maint` always land in that order, and a MAINT never waits behind a slow `show
// stat` or another server's command. Reads (checks, drain polls) share one more client.

const { performance } = require('node:perf_hooks')
const { HaproxyClient } = require('../../haproxy/client')
const { slotOfServer } = require('../../haproxy/names')
const { StateFile } = require('./state-file')
const { OnceEach } = require('./warnings')
const { codes } = require('../../errors')

const RETRY_FIRST = 250 // ms: first retry after HAProxy could not be reached, doubling...
const RETRY_MAX = 5000 // ...up to this (or the check interval, if longer)
// Errors that mean the socket itself did not answer, as opposed to HAProxy refusing something.
const UNREACHABLE = new Set([codes.HAPROXY_SOCKET, codes.HAPROXY_PERMISSION])

class ServerStates {
  // `stateFile`: a path where HAProxy's states are kept for its reloads, or undefined. `mirrors`:
  // the other backends whose servers take the same states (see the top).
  constructor ({ socket, backend, mirrors = [], timeout, checkInterval, stateFile, logger }) {
    this.socket = socket
    this.backend = backend
    this.backends = [backend, ...mirrors]
    this.timeout = timeout
    this.checkInterval = checkInterval
    this.logger = logger
    this.warnings = new OnceEach(logger)
    this.reader = this.client()
    this.channels = new Map() // server name → HaproxyClient: that server's ordered `set server` queue
    this.servers = new Map() // server name → its record (see record())
    this.inFlight = new Set() // pending `set server` promises, awaited by stop()
    this.reachable = false
    this.lastError = null
    this.haproxy = null // { pid, startTime, version } of the HAProxy last seen
    this.checkedAt = null
    this.queue = 0
    this.failures = 0 // consecutive failed checks or commands: the retry backoff
    this.unreachableSince = null
    this.timer = null
    this.nextCheckAt = null
    this.checking = false
    this.stopped = false
    // Optional: HAProxy's state dump kept on disk for its next reload (./state-file.js).
    this.stateFile = stateFile
      ? new StateFile({ file: stateFile, read: () => this.dumpStates(), logger })
      : null
  }

  // From now on the servers of `backends` take the same states (before takeOver).
  mirror (backends) { this.backends = [this.backend, ...backends] }

  // `show servers state` of every backend the pool drives, as one dump (one header, then the rows).
  async dumpStates () {
    const dumps = []
    for (const b of this.backends) dumps.push(await this.reader.command(`show servers state ${b}`))
    return dumps.map((text, i) => i === 0
      ? text.trimEnd()
      : text.split('\n').filter((l) => l !== '' && !l.startsWith('#') && !/^\d+$/.test(l)).join('\n'))
      .filter((part) => part !== '').join('\n') + '\n'
  }

  client () {
    return new HaproxyClient({ socket: this.socket, timeout: this.timeout })
  }

  channel (name) {
    let channel = this.channels.get(name)
    if (!channel) this.channels.set(name, (channel = this.client()))
    return channel
  }

  // What the pool knows of one server:
  //   wanted     'ready' | 'drain' | 'maint': what the pool asked for last
  //   version    bumped at each change of `wanted` (a drain wait ends when it moves on)
  //   pending    `set server` commands not answered yet
  //   appliedAt  when HAProxy last confirmed one (performance.now())
  //   seen, op   admin and operational state in HAProxy's last `show servers state`
  //   sessions   its sessions in HAProxy's last `show stat`
  record (name) {
    let rec = this.servers.get(name)
    if (!rec) {
      this.servers.set(name,
        (rec = { wanted: 'maint', version: 0, pending: 0, appliedAt: -Infinity, seen: null, op: null }))
    }
    return rec
  }

  // The servers, by slot, for status().
  snapshot () {
    const servers = {}
    const names = [...this.servers.keys()].sort((a, b) => (slotOfServer(a) ?? Infinity) - (slotOfServer(b) ?? Infinity))
    for (const name of names) {
      const rec = this.servers.get(name)
      servers[name] = {
        wanted: rec.wanted,
        seen: rec.seen,
        up: rec.op === null ? null : rec.op === 'running',
        sessions: rec.sessions ?? null
      }
    }
    return servers
  }

  // At start: every `owned` server is the pool's, MAINT until its worker says ready (the config
  // starts them `disabled`, but a previous pool may have left some READY). `info`: HAProxy's
  // `show info`, read just before. Then the checks begin.
  async takeOver (owned, info) {
    // Before anything changes in HAProxy: a file the pool cannot write is bad input.
    if (this.stateFile) await this.stateFile.saveOrThrow()
    await Promise.all(owned.map((name) => this.channel(name).setServerState(this.backends, name, 'maint')))
    const now = performance.now()
    for (const name of owned) Object.assign(this.record(name), { wanted: 'maint', appliedAt: now, seen: 'maint' })
    if (this.stateFile) this.stateFile.changed()
    this.haproxy = { pid: info.Pid, startTime: info.Start_time_sec, version: info.Version }
    this.reachable = true
    this.checkedAt = Date.now()
    this.schedule(this.checkInterval)
  }

  // The pool wants `state` for server `name` from now on. Resolves { ok } and never rejects.
  want (name, state) {
    const rec = this.record(name)
    rec.wanted = state
    rec.version++
    return this.send(name, state)
  }

  // Resolves { ok } and never rejects: a failure is logged and retried by the checks.
  send (name, state) {
    const rec = this.record(name)
    rec.pending++
    const sent = this.channel(name).setServerState(this.backends, name, state).then(
      () => {
        rec.pending--
        rec.appliedAt = performance.now()
        if (this.stateFile) this.stateFile.changed()
        // After failures, a command that passes means HAProxy is back: check (and re-assert
        // the others) now rather than at the next backoff step.
        if (this.failures > 0 && !this.checking) this.schedule(0)
        return { ok: true }
      },
      (err) => {
        rec.pending--
        // HAProxy did not take this state, so a file of the states it holds may be wrong now.
        if (this.stateFile) this.stateFile.invalidate()
        this.failed(err, { server: name, state })
        return { ok: false, error: err }
      })
    this.inFlight.add(sent)
    sent.then(() => this.inFlight.delete(sent))
    return sent
  }

  // No more checks; resolves once the last commands have landed, or after `bound` ms.
  async stop (bound) {
    this.stopped = true
    clearTimeout(this.timer)
    await Promise.race([Promise.allSettled([...this.inFlight]), sleep(bound)])
  }

  // ── the check: reachability, restarts, drift ──────────────────────────────────────────────

  schedule (delay) {
    if (this.stopped) return
    clearTimeout(this.timer)
    this.nextCheckAt = performance.now() + delay
    this.timer = setTimeout(() => { this.nextCheckAt = null; this.check() }, delay)
    this.timer.unref()
  }

  retryDelay () {
    const max = Math.max(RETRY_MAX, this.checkInterval)
    return Math.min(RETRY_FIRST * 2 ** Math.max(0, this.failures - 1), max)
  }

  async check () {
    if (this.stopped || this.checking) return
    this.checking = true
    // Only commands answered before this read began can be compared with what it returns.
    const readStartedAt = performance.now()
    try {
      const info = await this.reader.info()
      const state = await this.reader.serversState(this.backend)
      const mirrored = []
      for (const b of this.backends.slice(1)) mirrored.push(await this.reader.serversState(b))
      const stat = await this.reader.showStat(this.backend)
      this.reached(info)
      this.reassert(state, readStartedAt, mirrored)
      this.noteLoad(stat)
      this.checkedAt = Date.now()
    } catch (err) {
      this.failed(err, { during: 'check' })
    } finally {
      this.checking = false
      this.schedule(this.failures > 0 ? this.retryDelay() : this.checkInterval)
    }
  }

  // HAProxy answered: note a return after failures, and a restart or reload (new pid or start
  // time), which forgets every runtime state.
  reached (info) {
    const before = this.haproxy
    const now = { pid: info.Pid, startTime: info.Start_time_sec, version: info.Version }
    this.haproxy = now
    if (this.failures > 0) {
      const downMs = this.unreachableSince === null ? undefined : performance.now() - this.unreachableSince
      this.logger.info({ event: 'haproxy-reachable', socket: this.socket, haproxyPid: now.pid, downMs },
        `HAProxy answers again on ${this.socket}${downMs === undefined ? '' : ` after ${downMs} ms`}; re-asserting ` +
          'the server states')
      this.warnings.forget() // a new outage deserves a new warning
    }
    this.reachable = true
    this.failures = 0
    this.unreachableSince = null
    if (before && (before.pid !== now.pid || (now.startTime !== undefined && before.startTime !== now.startTime))) {
      this.logger.warn({ event: 'haproxy-restarted', socket: this.socket, fromPid: before.pid, toPid: now.pid },
        `HAProxy restarted or reloaded (pid ${before.pid} → ${now.pid}): ${this.stateFile
            ? 'it loaded the servers\' ' +
              `states from ${this.stateFile.file}; re-asserting any that differ`
            : 'it forgot the servers\' runtime states; re-asserting them'}`)
    }
  }

  // Compare HAProxy's admin states with the wanted ones and send what differs. After a restart
  // that is every server not in MAINT; in steady state, nothing. `mirrored`: the mirrors' states.
  reassert (state, readStartedAt, mirrored = []) {
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
      const drifted = seen.admin !== rec.wanted || mirrored.some((m) => m[name] && m[name].admin !== rec.wanted)
      if (settled && drifted) {
        fixed.push({ server: name, wanted: rec.wanted, seen: seen.admin })
        this.send(name, rec.wanted)
      }
    }
    if (fixed.length > 0) {
      this.logger.info({ event: 'haproxy-reassert', backend: this.backend, servers: fixed },
        `re-asserted ${fixed.length} server state${fixed.length > 1 ? 's' : ''} in ` +
          `HAProxy: ${fixed.map((f) => `${f.server} ${f.seen}→${f.wanted}`).join(', ')}`)
    }
    if (missing.length > 0) {
      this.warnings.warn('haproxy-missing-servers',
        `HAProxy backend '${this.backend}' has no server${missing.length > 1 ? 's' : ''} ${missing.join(', ')} any ` +
          'more (config changed?): those workers get no traffic',
        { backend: this.backend, missing })
    }
  }

  // HAProxy's backend queue and each server's sessions, for status(), as of the last check.
  noteLoad (rows) {
    for (const row of rows) {
      if (row.svname === 'BACKEND') this.queue = row.qcur ?? 0
      else if (this.servers.has(row.svname)) this.servers.get(row.svname).sessions = row.scur ?? 0
    }
  }

  // A command or check failed. Never thrown: the workers keep serving on their ports whatever
  // HAProxy does, and the checks retry with backoff.
  failed (err, context) {
    if (this.stopped) return
    this.lastError = { code: err.code, message: err.message, at: Date.now() }
    this.failures++
    if (UNREACHABLE.has(err.code)) {
      this.reachable = false
      this.unreachableSince = this.unreachableSince ?? performance.now()
      this.warnings.warn('haproxy-unreachable',
        `HAProxy unreachable: ${err.message}; the workers keep serving on their ports; retrying`,
        { socket: this.socket, code: err.code, reason: err.details?.reason, ...context })
    } else {
      this.warnings.warn('haproxy-error', `HAProxy refused what the pool asked: ${err.message}; retrying`,
        { socket: this.socket, code: err.code, ...context })
    }
    if (!this.checking) this.schedule(Math.min(this.retryDelay(), this.remaining()))
  }

  // ms until the next scheduled check.
  remaining () {
    return this.nextCheckAt === null ? Infinity : Math.max(0, this.nextCheckAt - performance.now())
  }
}

function sleep (ms) {
  return new Promise((resolve) => setTimeout(resolve, ms).unref())
}

module.exports = { ServerStates }
