'use strict'

// Nothing outlives a killed supervisor: one small process per pool, its reaper, ends what the
// supervisor leaves running the moment the supervisor is gone, even a worker whose event loop
// is stuck for good (a render in an endless loop, a synchronous wait), which can notice nothing
// by itself. The reaper holds one end of a pipe whose other end only the supervisor holds: when
// the supervisor dies, however (SIGKILL, the OOM killer, a crash), the kernel closes its end and
// the reaper reads the end of the stream at once. It then does what the next pool on the same
// ports would do at its start (findOrphans), for its own supervisor only: every
// process carrying that supervisor's mark (the workers, a reload's canary, the app's processes
// that kept the environment) and every process in a worker's session gets SIGTERM, and whatever
// is left --kill-timeout later SIGKILL, each checked by its start time before it is signalled.
//
// It waits on that one read and nothing else: no timer, no thread, asleep until the end. It runs
// in a session of its own (a terminal's Ctrl-C, or a signal to the supervisor's process group,
// does not reach it), from `/` (a removed working directory is no obstacle), with the code it
// needs loaded from the start (the pool's files may be gone by the time it needs them). A
// stopped pool ends it first; a reaper that dies while its pool runs is started again.
//
// Cost: one Node process per pool, asleep (about 40 MB resident, of which some 6 MB its own: the
// rest is the node binary's pages, shared with the supervisor and the workers); per worker,
// nothing.

const path = require('node:path')
const { spawn } = require('node:child_process')
const { MARK } = require('./leftovers')

const RESTART_DELAY = 1000 // ms before a reaper that died while its pool runs is started again
const QUIET = 60000 // ms: a reaper failing again within this is said at debug, not warn
// What the reaper is told by its environment (and the supervisor's mark, MARK).
const ENV = {
  killTimeout: 'POOL_REAPER_KILL_TIMEOUT',
  logLevel: 'POOL_REAPER_LOG_LEVEL',
  logFormat: 'POOL_REAPER_LOG_FORMAT'
}

// ── in the supervisor ─────────────────────────────────────────────────────────────────────────

class Reaper {
  // mark: the supervisor's (supervisorMark); logger: the pool's.
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

  // While the pool runs, a pool without a reaper loses a guarantee: said, and mended.
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

  // The pool stopped, every worker gone: the reaper has nothing to wait for.
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
    // Its stdin is the pipe; what it says goes where the pool's own lines go.
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

// One warn line, as the pool's logger writes them (JSON, or rendered for a person), written to
// fd 1 itself. Never through process.stdout: the reaper's fd 1 is the supervisor's, one open
// pipe or terminal shared by both, and making that stream would make it non-blocking for the
// supervisor too, whose logger then sleeps at every full pipe.
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
