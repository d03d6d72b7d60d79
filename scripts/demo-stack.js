#!/usr/bin/env node
'use strict'

// The production topology on one machine, for trying it: nginx → HAProxy → pool serving the SSR
// demo, from the configs `pool config nginx` and `pool config haproxy` generate, in a temporary
// prefix on free loopback ports, without root.
//
//   npm run demo:stack [-- --port 8080] [-- -n 4]
//
// Prints where to point a browser, HAProxy's stats page and the pool's status page once every
// worker is in service. Ctrl-C (SIGINT) or SIGTERM stops nginx, then the pool (it drains its
// workers through HAProxy), then HAProxy, and removes the prefix. If one of them dies on its
// own, the others are stopped too and the script exits 1 with one line saying which.
//
// The three run in the foreground as children of this script, each in its own process group so
// that a Ctrl-C reaches only this script, which then stops them in that order. Started as root,
// nginx's workers run as nobody: the prefix is 0755 and HAProxy's HTTP socket mode 666 (the
// generated default), so they still reach it.

const fs = require('node:fs')
const os = require('node:os')
const net = require('node:net')
const http = require('node:http')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { haproxyConfig, resolveHaproxyOptions, poolStartArgs } = require('../lib/generate/haproxy')
const { nginxConfig } = require('../lib/generate/nginx')
const { HaproxyClient } = require('../lib/haproxy/client')

const ROOT = path.join(__dirname, '..')
const POOL_BIN = path.join(ROOT, 'bin', 'pool.js')
const APP = path.join(ROOT, 'examples', 'ssr', 'server.js')
const NAME = 'demo-stack'
const USAGE = `usage: npm run demo:stack [-- --port PORT] [-- -n WORKERS]
  --port PORT     nginx's port on 127.0.0.1 (default: a free one)
  -n, --workers N workers of the SSR demo (default 2)`

// How long each part may take to come up; the SSR workers load React first.
const START_TIMEOUT = { haproxy: 10000, nginx: 10000, pool: 60000 }
// How long each may take to stop before it is killed. The pool waits for running requests
// (--graceful-timeout, 30 s) and then for its workers to exit.
const STOP_GRACE = { nginx: 5000, pool: 45000, haproxy: 5000 }

class UsageError extends Error {}

function parseArgs (argv) {
  const args = { port: undefined, workers: 2 }
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s)
    const value = () => {
      const v = inline ?? argv[++i]
      if (v === undefined) throw new UsageError(`${flag} needs a value`)
      return v
    }
    if (flag === '-h' || flag === '--help') return { help: true }
    else if (flag === '--port') args.port = integer(flag, value(), 1, 65535)
    else if (flag === '-n' || flag === '--workers') args.workers = integer(flag, value(), 1, 64)
    else throw new UsageError(`unknown argument '${argv[i]}' (try --help)`)
  }
  return args
}

function integer (flag, text, min, max) {
  const n = /^\d+$/.test(text) ? Number(text) : NaN
  if (!(n >= min && n <= max)) throw new UsageError(`${flag} must be an integer from ${min} to ${max} (got '${text}')`)
  return n
}

// ── ports ──────────────────────────────────────────────────────────────────────────────────────

function canBind (port) {
  return new Promise((resolve) => {
    const server = net.createServer()
    server.once('error', () => resolve(false))
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)))
  })
}

// Below the range the kernel picks clients' source ports from, so that no outgoing connection
// takes a worker's port while the worker is being respawned.
function ephemeralLow () {
  try {
    return Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768
  } catch {
    return 32768
  }
}

// `count` consecutive free ports on 127.0.0.1 from a random base, none of them in `avoid`.
async function freeRun (count, avoid) {
  const low = 10000
  const high = Math.max(low + 1000, ephemeralLow()) - count
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = low + Math.floor(Math.random() * (high - low))
    let ok = true
    for (let p = base; p < base + count && ok; p++) ok = !avoid.includes(p) && await canBind(p)
    if (ok) return Array.from({ length: count }, (_, i) => base + i)
  }
  throw new Error(`found no ${count} consecutive free ports on 127.0.0.1`)
}

// ── children ───────────────────────────────────────────────────────────────────────────────────

function findBinary (name, envVar) {
  if (process.env[envVar]) return process.env[envVar]
  // /usr/sbin is often missing from an unprivileged user's PATH, and both live there on Debian.
  const dirs = [...(process.env.PATH || '').split(path.delimiter), '/usr/sbin', '/usr/local/sbin', '/sbin']
  for (const dir of dirs) {
    const file = path.join(dir, name)
    try { fs.accessSync(file, fs.constants.X_OK); return file } catch {}
  }
  throw new Error(`${name} not found on PATH or in /usr/sbin (install it, or set ${envVar}=/path/to/${name})`)
}

// A child in its own process group. Its output is kept (the last lines) to say why it died,
// unless `inherit`, where it goes to this script's stdout and stderr as it comes.
function startChild (stack, name, file, args, { inherit = false, cwd } = {}) {
  const child = spawn(file, args, { cwd, detached: true, stdio: ['ignore', inherit ? 'inherit' : 'pipe', inherit ? 'inherit' : 'pipe'] })
  const entry = { name, child, tail: [], exited: null }
  const keep = (data) => { entry.tail = entry.tail.concat(String(data).split('\n').filter((l) => l.trim())).slice(-5) }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  entry.exited = new Promise((resolve) => {
    child.once('error', (err) => { entry.spawnError = err; resolve({ code: null, signal: null }) })
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })
  entry.exited.then(({ code, signal }) => {
    entry.done = true
    if (!stack.stopping) stack.fail(`${name} ${exitText(entry, { code, signal })}`)
  })
  stack.children.push(entry)
  return entry
}

// 'exited (code 1): its last line of output', or 'was killed (SIGKILL)' (a process that was
// killed said nothing about why), or 'could not be started (spawn … ENOENT)'.
function exitText (entry, { code, signal }) {
  if (entry.spawnError) return `could not be started (${entry.spawnError.message})`
  if (signal) return `was killed (${signal})`
  return `exited (code ${code})${entry.tail.length ? `: ${entry.tail.at(-1)}` : ''}`
}

// SIGTERM, then SIGKILL after `grace` ms; resolves once it exited. Its own children (the pool's
// workers, nginx's) normally go with it; any left, because it had to be killed, are killed too.
async function stopChild (entry, grace) {
  if (entry.done) return
  const below = descendants(entry.child.pid)
  entry.child.kill('SIGTERM')
  const timer = setTimeout(() => entry.child.kill('SIGKILL'), grace)
  await entry.exited
  clearTimeout(timer)
  // Only a process that is still the one seen before (same start time): a pid can be reused.
  for (const { pid, started } of below) {
    if (procStat(pid)?.started === started) { try { process.kill(pid, 'SIGKILL') } catch {} }
  }
}

// { ppid, started } of a process from /proc/PID/stat, or null when it is gone.
function procStat (pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { ppid: Number(fields[1]), started: fields[19] }
  } catch {
    return null
  }
}

// Every process below `pid` as { pid, started }, from /proc (none where there is no /proc).
function descendants (pid) {
  const children = new Map()
  let names = []
  try { names = fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)) } catch {}
  for (const name of names) {
    const stat = procStat(name)
    if (!stat) continue
    if (!children.has(stat.ppid)) children.set(stat.ppid, [])
    children.get(stat.ppid).push({ pid: Number(name), started: stat.started })
  }
  const out = []
  for (let i = 0, todo = [pid]; i < todo.length; i++) {
    for (const c of children.get(todo[i]) || []) { out.push(c); todo.push(c.pid) }
  }
  return out
}

// Poll `check` until it is true; fails early when `entry` exits.
async function until (entry, what, timeout, check) {
  const deadline = Date.now() + timeout
  for (;;) {
    if (entry.done) throw new Error(`${entry.name} stopped while starting`)
    try { if (await check()) return } catch {}
    if (Date.now() > deadline) throw new Error(`${what} within ${timeout / 1000} s`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

function get (url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, timeout: 2000 }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)) })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
  })
}

// ── the stack ──────────────────────────────────────────────────────────────────────────────────

function createStack () {
  const stack = {
    children: [],
    prefix: null,
    stopping: false,
    stopped: null, // the promise of stop(), once called
    // Stop nginx first (no new requests), then the pool (it drains through HAProxy), then
    // HAProxy; remove the prefix. Resolves with nothing; idempotent.
    stop () {
      if (!stack.stopped) {
        stack.stopping = true
        stack.stopped = (async () => {
          for (const name of ['nginx', 'pool', 'haproxy']) {
            const entry = stack.children.find((c) => c.name === name)
            if (entry) await stopChild(entry, STOP_GRACE[name])
          }
          removePrefix(stack)
        })()
      }
      return stack.stopped
    },
    // A part died or failed to start: stop the rest, one line, exit 1.
    fail (line) {
      if (stack.stopping) return
      process.stderr.write(`${NAME}: ${line}; stopping everything\n`)
      stack.stop().then(() => process.exit(1))
    }
  }
  return stack
}

function removePrefix (stack) {
  if (stack.prefix) fs.rmSync(stack.prefix, { recursive: true, force: true })
}

async function start (stack, { port, workers }) {
  const haproxyBin = findBinary('haproxy', 'HAPROXY')
  const nginxBin = findBinary('nginx', 'NGINX')

  // [HAProxy stats, pool stats, HAProxy frontend, worker1..N]: the pool's stats port is passed
  // explicitly, and its default (--worker-port − 2) is free anyway.
  const [haproxyStatsPort, poolStatsPort, haproxyPort, workerPort] = await freeRun(3 + workers, port ? [port] : [])
  const nginxPort = port ?? (await freeRun(1, [haproxyStatsPort, poolStatsPort, haproxyPort]))[0]

  stack.prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-demo-'))
  // nginx's workers (nobody, when started as root) reach HAProxy's socket and their temp files.
  fs.chmodSync(stack.prefix, 0o755)
  const nginxPrefix = path.join(stack.prefix, 'nginx')
  fs.mkdirSync(path.join(nginxPrefix, 'logs'), { recursive: true })

  const haproxyOptions = { workers, workerPort, port: haproxyPort, statsPort: haproxyStatsPort, prefix: stack.prefix, log: 'none' }
  const o = resolveHaproxyOptions(haproxyOptions)
  const haproxyFile = path.join(stack.prefix, 'haproxy.cfg')
  fs.writeFileSync(haproxyFile, haproxyConfig(haproxyOptions))
  const nginxFile = path.join(nginxPrefix, 'nginx.conf')
  fs.writeFileSync(nginxFile, nginxConfig({ prefix: nginxPrefix, host: '127.0.0.1', port: nginxPort, haproxySocket: o.httpSocket }))

  const haproxy = startChild(stack, 'haproxy', haproxyBin, ['-db', '-f', haproxyFile])
  const client = new HaproxyClient({ socket: o.socket, timeout: 1000 })
  await until(haproxy, 'HAProxy did not answer on its runtime API', START_TIMEOUT.haproxy, async () => (await client.level()) !== '')

  const nginx = startChild(stack, 'nginx', nginxBin, ['-p', nginxPrefix + '/', '-c', nginxFile, '-e', path.join(nginxPrefix, 'logs', 'error.log'), '-g', 'daemon off;'])
  await until(nginx, 'nginx did not answer /ping', START_TIMEOUT.nginx, async () => (await get(`http://127.0.0.1:${nginxPort}/ping`)) === 200)

  const control = path.join(stack.prefix, 'pool.sock')
  const pool = startChild(stack, 'pool', process.execPath, [POOL_BIN, 'start', APP, ...poolStartArgs(o), '--stats-port', String(poolStatsPort), '--control', control], { inherit: true, cwd: ROOT })
  await until(pool, 'the workers were not all in service', START_TIMEOUT.pool,
    async () => Object.values(await client.servers(o.backend)).every((s) => s.status === 'UP'))

  return { nginxPort, haproxyStatsPort, poolStatsPort, control, workers }
}

function banner (stack, s) {
  return [
    '',
    `pool demo stack: nginx → HAProxy → pool (${s.workers} workers of examples/ssr/server.js), in ${stack.prefix}`,
    `  page     http://127.0.0.1:${s.nginxPort}/    the SSR demo through nginx: open it in a browser`,
    `  haproxy  http://127.0.0.1:${s.haproxyStatsPort}/    HAProxy's stats page (/metrics: Prometheus)`,
    `  pool     http://127.0.0.1:${s.poolStatsPort}/    the pool's status page (/status: JSON, /metrics)`,
    `  control  node bin/pool.js status --control ${s.control}`,
    `Ctrl-C stops everything and removes ${stack.prefix}.`,
    ''
  ].join('\n')
}

async function main () {
  let args
  try {
    args = parseArgs(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`${NAME}: ${err.message}\n`)
    process.exit(2)
  }
  if (args.help) return console.log(USAGE)
  if (args.port !== undefined && !(await canBind(args.port))) {
    process.stderr.write(`${NAME}: port ${args.port} on 127.0.0.1 is in use (--port)\n`)
    process.exit(2)
  }

  const stack = createStack()
  let interrupted = false
  const onSignal = (signal) => {
    if (interrupted) {
      // A second Ctrl-C: do not wait for the pool's drain.
      for (const c of stack.children) if (!c.done) c.child.kill('SIGKILL')
      return
    }
    interrupted = true
    process.stderr.write(`\n${NAME}: ${signal}, stopping nginx, the pool and HAProxy\n`)
    stack.stop().then(() => process.exit(0))
  }
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, onSignal)
  // Last resort (an exception in this script): nothing is left running, nothing left behind.
  process.on('exit', () => {
    for (const c of stack.children) if (!c.done) { try { c.child.kill('SIGKILL') } catch {} }
    removePrefix(stack)
  })

  try {
    const started = await start(stack, args)
    if (!stack.stopping) process.stdout.write(banner(stack, started))
  } catch (err) {
    stack.fail(err.message)
  }
}

main()
