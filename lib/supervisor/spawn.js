'use strict'

// What the supervisor needs from the operating system to run workers: the app's path, free
// ports, forking a worker (the bootstrap, in a session and process group of its own, with the
// slot's environment and the user's node flags, its output captured as log records), its
// events, signalling it, and the clock and its timer. `SYSTEM` is all of it in one object, so
// that tests can drive the supervisor with a fake one.

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
// The embedded balancer accepts requests under Node's default 16 KiB header limit and forwards
// them with headers of its own (X-Forwarded-For, X-Request-Id...): a worker must accept more.
const HEADER_LIMIT = '--max-http-header-size=32768'

// `slot` and `port` are the handle's (0 for a reload's canary), `workers` the pool's target.
// The worker's stdout and stderr are pipes read by the supervisor (captureOutput):
// what the app prints reaches the pool's log (`logger`, the supervisor's) as records tagged with
// slot and pid, not raw text between the JSON lines.
function forkWorker ({ options: o, logger, app, workers, slot, host, port }) {
  const child = spawnWorker({ options: o, app, workers, slot, host, port })
  captureOutput(child, { logger, slot, port })
  return child
}

function spawnWorker ({ options: o, app, workers, slot, host, port }) {
  const env = { ...process.env, ...o.env }
  // Node's own IPC channel is never set up in a worker (through it the app could break the
  // supervisor), even when the options' env names one.
  delete env.NODE_CHANNEL_FD
  delete env.NODE_CHANNEL_SERIALIZATION_MODE
  const execArgv = withHeaderLimit(o.execArgv || process.execArgv.filter((a) => !a.startsWith('--inspect')), env)
  return spawnReleasingPipes(process.execPath, [...execArgv, BOOTSTRAP, ...(o.args || [])], {
    // Without a `cwd` the worker inherits the supervisor's working directory, even one removed
    // since the pool started (an old release's directory cleaned up by a deploy): a path to it,
    // process.cwd()'s, would fail every respawn with ENOENT.
    cwd: o.cwd || undefined,
    // stdout and stderr for the app's output, and the pool channel at fd CHANNEL_FD.
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    // Own session and process group: a terminal's Ctrl-C reaches the supervisor only, which
    // then stops the workers gracefully instead of every worker dying mid-request at once; and
    // the supervisor can signal a worker together with the processes its app started
    // (signalWorker).
    detached: true,
    env: {
      ...env,
      PORT: String(port),
      POOL_WORKER_ID: String(slot),
      POOL_WORKERS: String(workers),
      POOL_WORKER_HOST: host,
      POOL_APP: app,
      POOL_LOG_LEVEL: o.logLevel,
      // How often it checks in, idle and while it holds requests (worker-handle.js).
      POOL_HEARTBEAT_INTERVAL: String(o.heartbeatInterval),
      POOL_CHECK_IN_INTERVAL: String(checkInInterval(o)),
      // How many requests its guard renders at once (--worker-concurrency), and the limits on each
      // request it enforces itself (where no front of the pool's relays them): "read,total" ms.
      POOL_WORKER_CONCURRENCY: String(o.workerConcurrency ?? 1),
      POOL_REQUEST_LIMITS: `${o.workerLimits?.read ?? 0},${o.workerLimits?.total ?? 0}`,
      [channel.CHANNEL_ENV]: String(channel.CHANNEL_FD),
      POOL_KILL_TIMEOUT: String(o.killTimeout),
      // Who forked it: by it the pool's reaper finds what this process left running once it is
      // gone, and so does a later pool (endLeftovers).
      [MARK]: supervisorMark()
    }
  })
}

// child_process.spawn() makes a handle for each stdio pipe before it forks, and a fork that
// fails with EMFILE or ENFILE returns before any stream is made of them, never closing them
// (Node 20): three handles lost per failed fork (memory, no descriptor), while a slot out
// of descriptors retries as long as that lasts. They are only in the options Node hands its
// ChildProcess's spawn(): seen on the way in (synchronously: nothing else runs meanwhile), and
// closed when the fork failed that way. Should Node close them itself one day, closing a closed
// handle does nothing.
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

// The pool's header limit, unless the user chose one (in execArgv or in NODE_OPTIONS).
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

// require.resolve() follows symlinks, and the app's path must not: a deploy that points a
// `current` symlink at a new release and then reloads must get the new release. So the path
// the workers load keeps the links the user gave (`current/server.js`, not the release it points
// to today), and each new worker follows them when it loads the app.
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

// Every slot's port must be free before its first worker is forked (at start, and for the slots
// a scale-up adds). `slots[i]` is the slot of `ports[i]` (default: 1, 2, ...). `ours(slot)`: the
// port is taken by the pool's own worker by now (another scale got there first): not an error.
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

// A child's events, as events of the supervisor's loop (./events.js): `enqueue({ type, handle |
// canary, child, ... })`, the same types for a slot's worker and a reload's canary. What the app
// sends is checked at this door: a frame that breaks the pool channel's framing is one `channel-broken` event (the loop
// kills the process), a message the loop cannot use (messages.parseWorkerMessage) is dropped.
// `onGone()`: called at the reap, for the fronts (below).
function watchChild (child, { handle, canary, who, slot, captureRemnant, enqueue, onGone }) {
  const base = { handle, canary, child }
  const end = channel.supervisorEnd(child)
  if (end) {
    channel.readFrames(end, {
      // Thousands a second under load: no more made per message than the event itself.
      onMessage: (raw) => {
        const message = msg.parseWorkerMessage(raw)
        if (message) enqueue({ handle, canary, child, type: EVENT.MESSAGE, message })
      },
      onError: (problem) => enqueue({ ...base, type: EVENT.CHANNEL_BROKEN, problem, pid: child.pid })
    })
  }
  // The one event source that acts, twice, right at the reap. First, while the group's number
  // is surely the worker's, what is left of its group gets its SIGTERM
  // (captureRemnant). Then the fronts hear that the worker is gone (onGone: out
  // of the balancer's rotation, MAINT in HAProxy): to a front a dead worker looks like the free
  // one, and until it hears, every request it holds goes there and is refused, so this must not
  // wait for the worker's output to be read or for the tick (measured in bench/death-notice.js).
  // It only takes the worker out of rotation; the tick still does everything else, and its own
  // announcement of the same exit does nothing (Pool.announceGone is once per process). The exit
  // is told once the worker's last lines and messages are read (afterOutputRead):
  // its `exit` line comes after them, and the pool's `stopped` after every worker's output.
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
  // A fork that failed (EMFILE, ENFILE, EAGAIN) emits 'error' and no 'exit': no process ever
  // ran, so this is no exit, and nothing the app did.
  child.on('error', (error) => { if (child.pid === undefined) enqueue({ ...base, type: EVENT.SPAWN_ERROR, error }) })
}

// A worker's stdout, stderr and channel close when it exits, unless a process its app started
// still holds them (it got its SIGTERM at the reap, above): then the exit is told after
// OUTPUT_GRACE ms all the same, and that process's last lines come after it, tagged with the
// worker's pid.
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
  // The pool's reaper, started: { stop() }.
  startReaper: ({ killTimeout, logLevel, logFormat, logger }) => new Reaper({
    mark: supervisorMark(),
    killTimeout,
    logLevel,
    logFormat,
    logger
  }).start(),
  // The pool's clock is monotonic: a step of the wall clock (NTP, a VM resumed) moves no
  // deadline. The wall clock only labels instants for people. Whole ms, as the deadlines are.
  now: () => Math.floor(performance.now()),
  wallClock: () => Date.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms),
  clearTimer: (timer) => clearTimeout(timer)
})

module.exports = { SYSTEM, forkWorker, resolveApp, bindError, checkWorkerPorts, watchChild }
