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

  of (handle) {
    let log = this.children.get(handle.slot)
    if (!log) {
      log = this.logger.child({ slot: handle.slot, port: handle.port })
      this.children.set(handle.slot, log)
    }
    return log
  }

  spawned (handle, now) {
    this.of(handle).info({ event: 'spawn', pid: handle.pid, restarts: handle.restarts },
      `worker ${handle.slot} spawned`)
    this.metrics.spawned(handle)
    this.emit('spawn', handle.snapshot(now))
  }

  // The fork failed: the errno's name and meaning, and when the slot tries again.
  spawnError (handle, err) {
    const delay = Math.round(handle.respawnDelay)
    const code = err.code ?? null
    const meaning = typeof err.errno === 'number' ? getSystemErrorMap().get(err.errno)?.[1] : null
    const times = handle.spawnErrors > 1 ? ` (${handle.spawnErrors} times in a row)` : ''
    this.of(handle).error({
      event: 'spawn-error',
      code,
      errno: err.errno ?? null,
      syscall: err.syscall ?? null,
      delay,
      times: handle.spawnErrors,
      err: brief(err)
    },
      `worker ${handle.slot} could not be forked: ${code ?? err.message}${meaning ? ` (${meaning})` : ''}${times}; ` +
        `trying again in ${delay} ms`)
    this.metrics.failed('worker_spawn_failed')
    this.emit('spawn-error', {
      ...handle.snapshot(),
      error: { message: err.message, code, errno: err.errno ?? null, syscall: err.syscall ?? null }
    })
  }

  // Returns the snapshot told, for the fronts to hear the same.
  ready (handle, now) {
    const view = handle.snapshot(now)
    this.of(handle).info({ event: 'ready', pid: handle.pid, bootMs: now - handle.spawnedAt },
      `worker ${handle.slot} ready`)
    this.emit('ready', view)
    return view
  }

  warming (handle, now) {
    const { warmup, warmupRequests } = this.options
    const line = { event: 'warming', pid: handle.pid, bootMs: now - handle.spawnedAt, requests: warmupRequests }
    this.of(handle).info(line,
      `worker ${handle.slot} listening; warming up with ${warmupRequests} requests to ${warmup.join(', ')}`)
  }

  // A request found every render place of the worker taken (a front misconfigured: it should
  // never). `running`: the request it started last, as it says ({ method, url }).
  queued (handle, now, waiting, running) {
    this.emit('queued', { ...handle.snapshot(now), waiting, running: running ?? null })
  }

  // The app's stack once; the crash loop that follows repeats only the short line, at debug.
  bootError (handle, error) {
    const seen = this.bootErrorsSeen.get(error.message) || 0
    this.bootErrorsSeen.set(error.message, seen + 1)
    if (seen === 0) {
      this.of(handle).error({ event: 'boot-error', pid: handle.pid, err: error },
        `worker ${handle.slot} failed to boot: ${error.message}`)
    } else {
      this.of(handle).debug({ event: 'boot-error', pid: handle.pid, err: brief(error) },
        `worker ${handle.slot} failed to boot again (seen ${seen + 1} times)`)
    }
  }

  // Returns the snapshot told, with how the process ended.
  exited (handle, pid, { code, signal, reason, planned, draining }, now) {
    const line = { event: 'exit', pid, code, signal, reason }
    const how = `${signal || `code ${code}`}, ${reason}`
    if (planned) this.of(handle).info(line, `worker ${handle.slot} stopped`)
    else if (draining) {
      this.of(handle).warn({ ...line, draining },
        `worker ${handle.slot} exited (${how}) while draining for ${draining}`)
    } else this.of(handle).warn(line, `worker ${handle.slot} exited (${how})`)
    const view = { ...handle.snapshot(now), code, signal, reason, ...(draining && !planned ? { draining } : {}) }
    this.emit('exit', view)
    return view
  }

  bootFailed (handle, exitView) {
    this.metrics.failed('worker_boot_failed')
    this.emit('boot-failed', { ...exitView, error: handle.lastError })
  }

  // Delay 0: the process had proved healthy (worker-handle.js provedHealthy), so no crash loop.
  respawnScheduled (handle) {
    const delay = Math.round(handle.respawnDelay)
    this.of(handle).info({ event: 'respawn-scheduled', delay, crashes: handle.crashes },
      delay === 0
        ? `worker ${handle.slot} respawns now (it had served: not a crash loop)`
        : `worker ${handle.slot} respawns in ${delay} ms`)
  }

  gaveUp (handle) {
    const error = handle.lastError || { message: `exited ${handle.bootFailures} times before becoming ready` }
    this.of(handle).error({ event: 'give-up', failures: handle.bootFailures, err: brief(error) },
      `slot ${handle.slot} given up after ${handle.bootFailures} failed boots in a row`)
    this.metrics.failed('worker_gave_up')
    this.emit('give-up', { ...handle.snapshot(), error })
  }

  // What the handle said was overdue (WorkerHandle.due), as the supervisor carries it out.
  overdue (handle, action, now) {
    if (action.reason === 'timeout' || action.reason === 'heartbeat') {
      this.metrics.failed('worker_hung')
      this.emit('hung', { ...handle.snapshot(now), reason: action.reason })
    }
    const log = this.of(handle)
    const pid = handle.pid
    if (action.do === 'term') {
      const tunnels = handle.tunnels > 0 ? ` (${plural(handle.tunnels, 'tunnel')} open)` : ''
      const line = { event: 'terminate', pid, open: handle.open, tunnels: handle.tunnels }
      return log.warn(line, `worker ${handle.slot} still busy at the graceful timeout${tunnels}; SIGTERM`)
    }
    if (action.reason === 'boot-timeout') {
      return log.error({ event: 'boot-timeout', pid, ms: action.ms },
        `worker ${handle.slot} not ready within ${this.options.bootTimeout} ms; killing it`)
    }
    if (action.reason !== 'timeout' && action.reason !== 'heartbeat') {
      return log.warn({ event: 'kill', pid }, `worker ${handle.slot} still running after SIGTERM; SIGKILL`)
    }
    const request = handle.request
    const fields = {
      event: 'hung',
      reason: action.reason,
      pid,
      ms: action.ms,
      open: handle.open,
      ...(request ? { method: request.method, url: request.url } : {})
    }
    const more = handle.open > 1 ? ` and ${plural(handle.open - 1, 'more request')}` : ''
    const holding = request ? ` running ${request.method} ${request.url}${more}` : ''
    if (action.reason === 'timeout') {
      log.error(fields,
        `worker ${handle.slot} (pid ${pid})${holding}: its event loop has not come round for ${action.ms} ms ` +
          `(--timeout ${this.options.timeout} ms); killing it`)
    } else {
      log.error(fields,
        `worker ${handle.slot} (pid ${pid}) has not checked in for ${action.ms} ms ` +
          `(--heartbeat-timeout ${this.options.heartbeatTimeout} ms); killing it`)
    }
  }

  // A drained process left its slot with `open` requests and `tunnels` (retiree.js).
  retired (handle, retiree, { open, tunnels = 0 }) {
    const requests = open > 0 || tunnels === 0 ? plural(open, 'request') : null
    const held = [requests, tunnels > 0 ? plural(tunnels, 'tunnel') : null].filter(Boolean).join(' and ')
    const line = { event: 'retiring', pid: retiree.pid, reason: retiree.reason, open, tunnels }
    this.of(handle).info(line, `worker ${handle.slot} (pid ${retiree.pid}) left its port with ${held} open; ` +
      'the slot starts again while it finishes them')
  }

  retireeSignalled (retiree, signal) {
    const log = this.logger.child({ slot: retiree.slot })
    const when = signal === 'SIGTERM' ? 'at the graceful timeout' : 'after SIGTERM'
    log.warn({ event: signal === 'SIGTERM' ? 'terminate' : 'kill', pid: retiree.pid, retiring: true },
      `retiring worker ${retiree.slot} (pid ${retiree.pid}) still holds requests or tunnels ${when}; ${signal}`)
  }

  // As a drained worker's exit (worker-handle.js exitReason): its own end, or the SIGTERM's.
  retireeExited (retiree, { code, signal }) {
    const endedAsAsked = retiree.termSent ? signal === null || signal === 'SIGTERM' : code === 0 && signal === null
    const planned = !retiree.killed && endedAsAsked
    const reason = planned ? retiree.reason : retiree.killed ? `${retiree.reason}-killed` : 'crashed'
    const line = {
      event: 'exit',
      pid: retiree.pid,
      code,
      signal,
      reason,
      retiring: true,
      ...(planned ? {} : { draining: retiree.reason })
    }
    const log = this.logger.child({ slot: retiree.slot })
    const who = `retiring worker ${retiree.slot} (pid ${retiree.pid})`
    if (planned) log.info(line, `${who} stopped`)
    else log.warn(line, `${who} exited (${signal || `code ${code}`}, ${reason})`)
  }

  // The worker's channel carried something that is not a frame; it is
  // killed.
  channelBroken (handle, problem) {
    this.metrics.failed('worker_channel_broken')
    this.of(handle).error({ event: 'channel-broken', pid: handle.pid, problem },
      `worker ${handle.slot} (pid ${handle.pid}) broke the pool channel: ${problem}; killing it`)
  }

  canaryChannelBroken (pid, problem) {
    this.metrics.failed('worker_channel_broken')
    this.logger.error({ event: 'channel-broken', pid, problem },
      `the reload canary (pid ${pid}) broke the pool channel: ${problem}; killing it`)
  }

  // The worker's port refuses connections while it lives (Pool.onListenerClosed). cause: { by:
  // 'worker' or the front that found out, error (its server failed), refusals (the front's count) }.
  listenerClosed (handle, { by, error, refusals }, now) {
    const how = error
      ? `its server failed: ${error.message}`
      : by === 'worker'
        ? 'the app closed its server'
        : `${refusals} connections in a row refused (seen by the ${by} front)`
    this.of(handle).error({ event: 'listener-closed', pid: handle.pid, by, err: error || undefined, refusals },
      `worker ${handle.slot} (pid ${handle.pid}) no longer accepts connections: ${how}; replacing it`)
    this.metrics.failed('worker_listener_closed')
    this.emit('listener-closed', { ...handle.snapshot(now), by, error: error || null, refusals: refusals ?? null })
  }

  draining (handle, reason, now) {
    this.of(handle).info({ event: 'draining', reason, pid: handle.pid }, `worker ${handle.slot} draining (${reason})`)
    const view = handle.snapshot(now)
    this.emit('draining', { ...view, reason })
    return view
  }

  recycling (handle, reason) {
    this.of(handle).info({ event: 'recycle', reason, pid: handle.pid, requests: handle.requests, rss: handle.rss },
      `recycling worker ${handle.slot} (${reason === 'recycle' ? 'asked' : reason})`)
  }

  revived (handle) { this.of(handle).info({ event: 'revive' }, `slot ${handle.slot} tries again with the new code`) }
  retrying (handle) {
    const after = this.options.givenUpRetry
    this.of(handle).info({ event: 'given-up-retry', after },
      `slot ${handle.slot} tries again, ${Math.round(after / 1000)} s after it was given up (--given-up-retry)`)
    this.emit('given-up-retry', handle.snapshot())
  }

  removed (handle) {
    this.of(handle).info({ event: 'removed' }, `slot ${handle.slot} removed`)
    this.children.delete(handle.slot)
    this.emit('removed', handle.snapshot())
  }
}

function plural (n, word) { return `${n} ${word}${n === 1 ? '' : 's'}` }

// An error already logged with its stack, named again without it.
function brief (error) {
  return { message: error.message, code: error.code }
}

module.exports = { WorkerReport }
