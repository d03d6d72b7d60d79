'use strict'

// Nothing outlives a killed supervisor, not even a worker stuck for good: each pool has a reaper process
// holding a pipe whose other end only the supervisor holds. However the supervisor dies, the kernel closes its
// end; the reaper reads the end and ends what that supervisor marked (findOrphans, endProcesses). It waits on
// that read alone (no timer), in its own session (no Ctrl-C), from `/`, its code loaded up front (the pool's
// files may be gone). A stopped pool ends it; one that dies while its pool runs is restarted.
// Cost: one sleeping Node process per pool (~6 MB of its own), nothing per worker.

const path = require('node:path')
const { spawn } = require('node:child_process')
const { MARK } = require('./leftovers')

const RESTART_DELAY = 1000 // ms before a reaper that died while its pool runs is started again
const QUIET = 60000 // ms: a reaper failing again within this is said at debug, not warn
const ENV = {
  killTimeout: 'POOL_REAPER_KILL_TIMEOUT',
  logLevel: 'POOL_REAPER_LOG_LEVEL',
  logFormat: 'POOL_REAPER_LOG_FORMAT'
}

// ── in the supervisor ─────────────────────────────────────────────────────────────────────────

class Reaper {
  // mark: supervisorMark().
  constructor ({ mark, killTimeout, logLevel = 'info', logFormat = 'auto', logger }) {
    this.settings = { mark, killTimeout, logLevel, logFormat }
    this.logger = logger
    this.child = null
    this.stopped = false
    this.restart = null
    this.lastFailure = -Infinity
  }

  get pid () { return this.child?.pid ?? null }

  start () {
    this.restart = null
    if (this.stopped) return this
    let child
    try {
      child = spawnReaper(this.settings)
    } catch (err) {
      this.failed(`could not be started: ${err.message}`, err)
      return this
    }
    this.child = child
    if (this.lastFailure > -Infinity && child.pid !== undefined) {
      this.logger.info({ event: 'reaper-started', reaperPid: child.pid },
        `the pool's reaper runs again (pid ${child.pid})`)
    }
    child.on('error',
      (err) => { if (child.pid === undefined) this.failed(`could not be started: ${err.message}`, err) })
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = null
      if (!this.stopped && child.pid !== undefined) this.failed(`exited (${signal || `code ${code}`})`)
    })
    child.stdin.on('error', () => {}) // the reaper went: its 'exit' says so
    // Never what keeps the supervisor's process alive.
    child.unref()
    child.stdin.unref?.()
    return this
  }

  failed (what, err) {
    const now = performance.now()
    const level = now - this.lastFailure > QUIET ? 'warn' : 'debug'
    this.lastFailure = now
    this.logger[level]({ event: 'reaper-failed', err: err ? { message: err.message, code: err.code } : undefined },
      `the pool's reaper ${what}: until it runs again, a worker stuck for good when the supervisor dies outlives it; ` +
        `starting it again in ${RESTART_DELAY} ms`)
    if (this.stopped || this.restart) return
    this.restart = setTimeout(() => this.start(), RESTART_DELAY)
    this.restart.unref()
  }

  // Once every worker is gone.
  stop () {
    this.stopped = true
    clearTimeout(this.restart)
    const child = this.child
    this.child = null
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
}

function spawnReaper ({ mark, killTimeout, logLevel, logFormat }) {
  const env = {
    ...process.env,
    [MARK]: mark,
    [ENV.killTimeout]: String(killTimeout),
    [ENV.logLevel]: logLevel,
    [ENV.logFormat]: logFormat
  }
  // Not the supervisor's node flags or preloads, and no port: the reaper is no worker.
  for (const name of ['NODE_OPTIONS', 'NODE_CHANNEL_FD', 'NODE_CHANNEL_SERIALIZATION_MODE', 'PORT']) delete env[name]
  return spawn(process.execPath, [__filename], {
    cwd: path.parse(__dirname).root,
    detached: true,
    stdio: ['pipe', 'inherit', 'inherit'],
    env
  })
}

// ── in the reaper's process ───────────────────────────────────────────────────────────────────

function main (env = process.env) {
  const mark = env[MARK]
  const killTimeout = Number(env[ENV.killTimeout]) || 5000
  // Loaded now: by the time they are needed, the pool's files may be gone.
  const { findOrphans, endProcesses, processCount } = require('./leftovers')
  require('node:tty')
  const say = lineWriter({ level: env[ENV.logLevel], format: env[ENV.logFormat] })
  let swept = false
  const sweep = async () => {
    if (swept) return
    swept = true
    const supervisor = Number(mark.split(':')[0])
    const { found } = findOrphans({ mark })
    if (found.length > 0) {
      const { ended, killed } = await endProcesses(found, { killTimeout })
      say({ event: 'orphans-ended', supervisor, processes: ended, killed },
        `the supervisor (pid ${supervisor}) is gone: ended ${processCount(ended.length)} it left ` +
          `running: ${ended.join(', ')}` + (killed.length > 0 ? `; ${killed.length} needed SIGKILL` : ''))
    }
    process.exit(0)
  }
  process.stdin.on('data', () => {}) // the supervisor writes nothing; only the end matters
  process.stdin.on('end', sweep)
  process.stdin.on('close', sweep)
  process.stdin.on('error', sweep)
}

// One warn line, as the pool's logger would write it, straight to fd 1: never process.stdout, which would make
// the fd it shares with the supervisor non-blocking for the supervisor too.
const WARN = 40
const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity }

function lineWriter ({ level = 'info', format = 'auto' }) {
  return (fields, msg) => {
    if ((LEVELS[level] ?? LEVELS.info) > WARN) return
    const fs = require('node:fs')
    const terminal = require('node:tty').isatty(1)
    let text = JSON.stringify({ level: WARN, time: Date.now(), ...fields, msg }) + '\n'
    if (format === 'pretty' || (format === 'auto' && terminal)) {
      try {
        text = require('../shared/logger').createPrettyRenderer({
          colorize: terminal
        })(text)
      } catch { /* the JSON, then */ }
    }
    try { fs.writeSync(1, text) } catch { /* nobody reads the pool's output any more */ }
  }
}

if (require.main === module) main()

module.exports = { Reaper, spawnReaper }
