'use strict'

// What the supervisor needs from the OS: the app's path, free ports, forking and watching and signalling
// workers, the clock and its timer. `SYSTEM` bundles it so tests can drive the supervisor with a fake one.

const childProcess = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { signalWorker, captureRemnant } = require('./process-group')
const { cpuTime } = require('../shared/proc')
const { captureOutput } = require('./app-output')
const { poolError, codes } = require('../errors')
const msg = require('../protocol/messages')
const channel = require('../protocol/channel')
const { warmUp } = require('./warmup')
const { MARK, supervisorMark, endLeftovers } = require('./leftovers')
const { Reaper } = require('./reaper')
const { EVENT } = require('./events')
const { checkInInterval } = require('./worker-handle')

const BOOTSTRAP = path.join(__dirname, '..', 'worker', 'bootstrap.js')
// The balancer accepts Node's default 16 KiB of headers and adds its own: a worker must accept more.
const HEADER_LIMIT = '--max-http-header-size=32768'

// `slot` 0 is a reload's canary; `workers` the pool's target. The app's output becomes log records (captureOutput).
function forkWorker ({ options: o, logger, app, workers, slot, host, port }) {
  const child = spawnWorker({ options: o, app, workers, slot, host, port })
  captureOutput(child, { logger, slot, port })
  return child
}

function spawnWorker ({ options: o, app, workers, slot, host, port }) {
  const env = { ...process.env, ...o.env }
  // Never Node's own IPC channel: through it the app could break the supervisor.
  delete env.NODE_CHANNEL_FD
  delete env.NODE_CHANNEL_SERIALIZATION_MODE
  const execArgv = withHeaderLimit(o.execArgv || process.execArgv.filter((a) => !a.startsWith('--inspect')), env)
  return spawnReleasingPipes(process.execPath, [...execArgv, BOOTSTRAP, ...(o.args || [])], {
    // Inherited, not process.cwd()'s path: a deploy may have removed it (ENOENT on every respawn).
    cwd: o.cwd || undefined,
    // The app's output, and the pool channel at fd CHANNEL_FD.
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    // Own session and group: Ctrl-C reaches the supervisor only (a graceful stop), and signalWorker reaches
    // the app's processes too.
    detached: true,
    env: {
      ...env,
      PORT: String(port),
      POOL_WORKER_ID: String(slot),
      POOL_WORKERS: String(workers),
      POOL_WORKER_HOST: host,
      POOL_APP: app,
      POOL_LOG_LEVEL: o.logLevel,
      POOL_HEARTBEAT_INTERVAL: String(o.heartbeatInterval),
      POOL_CHECK_IN_INTERVAL: String(checkInInterval(o)),
      // Limits it enforces where no front relays requests: "read,total" ms.
      POOL_WORKER_CONCURRENCY: String(o.workerConcurrency ?? 1),
      POOL_REQUEST_LIMITS: `${o.workerLimits?.read ?? 0},${o.workerLimits?.total ?? 0}`,
      [channel.CHANNEL_ENV]: String(channel.CHANNEL_FD),
      POOL_KILL_TIMEOUT: String(o.killTimeout),
      // Who forked it: how the reaper, or a later pool (endLeftovers), finds what it left running.
      [MARK]: supervisorMark()
    }
  })
}

// A fork failing with EMFILE/ENFILE leaks the stdio pipes' handles (Node 20), and such a slot retries for as
// long as that lasts. Catch them on their way into ChildProcess#spawn (synchronous) and close them.
function spawnReleasingPipes (file, args, options) {
  const { ChildProcess } = childProcess
  const spawnChild = ChildProcess.prototype.spawn
  let seen = null
  ChildProcess.prototype.spawn = function spawnSeen (normalized) {
    seen = normalized
    return spawnChild.call(this, normalized)
  }
  let child
  try {
    child = childProcess.spawn(file, args, options)
  } finally {
    ChildProcess.prototype.spawn = spawnChild
  }
  if (child.pid === undefined && !child.stdio) closePipeHandles(seen?.stdio)
  return child
}

function closePipeHandles (stdio) {
  if (!Array.isArray(stdio)) return
  for (const pipe of stdio) {
    if (pipe?.type === 'pipe' && typeof pipe.handle?.close === 'function') pipe.handle.close()
  }
}

// Unless the user chose one (execArgv or NODE_OPTIONS).
function withHeaderLimit (execArgv, env) {
  const flags = [...execArgv, ...String(env.NODE_OPTIONS || '').split(/\s+/)]
  return flags.some((a) => a.startsWith('--max-http-header-size')) ? execArgv : [...execArgv, HEADER_LIMIT]
}

function resolveApp (app, cwd = process.cwd()) {
  if (typeof app !== 'string' || app === '') {
    throw poolError(codes.APP_NOT_FOUND, 'no app given: pass the path of the app module (options.app)')
  }
  const file = path.resolve(cwd, app)
  let resolved
  try {
    resolved = require.resolve(file)
  } catch {
    const hint = fs.existsSync(file) ? ' (it exists but cannot be resolved as a module)' : ''
    throw poolError(codes.APP_NOT_FOUND, `cannot find app '${app}' (looked for ${file})${hint}`)
  }
  return throughSymlinks(file, resolved)
}

// require.resolve() follows symlinks; keep the user's (`current/server.js`) so a reload after a deploy that
// repoints `current` loads the new release.
function throughSymlinks (file, resolved) {
  for (let dir = file; ; dir = path.dirname(dir)) {
    let real
    try {
      real = fs.realpathSync(dir)
    } catch {
      if (dir === path.dirname(dir)) return resolved
      continue // `server` for server.js: its directory is the part that exists
    }
    if (resolved === real) return dir
    if (resolved.startsWith(real + path.sep)) return path.join(dir, path.relative(real, resolved))
    return resolved
  }
}

// Resolves null when `port` can be bound on `host`, else the error's code.
function bindError (port, host) {
  return new Promise((resolve) => {
    const server = net.createServer()
    server.once('error', (err) => resolve(err.code || err.message))
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(null)))
  })
}

// Each slot's port must be free before its first fork. `slots[i]` is `ports[i]`'s slot (default 1, 2, ...);
// `ours(slot)`: the pool's own worker took it meanwhile (another scale), not an error.
async function checkWorkerPorts (system, { host, ports, slots = ports.map((_, i) => i + 1), ours = () => false }) {
  for (const [i, port] of ports.entries()) {
    const err = await system.bindError(port, host)
    if (err && ours(slots[i])) continue
    if (err === 'EADDRINUSE') {
      throw poolError(codes.PORT_IN_USE, `port ${port} (slot ${slots[i]}) is already in use on ${host}`)
    }
    if (err) throw poolError(codes.PORT_IN_USE, `cannot listen on ${host}:${port} (slot ${slots[i]}): ${err}`)
  }
}

// A worker's or canary's events, as loop events (./events.js) via `enqueue`. A broken frame is one
// `channel-broken` (the loop kills it); an unusable message is dropped. `onGone()`: at the reap, for the fronts.
function watchChild (child, { handle, canary, who, slot, captureRemnant, enqueue, onGone }) {
  const base = { handle, canary, child }
  const end = channel.supervisorEnd(child)
  if (end) {
    channel.readFrames(end, {
      // Hot path: nothing allocated per message beyond the event.
      onMessage: (raw) => {
        const message = msg.parseWorkerMessage(raw)
        if (message) enqueue({ handle, canary, child, type: EVENT.MESSAGE, message })
      },
      onError: (problem) => enqueue({ ...base, type: EVENT.CHANNEL_BROKEN, problem, pid: child.pid })
    })
  }
  // Acts at the reap, not at the tick: SIGTERM the remnant while its number is surely ours, then onGone, since
  // a front sends every request to a dead worker (it looks free) until told (bench/death-notice.js).
  // The exit event waits for the worker's last output, so its `exit` line comes after it.
  child.on('exit', (code, signal) => {
    const exit = {
      ...base,
      type: EVENT.EXIT,
      code,
      signal,
      remnant: captureRemnant(child.pid),
      who,
      slot,
      pid: child.pid
    }
    if (onGone) onGone()
    afterOutputRead(child, () => {
      end?.destroy() // a process the app started may hold the worker's end: ours is done
      enqueue(exit)
    })
  })
  // A failed fork (EMFILE, ENFILE, EAGAIN): 'error', no 'exit', no process.
  child.on('error', (error) => { if (child.pid === undefined) enqueue({ ...base, type: EVENT.SPAWN_ERROR, error }) })
}

// A process the app started may hold the worker's pipes open: the exit is told after OUTPUT_GRACE ms anyway.
const OUTPUT_GRACE = 200

function afterOutputRead (child, fn) {
  const open = [child.stdout, child.stderr, channel.supervisorEnd(child)].filter((stream) => stream && !stream.closed)
  if (open.length === 0) return fn()
  let left = open.length
  let told = false
  const tell = () => {
    if (told) return
    told = true
    clearTimeout(timer)
    fn()
  }
  const timer = setTimeout(tell, OUTPUT_GRACE)
  for (const stream of open) stream.once('close', () => { if (--left === 0) tell() })
}

const SYSTEM = Object.freeze({
  fork: forkWorker,
  warmUp,
  signal: signalWorker,
  captureRemnant,
  cpuTime,
  bindError,
  endLeftovers,
  // → { stop() }
  startReaper: ({ killTimeout, logLevel, logFormat, logger }) => new Reaper({
    mark: supervisorMark(),
    killTimeout,
    logLevel,
    logFormat,
    logger
  }).start(),
  // Monotonic whole ms: a wall clock step moves no deadline (docs/decisions/0004); wallClock only labels.
  now: () => Math.floor(performance.now()),
  wallClock: () => Date.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms),
  clearTimer: (timer) => clearTimeout(timer)
})

module.exports = { SYSTEM, forkWorker, resolveApp, bindError, checkWorkerPorts, watchChild }
