'use strict'

// `pool status|reload|scale|stop`: commands for a running pool, sent over its control socket
// (lib/control). The socket is found the way `pool start` made it: --control, else the
// default path named after --port (see lib/control/path.js). A socket owned by another user
// is refused without connecting (lib/control/client.js).

const { EXIT, poolError, codes } = require('../errors')
const { toYargs, fromArgv } = require('./flags')
const { printError, Screen } = require('./output')
const { sendCommand } = require('../control/client')
const { clientControlPath, otherControlSockets } = require('../control/path')
const { formatStatus, statusJson, formatReload, formatScale, formatStop, rates } = require('../control/format')

const DEFAULT_FRONT_PORT = 9001

// In the options table format of lib/options.js, so flags parse and fail like `pool start`'s.
const CONNECTION = {
  control: { flag: 'control', kind: 'string', group: 'Control socket', describe: 'Path of the pool\'s control socket (as given to pool start --control)' },
  port: { flag: 'port', kind: 'port', group: 'Control socket', defaultText: String(DEFAULT_FRONT_PORT), describe: 'The pool\'s front port, to find its default control socket: the balancer --port, or the --worker-port with --balancer none/haproxy' },
  timeout: { flag: 'timeout', kind: 'duration', group: 'Control socket', defaultText: '10s for status, 15m otherwise', describe: 'How long to wait for the pool\'s answer (0: forever)' }
}

// reload, scale and stop wait for drains and boots, which have no fixed bound.
const TIMEOUTS = { status: 10000, reload: 15 * 60000, scale: 15 * 60000, stop: 15 * 60000 }

function connectionBuilder (y) {
  return y.options(toYargs(CONNECTION))
}

// Send one command; on "no pool here" with a default path, name the pools that do exist
// (unless `lookAround` is off: a watched pool that went away is not one to look for).
async function send (argv, command, args = {}, { waitForClose = false, lookAround = true } = {}) {
  const o = fromArgv(argv, CONNECTION)
  const socketPath = clientControlPath({ control: o.control, frontPort: o.port ?? DEFAULT_FRONT_PORT })
  const timeout = o.timeout ?? TIMEOUTS[command]
  try {
    return await sendCommand(socketPath, command, args, { timeout: timeout === 0 ? Infinity : timeout, waitForClose })
  } catch (err) {
    if (lookAround && err.code === codes.CONTROL_UNREACHABLE && !o.control && ['missing', 'refused'].includes(err.details?.reason)) {
      const others = await livePools(otherControlSockets().filter((s) => s.path !== socketPath))
      if (others.length > 0) err.message += ` (found ${others.map((s) => `${s.path}: use --port ${s.port}`).join('; ')})`
      else err.message += ' (pass the --port or --control the pool was started with)'
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

function command (spec) {
  return {
    ...spec,
    builder: (y) => connectionBuilder(spec.builder ? spec.builder(y) : y),
    handler: async (argv) => {
      try {
        const code = await spec.run(argv)
        process.exit(code ?? EXIT.OK)
      } catch (err) {
        printError(err)
      }
    }
  }
}

const WATCH = {
  interval: { flag: 'interval', kind: 'duration', default: 1000, group: 'Watch', describe: 'With --watch: how often the status is asked for and shown' }
}
const MIN_INTERVAL = 100

const status = command({
  command: 'status',
  describe: 'show every worker slot of a running pool, its queue and its front',
  builder: (y) => y
    .option('json', { type: 'boolean', describe: 'print the status as JSON: { front, queue, workers: [...] } (with --watch: one line per interval)' })
    .option('watch', { alias: 'w', type: 'boolean', group: 'Watch:', describe: 'keep the table on screen, refreshed every --interval, with CPU% and REQ/S per worker; Ctrl-C ends it' })
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
  if (interval < MIN_INTERVAL) throw poolError(codes.BAD_OPTION, `--interval must be at least ${MIN_INTERVAL}ms (got ${interval}ms)`)
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
    const started = Date.now()
    let s
    try {
      s = await send(argv, 'status', {}, { lookAround: previous === null })
    } catch (err) {
      if (previous === null) { screen?.leave(); throw err } // as `pool status`: no pool here
      const gone = ['missing', 'refused', 'closed'].includes(err.details?.reason)
      end(EXIT.FAILURE, `pool: pool pid ${previous.status.pid} ${gone ? 'went away' : 'stopped answering'}: ${err.message}\n`)
    }
    const current = { at: Date.now(), status: s }
    if (argv.json) out.write(JSON.stringify(s) + '\n')
    else {
      const frame = `every ${formatInterval(interval)}, ${new Date(current.at).toTimeString().slice(0, 8)}  ` + formatStatus(s, { rates: rates(previous, current) })
      if (screen) screen.draw(frame)
      else out.write(frame + '\n')
    }
    previous = current
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, interval - (Date.now() - started))))
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
  command: 'scale <workers>',
  describe: 'change the number of workers (going down drains the highest slots first)',
  builder: (y) => y.positional('workers', { type: 'string', describe: 'the new number of workers' }),
  run: async (argv) => {
    const raw = String(argv.workers)
    if (!/^\s*\d+\s*$/.test(raw) || Number(raw) < 1) throw poolError(codes.BAD_OPTION, `pool scale: the number of workers must be a positive integer (got '${raw}')`)
    process.stdout.write(formatScale(await send(argv, 'scale', { workers: Number(raw) })))
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
  const deadline = Date.now() + timeout
  while (Date.now() < deadline) {
    try { process.kill(pid, 0) } catch (err) { if (err.code === 'ESRCH') return }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

module.exports = [status, reload, scale, stop]
