'use strict'

// What each happening in a worker's life tells the world, in one place: its log line (what the
// event is called, at which level, with which fields, how it reads), the pool's metric, and the
// pool's event with the worker's snapshot. The supervisor decides; this only reports. Each slot
// logs through a child logger bound to its `slot` and `port`; the line adds the process's `pid`
// (the worker's: the supervisor's logger has none). An error goes under `err`,
// pino's error serializer's key.

const { getSystemErrorMap } = require('node:util')

class WorkerReport {
  // emit(name, payload): the pool's EventEmitter; listens(name): whether anyone listens to that
  // event; metrics: the pool's PoolMetrics.
  constructor ({ logger, options, metrics, emit, listens = () => true }) {
    this.logger = logger
    this.options = options
    this.metrics = metrics
    this.emit = emit
    this.listens = listens
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

  spawned (h, now) {
    this.of(h).info({ event: 'spawn', pid: h.pid, restarts: h.restarts }, `worker ${h.slot} spawned`)
    this.metrics.spawned(h)
    this.emit('spawn', h.snapshot(now))
  }

  // The fork failed: the errno's name and meaning, and when the slot tries again.
  spawnError (h, err) {
    const delay = Math.round(h.respawnDelay)
    const code = err.code ?? null
    const meaning = typeof err.errno === 'number' ? getSystemErrorMap().get(err.errno)?.[1] : null
    const times = h.spawnErrors > 1 ? ` (${h.spawnErrors} times in a row)` : ''
    this.of(h).error({
      event: 'spawn-error',
      code,
      errno: err.errno ?? null,
      syscall: err.syscall ?? null,
      delay,
      times: h.spawnErrors,
      err: brief(err)
    },
      `worker ${h.slot} could not be forked: ${code ?? err.message}${meaning ? ` (${meaning})` : ''}${times}; trying ` +
        `again in ${delay} ms`)
    this.metrics.failed('worker_spawn_failed')
    this.emit('spawn-error', {
      ...h.snapshot(),
      error: { message: err.message, code, errno: err.errno ?? null, syscall: err.syscall ?? null }
    })
  }

  // Returns the snapshot told, for the fronts to hear the same.
  ready (h, now) {
    const view = h.snapshot(now)
    this.of(h).info({ event: 'ready', pid: h.pid, bootMs: now - h.spawnedAt }, `worker ${h.slot} ready`)
    this.emit('ready', view)
    return view
  }

  warming (h, now) {
    const { warmup, warmupRequests } = this.options
    this.of(h).info({ event: 'warming', pid: h.pid, bootMs: now - h.spawnedAt, requests: warmupRequests },
      `worker ${h.slot} listening; warming up with ${warmupRequests} requests to ${warmup.join(', ')}`)
  }

  // A request found every render place of the worker taken (a front misconfigured: it should
  // never). `running`: the request it started last, as it says ({ method, url }).
  queued (h, now, waiting, running) { this.emit('queued', { ...h.snapshot(now), waiting, running: running ?? null }) }

  // The app's stack once; the crash loop that follows repeats only the short line, at debug.
  bootError (h, error) {
    const seen = this.bootErrorsSeen.get(error.message) || 0
    this.bootErrorsSeen.set(error.message, seen + 1)
    if (seen === 0) {
      this.of(h).error({ event: 'boot-error', pid: h.pid, err: error },
        `worker ${h.slot} failed to boot: ${error.message}`)
    } else {
      this.of(h).debug({ event: 'boot-error', pid: h.pid, err: brief(error) },
        `worker ${h.slot} failed to boot again (seen ${seen + 1} times)`)
    }
  }

  // Returns the snapshot told, with how the process ended.
  exited (h, pid, { code, signal, reason, planned, draining }, now) {
    const line = { event: 'exit', pid, code, signal, reason }
    const how = `${signal || `code ${code}`}, ${reason}`
    if (planned) this.of(h).info(line, `worker ${h.slot} stopped`)
    else if (draining) {
      this.of(h).warn({ ...line, draining },
        `worker ${h.slot} exited (${how}) while draining for ${draining}`)
    } else this.of(h).warn(line, `worker ${h.slot} exited (${how})`)
    const view = { ...h.snapshot(now), code, signal, reason, ...(draining && !planned ? { draining } : {}) }
    this.emit('exit', view)
    return view
  }

  bootFailed (h, exitView) {
    this.metrics.failed('worker_boot_failed')
    this.emit('boot-failed', { ...exitView, error: h.lastError })
  }

  // Delay 0: the process had proved healthy (worker-handle.js provedHealthy), so no crash loop.
  respawnScheduled (h) {
    const delay = Math.round(h.respawnDelay)
    this.of(h).info({ event: 'respawn-scheduled', delay, crashes: h.crashes },
      delay === 0
        ? `worker ${h.slot} respawns now (it had served: not a crash loop)`
        : `worker ${h.slot} respawns in ${delay} ms`)
  }

  gaveUp (h) {
    const error = h.lastError || { message: `exited ${h.bootFailures} times before becoming ready` }
    this.of(h).error({ event: 'give-up', failures: h.bootFailures, err: brief(error) },
      `slot ${h.slot} given up after ${h.bootFailures} failed boots in a row`)
    this.metrics.failed('worker_gave_up')
    this.emit('give-up', { ...h.snapshot(), error })
  }

  // What the handle said was overdue (WorkerHandle.due), as the supervisor carries it out.
  overdue (h, action, now) {
    if (action.reason === 'timeout' || action.reason === 'heartbeat') {
      this.metrics.failed('worker_hung')
      this.emit('hung', { ...h.snapshot(now), reason: action.reason })
    }
    const log = this.of(h)
    const pid = h.pid
    if (action.do === 'term') {
      const tunnels = h.tunnels > 0 ? ` (${plural(h.tunnels, 'tunnel')} open)` : ''
      const line = { event: 'terminate', pid, open: h.open, tunnels: h.tunnels }
      return log.warn(line, `worker ${h.slot} still busy at the graceful timeout${tunnels}; SIGTERM`)
    }
    if (action.reason === 'boot-timeout') {
      return log.error({ event: 'boot-timeout', pid, ms: action.ms },
        `worker ${h.slot} not ready within ${this.options.bootTimeout} ms; killing it`)
    }
    if (action.reason !== 'timeout' && action.reason !== 'heartbeat') {
      return log.warn({ event: 'kill', pid }, `worker ${h.slot} still running after SIGTERM; SIGKILL`)
    }
    const r = h.request
    const fields = {
      event: 'hung',
      reason: action.reason,
      pid,
      ms: action.ms,
      open: h.open,
      ...(r ? { method: r.method, url: r.url } : {})
    }
    const holding = r
      ? ` running ${r.method} ${r.url}${h.open > 1 ? ` and ${plural(h.open - 1, 'more request')}` : ''}`
      : ''
    if (action.reason === 'timeout') {
      log.error(fields,
        `worker ${h.slot} (pid ${pid})${holding}: its event loop has not come round for ${action.ms} ms ` +
          `(--timeout ${this.options.timeout} ms); killing it`)
    } else {
      log.error(fields,
        `worker ${h.slot} (pid ${pid}) has not checked in for ${action.ms} ms ` +
          `(--heartbeat-timeout ${this.options.heartbeatTimeout} ms); killing it`)
    }
  }

  // A drained process left its slot with `open` requests and `tunnels` (retiree.js).
  retired (h, r, { open, tunnels = 0 }) {
    const requests = open > 0 || tunnels === 0 ? plural(open, 'request') : null
    const held = [requests, tunnels > 0 ? plural(tunnels, 'tunnel') : null]
    const line = { event: 'retiring', pid: r.pid, reason: r.reason, open, tunnels }
    this.of(h).info(line, `worker ${h.slot} (pid ${r.pid}) left its port with ${held.filter(Boolean).join(' and ')} ` +
      'open; the slot starts again while it finishes them')
  }

  retireeSignalled (r, signal) {
    const log = this.logger.child({ slot: r.slot })
    const when = signal === 'SIGTERM' ? 'at the graceful timeout' : 'after SIGTERM'
    log.warn({ event: signal === 'SIGTERM' ? 'terminate' : 'kill', pid: r.pid, retiring: true },
      `retiring worker ${r.slot} (pid ${r.pid}) still holds requests or tunnels ${when}; ${signal}`)
  }

  // As a drained worker's exit (worker-handle.js exitReason): its own end, or the SIGTERM's.
  retireeExited (r, { code, signal }) {
    const planned = !r.killed && (r.termSent ? signal === null || signal === 'SIGTERM' : code === 0 && signal === null)
    const reason = planned ? r.reason : r.killed ? `${r.reason}-killed` : 'crashed'
    const line = {
      event: 'exit',
      pid: r.pid,
      code,
      signal,
      reason,
      retiring: true,
      ...(planned ? {} : { draining: r.reason })
    }
    const log = this.logger.child({ slot: r.slot })
    if (planned) log.info(line, `retiring worker ${r.slot} (pid ${r.pid}) stopped`)
    else log.warn(line, `retiring worker ${r.slot} (pid ${r.pid}) exited (${signal || `code ${code}`}, ${reason})`)
  }

  // The worker's channel carried something that is not a frame; it is
  // killed.
  channelBroken (h, problem) {
    this.metrics.failed('worker_channel_broken')
    this.of(h).error({ event: 'channel-broken', pid: h.pid, problem },
      `worker ${h.slot} (pid ${h.pid}) broke the pool channel: ${problem}; killing it`)
  }

  canaryChannelBroken (pid, problem) {
    this.metrics.failed('worker_channel_broken')
    this.logger.error({ event: 'channel-broken', pid, problem },
      `the reload canary (pid ${pid}) broke the pool channel: ${problem}; killing it`)
  }

  // The worker's port refuses connections while it lives (Pool.onListenerClosed). cause: { by:
  // 'worker' or the front that found out, error (its server failed), refusals (the front's count) }.
  listenerClosed (h, { by, error, refusals }, now) {
    const how = error
      ? `its server failed: ${error.message}`
      : by === 'worker'
        ? 'the app closed its server'
        : `${refusals} connections in a row refused (seen by the ${by} front)`
    this.of(h).error({ event: 'listener-closed', pid: h.pid, by, err: error || undefined, refusals },
      `worker ${h.slot} (pid ${h.pid}) no longer accepts connections: ${how}; replacing it`)
    this.metrics.failed('worker_listener_closed')
    this.emit('listener-closed', { ...h.snapshot(now), by, error: error || null, refusals: refusals ?? null })
  }

  draining (h, reason, now) {
    this.of(h).info({ event: 'draining', reason, pid: h.pid }, `worker ${h.slot} draining (${reason})`)
    const view = h.snapshot(now)
    this.emit('draining', { ...view, reason })
    return view
  }

  recycling (h, reason) {
    this.of(h).info({ event: 'recycle', reason, pid: h.pid, requests: h.requests, rss: h.rss },
      `recycling worker ${h.slot} (${reason === 'recycle' ? 'asked' : reason})`)
  }

  revived (h) { this.of(h).info({ event: 'revive' }, `slot ${h.slot} tries again with the new code`) }
  retrying (h) {
    const after = this.options.givenUpRetry
    this.of(h).info({ event: 'given-up-retry', after },
      `slot ${h.slot} tries again, ${Math.round(after / 1000)} s after it was given up (--given-up-retry)`)
    this.emit('given-up-retry', h.snapshot())
  }

  removed (h) {
    this.of(h).info({ event: 'removed' }, `slot ${h.slot} removed`)
    this.children.delete(h.slot)
    this.emit('removed', h.snapshot())
  }
}

function plural (n, word) { return `${n} ${word}${n === 1 ? '' : 's'}` }

// An error already logged with its stack, named again without it.
function brief (error) {
  return { message: error.message, code: error.code }
}

module.exports = { WorkerReport }
