'use strict'

// `pool status|reload|scale|recycle|stop`: commands for a running pool, sent over its control
// socket. The socket is found the way `pool start` made it, from the flags the pool was started
// with (./locate.js): --control, else the default path named after its front port. A socket
// owned by another user is refused without connecting.

const { poolError, codes } = require('../errors')
const { EXIT } = require('./exit-codes')
const { toYargs, fromArgv } = require('./flags')
const { printError, Screen } = require('./output')
const { locatingBuilder, locate, ignoredNote } = require('./locate')
const { sendCommand } = require('../control/client')
const { otherControlSockets } = require('../control/path')
const {
  formatStatus, statusJson, formatReload, formatScale, formatRecycle, formatStop,
  rates
} = require('../control/format')

// The command's own; in the option table's format, so it parses and fails
// like `pool start`'s flags. Not --timeout: that is `pool start`'s request timeout, which an
// operator pasting the start command's flags would otherwise turn into this wait.
const WAIT = {
  wait: {
    flag: 'wait',
    kind: 'duration',
    group: 'Command',
    defaultText: '10s for status, 15m otherwise',
    describe: 'How long to wait for the pool\'s answer (0: forever)'
  }
}

// reload, scale, recycle and stop wait for drains and boots, which have no fixed bound.
const WAITS = { status: 10000, reload: 15 * 60000, scale: 15 * 60000, recycle: 15 * 60000, stop: 15 * 60000 }

// Send one command; on "no pool here" with a default path, name the pools that do exist
// (unless `lookAround` is off: a watched pool that went away is not one to look for).
async function send (argv, command, args = {}, { waitForClose = false, lookAround = true } = {}) {
  const { socketPath, explicit } = locate(argv)
  const { wait = WAITS[command] } = fromArgv(argv, WAIT)
  try {
    return await sendCommand(socketPath, command, args, { timeout: wait === 0 ? Infinity : wait, waitForClose })
  } catch (err) {
    if (lookAround && err.code === codes.CONTROL_UNREACHABLE && !explicit &&
      ['missing', 'refused'].includes(err.details?.reason)) {
      const others = await livePools(otherControlSockets().filter((s) => s.path !== socketPath))
      if (others.length > 0) {
        err.message += ` (found ${others.map((s) => `${s.path}: use ` +
          `--port ${s.port}`).join('; ')})`
      } else {
        err.message += ' (pass the flags the pool was started with: --port, --worker-port with --balancer, or ' +
          '--control; pool ls lists your pools)'
      }
    }
    throw err
  }
}

// Only sockets a pool answers on: files left by SIGKILLed pools are not worth naming.
async function livePools (sockets) {
  const answers = await Promise.all(sockets.slice(0, 20).map((s) =>
    sendCommand(s.path, 'ping', {}, { timeout: 500 }).then(() => s, () => null)))
  return answers.filter(Boolean)
}

// Every control command takes `pool start`'s flags (those that find the pool, the others
// ignored, and said so on stderr) and its own --wait.
function command (spec) {
  return {
    ...spec,
    appArgs: 'ignore', // pasted with the start command's flags
    builder: (y) => locatingBuilder(spec.builder ? spec.builder(y) : y).options(toYargs(WAIT))
      .epilogue('Every flag of pool start is accepted too, so that the command the pool was started with can be ' +
        'pasted: the ones above find the pool, the others are ignored.'),
    handler: async (argv) => {
      try {
        const note = ignoredNote(argv)
        if (note) process.stderr.write(note)
        const code = await spec.run(argv)
        process.exit(code ?? EXIT.OK)
      } catch (err) {
        printError(err)
      }
    }
  }
}

const WATCH = {
  interval: {
    flag: 'interval',
    kind: 'duration',
    default: 1000,
    group: 'Watch',
    describe: 'With --watch: how often the status is asked for and shown'
  }
}
const MIN_INTERVAL = 100
// A watched pool that closed the connection unanswered is asked again this often, this many times.
const CLOSED_RETRY_MS = 100
const CLOSED_RETRIES = 5

const status = command({
  command: 'status',
  describe: 'show every worker slot of a running pool, its queue and its front',
  builder: (y) => y
    .option('json', {
      type: 'boolean',
      describe: 'print the status as JSON: { front, queue, workers: [...] } (with --watch: one line per interval)'
    })
    .option('watch', {
      alias: 'w',
      type: 'boolean',
      group: 'Watch:',
      describe: 'keep the table on screen, refreshed every --interval, with CPU% and REQ/S per worker; Ctrl-C ends it'
    })
    .options(toYargs(WATCH)),
  run: async (argv) => {
    const { interval } = fromArgv(argv, WATCH)
    if (interval !== undefined && !argv.watch) throw poolError(codes.BAD_OPTION, '--interval goes with --watch')
    if (argv.watch) return watch(argv, interval ?? WATCH.interval.default)
    const s = await send(argv, 'status')
    process.stdout.write(argv.json ? statusJson(s) : formatStatus(s))
  }
})

// `pool status --watch`: the status again every interval until Ctrl-C (exit 0) or until the
// pool goes away (one line, exit 1). On a terminal the table is redrawn in place on the
// alternate screen, as top does, so the user's scrollback is left as it was; piped, one table
// per interval, for a log.
async function watch (argv, interval) {
  if (interval < MIN_INTERVAL) {
    throw poolError(codes.BAD_OPTION, `--interval must be at least ${MIN_INTERVAL}ms (got ${interval}ms)`)
  }
  const out = process.stdout
  const screen = out.isTTY && !argv.json ? new Screen(out) : null
  const end = (code, line) => {
    screen?.leave()
    if (line) process.stderr.write(line)
    process.exit(code)
  }
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => end(EXIT.OK))
  out.on('error', () => end(EXIT.OK)) // the reader went away (`| head`)
  let previous = null
  for (;;) {
    const started = performance.now()
    let s
    try {
      s = previous === null ? await send(argv, 'status', {}, { lookAround: true }) : await statusOrGone(argv)
    } catch (err) {
      if (previous === null) { screen?.leave(); throw err } // as `pool status`: no pool here
      const gone = ['missing', 'refused', 'closed'].includes(err.details?.reason)
      end(EXIT.FAILURE,
        `pool: pool pid ${previous.status.pid} ${gone ? 'went away' : 'stopped answering'}: ${err.message}\n`)
    }
    const current = { at: Date.now(), status: s }
    if (argv.json) out.write(JSON.stringify(s) + '\n')
    else {
      const frame = `every ${formatInterval(interval)}, ${new Date(current.at).toTimeString().slice(0, 8)}  ` +
        formatStatus(s, { rates: rates(previous, current) })
      if (screen) screen.draw(frame)
      else out.write(frame + '\n')
    }
    previous = current
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, interval - (performance.now() - started))))
  }
}

// A watched pool's status. A pool that is stopping may take the connection and close it
// unanswered as it closes its socket (the request then meets the close, or a reset): asked again
// a moment later, one that went away says so plainly (its socket gone or refusing), and one that
// is still there answers.
async function statusOrGone (argv) {
  for (let tries = 1; ; tries++) {
    try {
      return await send(argv, 'status', {}, { lookAround: false })
    } catch (err) {
      if (!['closed', 'io'].includes(err.details?.reason) || tries === CLOSED_RETRIES) throw err
      await new Promise((resolve) => setTimeout(resolve, CLOSED_RETRY_MS))
    }
  }
}

function formatInterval (ms) {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

const reload = command({
  command: 'reload',
  describe: 'rolling reload: replace every worker with the code now on disk, without failing a request',
  run: async (argv) => {
    process.stdout.write(formatReload(await send(argv, 'reload')))
  }
})

const scale = command({
  // Not <workers>: that is `pool start`'s --workers (-n), which a pasted start command brings.
  command: 'scale <count>',
  describe: 'change the number of workers (going down drains the highest slots first)',
  builder: (y) => y.positional('count', { type: 'string', describe: 'the new number of workers' }),
  run: async (argv) => {
    const raw = String(argv.count)
    if (!/^\s*\d+\s*$/.test(raw) || Number(raw) < 1) {
      throw poolError(codes.BAD_OPTION, `pool scale: the number of workers must be a positive integer (got '${raw}')`)
    }
    process.stdout.write(formatScale(await send(argv, 'scale', { workers: Number(raw) })))
  }
})

const recycle = command({
  command: 'recycle <slot>',
  describe: 'replace one slot\'s worker with a new process, through the drain (its running request finishes first)',
  builder: (y) => y.positional('slot', { type: 'string', describe: 'the slot (1..N, as pool status lists them)' }),
  run: async (argv) => {
    const raw = String(argv.slot)
    if (!/^\s*\d+\s*$/.test(raw) || Number(raw) < 1) {
      throw poolError(codes.BAD_OPTION,
        `pool recycle: the slot must be a positive integer, as pool status lists them (got '${raw}')`)
    }
    process.stdout.write(formatRecycle(await send(argv, 'recycle', { slot: Number(raw) })))
  }
})

const stop = command({
  command: 'stop',
  describe: 'graceful stop: running requests finish, then the pool exits',
  run: async (argv) => {
    const result = await send(argv, 'stop', {}, { waitForClose: true })
    await processGone(result.pid, 10000)
    process.stdout.write(formatStop(result))
    return result.clean ? EXIT.OK : EXIT.UNCLEAN_STOP
  }
})

// The pool answers `stop` just before it exits; wait (bounded) for the process to be gone, so
// a script can start a new pool on the same ports right after `pool stop` returns.
async function processGone (pid, timeout) {
  if (!Number.isInteger(pid)) return
  const deadline = performance.now() + timeout
  while (performance.now() < deadline) {
    try { process.kill(pid, 0) } catch (err) { if (err.code === 'ESRCH') return }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

module.exports = [status, reload, scale, recycle, stop]
