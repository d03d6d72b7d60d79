'use strict'

// Shared helpers for integration tests: free loopback ports, a `pool` CLI child whose JSON log
// lines can be awaited, bounded HTTP requests, and polling with a deadline.

const fs = require('node:fs')
const os = require('node:os')
const net = require('node:net')
const http = require('node:http')
const path = require('node:path')
const { spawn } = require('node:child_process')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'pool.js')
const FIXTURES = path.join(__dirname, 'fixtures')

// Every process a test starts carries this run's mark (./helpers/test-run.js).
const { RUN_ENV, testRunMark } = require('./helpers/test-run')
process.env[RUN_ENV] ??= testRunMark()

// Control sockets of test pools go to a directory of this test process, not the shared /tmp.
const RUNTIME_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-test-run-'))
process.on('exit', () => fs.rmSync(RUNTIME_DIR, { recursive: true, force: true }))

// `node ARGS...` as a command whose environment has only the NODE_OPTIONS a test gives (in
// `env`), so that the pool under test runs as in production: tap puts its own loader in
// NODE_OPTIONS of whatever a test spawns, after the environment is set, and a pool would hand
// it on to every worker it forks, where it slows each boot (about 100 ms on this box) and needs
// a working directory that exists. /usr/bin/env execs node, so the pid is node's.
function nodeCommand (args, env = {}) {
  const options = env.NODE_OPTIONS ? [`NODE_OPTIONS=${env.NODE_OPTIONS}`] : []
  return ['/usr/bin/env', ['-u', 'NODE_OPTIONS', ...options, process.execPath, ...args]]
}

function cleanEnv (extra = {}) {
  const env = { ...process.env, XDG_RUNTIME_DIR: RUNTIME_DIR }
  delete env.NODE_OPTIONS // tap's; NODE_OPTIONS a test passes in `extra` is kept
  return { ...env, ...extra }
}

function canBind (port, host = '127.0.0.1') {
  return new Promise((resolve) => {
    const s = net.createServer()
    s.once('error', () => resolve(false))
    s.listen({ port, host, exclusive: true }, () => s.close(() => resolve(true)))
  })
}

// The lowest port the kernel hands out as a client's source port. Test ports stay below it:
// a port in that range can be taken by any outgoing connection (a client of the test, say)
// while a worker being respawned has it unbound, and the respawn then fails to listen.
function ephemeralLow () {
  try {
    return Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768
  } catch {
    return 32768
  }
}

// A run of `count` consecutive free ports on 127.0.0.1, from a random base so that concurrent
// test files rarely meet. Suites run side by side (.ci/run) each draw from a slice of their own
// (TEST_PORT_SLICE=k/n): a port one suite found free is never bound by another meanwhile. A
// port is given once per test file: one given but not yet bound (a lab HAProxy's servers, which
// nothing listens on until the pool starts) is free to bind, and was once handed out again.
const portsGiven = new Set()

async function freePorts (count = 1) {
  const [low, high] = portRange(count)
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = low + Math.floor(Math.random() * (high - low))
    const run = Array.from({ length: count }, (_, i) => base + i)
    let ok = true
    for (let i = 0; i < count && ok; i++) ok = await canBind(run[i])
    if (!ok || run.some((p) => portsGiven.has(p))) continue // given before, or meanwhile by a call made at once
    for (const p of run) portsGiven.add(p)
    return run
  }
  throw new Error(`no run of ${count} free ports found`)
}

function portRange (count) {
  const low = 10000
  const high = Math.max(low + 1000, ephemeralLow())
  const slice = /^(\d+)\/(\d+)$/.exec(process.env.TEST_PORT_SLICE ?? '')
  if (!slice || Number(slice[2]) < 2) return [low, high - count]
  const [k, n] = [Number(slice[1]), Number(slice[2])]
  const size = Math.floor((high - low) / n)
  return [low + k * size, low + (k + 1) * size - count]
}

async function freePort () { return (await freePorts(1))[0] }

// The path of test/fixtures/NAME.
function fixture (name) { return path.join(FIXTURES, name) }

// A fresh directory removed at `t`'s teardown. `openToOthers`: mode 0755 instead of 0700, so that
// processes running as another user (nginx's workers, a client dropped to 'nobody') reach what is
// inside, as in production.
function tempDir (t, prefix = 'pool-test-', { openToOthers = false } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  if (openToOthers) fs.chmodSync(dir, 0o755)
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

function sleep (ms) { return new Promise((resolve) => setTimeout(resolve, ms)) }

// Poll `fn` until it returns a truthy value or `timeout` ms pass.
async function waitFor (fn, { timeout = 10000, interval = 20, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout
  let last
  while (Date.now() < deadline) {
    try {
      last = await fn()
      if (last) return last
    } catch (err) { last = err }
    await sleep(interval)
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what}` +
    (last instanceof Error ? `: ${last.message}` : ''))
}

// Stop `child` for sure: `signal`, then SIGKILL after `grace` ms; resolves once it exited.
function stopChild (child, { signal = 'SIGTERM', grace = 5000 } = {}) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), grace)
    child.once('exit', () => { clearTimeout(timer); resolve() })
    child.kill(signal)
  })
}

// One HTTP request with a hard time bound. Resolves { status, headers, body } or rejects.
function request (url, { method = 'GET', headers = {}, body, timeout = 10000, agent = false } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end',
        () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }))
      res.on('error', reject)
    })
    req.setTimeout(timeout, () => req.destroy(new Error(`request to ${url} timed out after ${timeout} ms`)))
    req.on('error', reject)
    req.end(body)
  })
}

// Whether `pid` still runs. A zombie (exited, not yet reaped by its new parent, often a
// container's PID 1 that reaps lazily) runs no code and holds no port: it counts as gone, but
// only once every thread is: a process whose main thread has exited shows state Z while its
// other threads (a Node process has several) are still exiting, and until the last one is gone
// its files, and so its listening sockets, stay open.
function isAlive (pid) {
  try { process.kill(pid, 0) } catch { return false }
  const stateOf = (statPath) => fs.readFileSync(statPath, 'utf8').split(') ')[1][0]
  try {
    if (stateOf(`/proc/${pid}/stat`) !== 'Z') return true
    return fs.readdirSync(`/proc/${pid}/task`).some((tid) => {
      try { return !/[ZX]/.test(stateOf(`/proc/${pid}/task/${tid}/stat`)) } catch { return false }
    })
  } catch {
    try { process.kill(pid, 0); return true } catch { return false } // reaped meanwhile
  }
}

// `pool start` listens for stats just below the pool's ports by default, ports a test did not
// reserve: off unless the test names --stats-port (or asks for the default, `stats: true`).
function statsOff (args, stats) {
  if (args[0] !== 'start' || stats || args.includes('--stats-port')) return args
  const dashes = args.indexOf('--') // what follows is the app's
  return dashes < 0
    ? [...args, '--stats-port', '0']
    : [...args.slice(0, dashes), '--stats-port', '0', ...args.slice(dashes)]
}

// Each non-empty line of `text`, parsed as JSON; a line that is not JSON throws.
function parseJsonLines (text) {
  return text.split('\n').filter((line) => line.trim()).map((line) => JSON.parse(line))
}

// parseJsonLines of `file`'s content; [] when there is no such file (nothing logged yet).
function readJsonLines (file) {
  return fs.existsSync(file) ? parseJsonLines(fs.readFileSync(file, 'utf8')) : []
}

// Each JSON line of `stream` (a pool's stdout), parsed; other lines are skipped.
function onJsonLines (stream, onRecord) {
  let buf = ''
  stream.setEncoding('utf8')
  stream.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      let rec
      try { rec = JSON.parse(line) } catch { continue }
      onRecord(rec)
    }
  })
}

// Start `pool ARGS...` as a child with JSON logs. `child.logs` collects parsed lines;
// `child.waitLog(pred)` resolves with the first line matching; `child.stop()` ends it for sure.
function startPool (args, { env = {}, cwd = ROOT, stats = false } = {}) {
  const child = spawn(...nodeCommand([BIN, ...statsOff(args, stats)], env), {
    cwd,
    env: cleanEnv({ POOL_TEST: '1', ...env }),
    stdio: ['ignore', 'pipe', 'pipe']
  })
  child.logs = []
  child.stderrText = ''
  child.stdoutText = ''
  const waiters = new Set()
  child.stdout.on('data', (d) => { child.stdoutText += d })
  onJsonLines(child.stdout, (rec) => {
    child.logs.push(rec)
    for (const w of waiters) if (w.pred(rec)) { waiters.delete(w); w.resolve(rec) }
  })
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d) => { child.stderrText += d })
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  child.waitLog = (pred, timeout = 15000) => {
    const found = child.logs.find(pred)
    if (found) return Promise.resolve(found)
    return new Promise((resolve, reject) => {
      const w = { pred, resolve }
      waiters.add(w)
      const t = setTimeout(() => {
        waiters.delete(w)
        reject(new Error(`no matching log line within ${timeout} ms; last lines:\n` +
          child.stdoutText.split('\n').slice(-15).join('\n') + '\nstderr:\n' + child.stderrText.slice(-2000)))
      }, timeout)
      t.unref()
      child.exited.then(() => {
        clearTimeout(t)
        if (waiters.delete(w)) {
          reject(new Error('pool exited before the log line; stderr: ' + child.stderrText.slice(-2000)))
        }
      })
    })
  }
  // Count the `ready` lines seen so far (one per worker that became ready).
  child.readyCount = () => child.logs.filter((l) => l.event === 'ready').length
  child.stop = async (signal = 'SIGTERM', timeout = 40000) => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exited
    child.kill(signal)
    const t = setTimeout(() => child.kill('SIGKILL'), timeout)
    const r = await child.exited
    clearTimeout(t)
    return r
  }
  return child
}

// Run `pool ARGS...` to completion (bounded). Resolves { code, signal, stdout, stderr }.
function runPool (args, { env = {}, timeout = 30000, cwd = ROOT, stats = false } = {}) {
  return new Promise((resolve) => {
    const child = spawn(...nodeCommand([BIN, ...statsOff(args, stats)], env),
      { cwd, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    const t = setTimeout(() => child.kill('SIGKILL'), timeout)
    child.on('exit', (code, signal) => { clearTimeout(t); resolve({ code, signal, stdout, stderr }) })
  })
}

// `pool status --json` with `target` (['--control', path] or ['--port', n]): the parsed status.
// Rejects with the CLI's stderr when it fails.
async function poolStatus (target) {
  const r = await runPool(['status', '--json', ...target], { timeout: 10000 })
  if (r.code !== 0) throw new Error(`pool status failed (${r.code}): ${r.stderr}`)
  return JSON.parse(r.stdout)
}

// Until the supervisor of the pool on `port` (its balancer's, or slot 1's without one) has heard
// a request start (the worker's `busy`), seen over its default control socket: a signal sent
// earlier would find every worker idle.
async function untilBusy (port, what = 'the supervisor to see the request') {
  await waitFor(async () => (await poolStatus(['--port', String(port)])).workers.some((w) => w.state === 'busy'),
    { timeout: 5000, what })
}

// A path to this process's node that another user can run: tests that run the pool as an
// unprivileged user need one, and the suite may run on a node kept under root's home
// (scripts/nodes.sh), which nobody else may enter. Then a link to the same file (a copy when it is
// on another file system) in a directory anyone may enter, removed when this process exits.
let nodeForOthers = null
function nodeAnyoneRuns () {
  if (nodeForOthers) return nodeForOthers
  if (othersMayReach(process.execPath)) return (nodeForOthers = process.execPath)
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-test-node-'))
  fs.chmodSync(shared, 0o755)
  process.on('exit', () => fs.rmSync(shared, { recursive: true, force: true }))
  const target = path.join(shared, 'node')
  try {
    fs.linkSync(process.execPath, target)
  } catch {
    fs.copyFileSync(process.execPath, target)
    fs.chmodSync(target, 0o755)
  }
  return (nodeForOthers = target)
}

// Whether another user may enter every directory on the way to `file`.
function othersMayReach (file) {
  for (let dir = path.dirname(file); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    if ((fs.statSync(dir).mode & 0o001) === 0) return false
  }
  return true
}

// Why the cases that run this checkout's code as an unprivileged user cannot run here, or false.
// A checkout under root's home, or in a `mktemp -d` directory (mode 0700), is closed to others.
function checkoutHiddenFromOthers () {
  if (othersMayReach(BIN)) return false
  return `other users may not enter the directories above this checkout (${ROOT}): chmod 755 them (.ci/run does)`
}

module.exports = {
  nodeAnyoneRuns,
  checkoutHiddenFromOthers,
  onJsonLines,
  parseJsonLines,
  readJsonLines,
  cleanEnv,
  ROOT,
  BIN,
  FIXTURES,
  fixture,
  tempDir,
  freePorts,
  freePort,
  canBind,
  sleep,
  waitFor,
  stopChild,
  request,
  isAlive,
  startPool,
  runPool,
  poolStatus,
  untilBusy
}
