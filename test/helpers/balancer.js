'use strict'

// Helpers for the balancer tests: fork stand-in workers (test/fixtures/balancer-worker.js) on
// free ports, and run a balancer on free ports that is told about them through its Front hooks,
// as the supervisor would. Everything started is stopped by t.teardown.

const path = require('node:path')
const os = require('node:os')
const http = require('node:http')
const { fork } = require('node:child_process')
const { freePorts, request, waitFor, readJsonLines, tempDir, fixture } = require('../helpers')
const { createBalancer } = require('../../lib/fronts/balancer')
const { StatsListener } = require('../../lib/observe/stats-listener')

const WORKER = fixture('balancer-worker.js')
// A worker that answers with raw bytes, resets, and logs overlapping requests.
const RAW_WORKER = fixture('raw-worker.js')

function forkWorker (port, logFile, script = WORKER) {
  return new Promise((resolve, reject) => {
    const env = {
      ...process.env,
      PORT: String(port),
      LOG_FILE: logFile || '',
      CRASH_MARKER: (logFile || path.join(os.tmpdir(), `pool-balancer-${port}`)) + '.crashed'
    }
    const child = fork(script, [], { env, execArgv: [], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
    child.exited = new Promise((resolve) => child.once('exit', resolve))
    const t = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`worker on ${port} not ready in 10 s`)) },
      10000)
    child.once('message', (m) => { clearTimeout(t); if (m.ready) resolve(child) })
    child.once('exit',
      (code) => { clearTimeout(t); reject(new Error(`worker on ${port} exited (${code}) before ready`)) })
  })
}

// `count` workers on consecutive free ports; returns [{ slot, name, pid, host, port, child }].
async function startWorkers (t, count, { logFile, script } = {}) {
  const ports = await freePorts(count)
  const workers = []
  t.teardown(() => Promise.all(workers.map(stopWorker)))
  await Promise.all(ports.map(async (port, i) => {
    const child = await forkWorker(port, logFile, script)
    workers[i] = { slot: i + 1, name: `worker${i + 1}`, pid: child.pid, host: '127.0.0.1', port, child }
  }))
  return workers
}

// Start a fresh process for `w`'s slot on its port (after a crash).
async function restartWorker (w, { logFile, script } = {}) {
  const child = await forkWorker(w.port, logFile, script)
  Object.assign(w, { pid: child.pid, child })
  return w
}

async function stopWorker (w) {
  if (w.child.exitCode !== null || w.child.signalCode !== null) return
  w.child.kill('SIGKILL')
  await w.child.exited
}

const snapshot = ({ slot, name, pid, host, port }) => ({ slot, name, pid, host, port, state: 'ready' })

// A started balancer on free ports. `logs` collects what it logs.
async function startBalancer (t, options = {}, { context } = {}) {
  const [port, statsPort] = await freePorts(2)
  const logs = []
  const logger = {}
  for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal']) {
    logger[level] = (obj, msg) => logs.push({ level, ...(typeof obj === 'object' ? obj : { msg: obj }), msg })
  }
  const balancer = createBalancer({ port, ...options }, { logger })
  await balancer.start(context) // a FrontContext (lib/fronts/front.js), or none: the balancer alone
  t.teardown(() => balancer.stop())
  // The stats listener is the pool's; a balancer tested alone gets one of its own.
  const stats = new StatsListener({
    host: '127.0.0.1',
    port: statsPort,
    registry: () => balancer.metrics.registry,
    status: () => balancer.status()
  })
  await stats.start()
  t.teardown(() => stats.stop())
  balancer.logs = logs
  balancer.base = `http://127.0.0.1:${port}`
  balancer.statsBase = `http://127.0.0.1:${statsPort}`
  return balancer
}

function tmpLog (t) {
  const dir = tempDir(t, 'pool-balancer-')
  return path.join(dir, 'requests.log')
}

async function concurrencyOf (w) {
  return JSON.parse((await request(`http://127.0.0.1:${w.port}/concurrency`)).body)
}

// Send a request and resolve once its headers have reached the balancer, with a handle to
// abort it: for clients that must be queued, or must go away.
function openRequest (url, { method = 'GET', headers = {}, body } = {}) {
  const req = http.request(url, { method, headers, agent: false })
  const response = new Promise((resolve, reject) => {
    req.on('response', (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end',
        () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }))
      res.on('error', reject)
    })
    req.on('error', reject)
  })
  response.catch(() => {}) // an aborted request's rejection is expected
  req.end(body)
  return { req, response }
}

// Let the requests parked on worker `w` under ?park=NAME go on (test/fixtures/balancer-worker.js).
function release (w, name) {
  w.child.send({ release: name })
}

// `count` workers behind a balancer with `options`, all reported ready (unless ready: false).
// `seen()` lists the requests the workers received, from their shared log file.
async function setup (t, count, options = {}, { ready = true, context, script } = {}) {
  const logFile = tmpLog(t)
  const workers = await startWorkers(t, count, { logFile, script })
  const balancer = await startBalancer(t, options, { context })
  if (ready) for (const w of workers) balancer.workerReady(snapshot(w))
  return { workers, balancer, logFile, seen: () => readJsonLines(logFile) }
}

module.exports = {
  RAW_WORKER,
  setup,
  release,
  startWorkers,
  restartWorker,
  stopWorker,
  snapshot,
  startBalancer,
  tmpLog,
  concurrencyOf,
  openRequest,
  waitFor
}
