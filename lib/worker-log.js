'use strict'

// The log lines of a worker's life, in one place: what each event is called, at which level,
// with which fields, and how it reads. Each slot logs through a child logger bound to its
// `slot` and `port`; the line adds the process's `pid` (the worker's, not the supervisor's).

class WorkerLog {
  constructor (logger, options) {
    this.logger = logger
    this.options = options
    this.children = new Map() // slot → child logger
    this.bootErrorsSeen = new Map() // app error message → times seen, so a crash loop logs it once
  }

  of (h) {
    let log = this.children.get(h.slot)
    if (!log) {
      log = this.logger.child({ slot: h.slot, port: h.port })
      this.children.set(h.slot, log)
    }
    return log
  }

  spawned (h) { this.of(h).info({ event: 'spawn', pid: h.pid, restarts: h.restarts }, `worker ${h.slot} spawned`) }
  spawnFailed (h, err) { this.of(h).error({ event: 'spawn-failed', error: err.message }, `worker ${h.slot} could not be started: ${err.message}`) }
  ready (h, now) { this.of(h).info({ event: 'ready', pid: h.pid, bootMs: now - h.spawnedAt }, `worker ${h.slot} ready`) }

  // The app's stack once; the crash loop that follows repeats only the short line, at debug.
  bootError (h, error) {
    const seen = this.bootErrorsSeen.get(error.message) || 0
    this.bootErrorsSeen.set(error.message, seen + 1)
    const fields = { event: 'boot-error', pid: h.pid, error: error.message }
    if (seen === 0) this.of(h).error({ ...fields, stack: error.stack }, `worker ${h.slot} failed to boot: ${error.message}`)
    else this.of(h).debug(fields, `worker ${h.slot} failed to boot again (seen ${seen + 1} times)`)
  }

  exited (h, pid, { code, signal, reason, planned, draining }) {
    const line = { event: 'exit', pid, code, signal, reason }
    const how = `${signal || `code ${code}`}, ${reason}`
    if (planned) this.of(h).info(line, `worker ${h.slot} stopped`)
    else if (draining) this.of(h).warn({ ...line, draining }, `worker ${h.slot} exited (${how}) while draining for ${draining}`)
    else this.of(h).warn(line, `worker ${h.slot} exited (${how})`)
  }

  respawnScheduled (h) {
    const delay = Math.round(h.respawnDelay)
    this.of(h).info({ event: 'respawn-scheduled', delay, crashes: h.crashes }, `worker ${h.slot} respawns in ${delay} ms`)
  }

  gaveUp (h, error) {
    this.of(h).error({ event: 'give-up', failures: h.bootFailures, error: error.message }, `slot ${h.slot} given up after ${h.bootFailures} failed boots in a row`)
  }

  // What the handle said was overdue (WorkerHandle.due), as the supervisor carries it out.
  overdue (h, action) {
    const log = this.of(h)
    const pid = h.pid
    if (action.do === 'term') return log.warn({ event: 'terminate', pid, request: h.request }, `worker ${h.slot} still busy at the graceful timeout; SIGTERM`)
    if (action.reason === 'boot-timeout') return log.error({ event: 'boot-timeout', pid, ms: action.ms }, `worker ${h.slot} not ready within ${this.options.bootTimeout} ms; killing it`)
    if (action.reason !== 'timeout' && action.reason !== 'heartbeat') return log.warn({ event: 'kill', pid }, `worker ${h.slot} still running after SIGTERM; SIGKILL`)
    const r = h.request
    const fields = { event: 'hung', reason: action.reason, pid, ms: action.ms }
    if (r) log.error({ ...fields, method: r.method, url: r.url }, `worker ${h.slot} (pid ${pid}) ran ${r.method} ${r.url} for ${action.ms} ms (timeout ${this.options.timeout} ms); killing it`)
    else log.error(fields, `worker ${h.slot} (pid ${pid}) sent no heartbeat for ${action.ms} ms; killing it`)
  }

  draining (h, reason) { this.of(h).info({ event: 'draining', reason, pid: h.pid }, `worker ${h.slot} draining (${reason})`) }
  recycling (h, reason) { this.of(h).info({ event: 'recycle', reason, pid: h.pid, requests: h.requests, rss: h.rss }, `recycling worker ${h.slot} (${reason})`) }
  revived (h) { this.of(h).info({ event: 'revive' }, `slot ${h.slot} tries again with the new code`) }

  removed (h) {
    this.of(h).info({ event: 'removed' }, `slot ${h.slot} removed`)
    this.children.delete(h.slot)
  }
}

module.exports = { WorkerLog }
