'use strict'

// `pool start` as a child process, the way operators run it, with JSON logs read line by line:
// which pid serves which slot, which are ready, and every event with the time it was seen.
// The child is registered with procs.js, so stopAll() (the bench's Ctrl-C path) stops it too;
// a worker left behind by a SIGKILLed pool exits by itself when its IPC channel closes.

const path = require('node:path')
const readline = require('node:readline')
const { spawnTracked } = require('./procs')

const ROOT = path.join(__dirname, '..', '..')
const BIN = path.join(ROOT, 'bin', 'pool.js')
const APP = path.join(__dirname, 'pool-app.js')

// args: everything after `pool start APP` (-n, --worker-port, the front's flags...).
// Resolves once the pool logged 'started'; rejects if it exits first or takes over `timeout` ms.
// onLine(line, at): every JSON log line as it is read, whole (with its `time`). `bin`: another
// checkout's bin/pool.js (the code before a change).
function startPoolProcess (args, { app = APP, bin = BIN, timeout = 60000, onLine } = {}) {
  // The stats listener is off unless `args` names its port.
  const stats = args.includes('--stats-port') ? [] : ['--stats-port', '0']
  const child = spawnTracked(process.execPath, [bin, 'start', app, '--log-format', 'json', ...stats, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  child.stopSignal = 'SIGTERM' // on stopAll() too: a graceful stop, SIGKILL after 5 s
  const pool = {
    child,
    pids: {}, // slot → current pid
    ready: new Set(), // pids that are serving
    allPids: new Set(),
    events: [], // { at: performance.now(), ...line } for the events below
    stderr: ''
  }
  child.stderr.on('data', (d) => { pool.stderr = (pool.stderr + d).slice(-4000) })
  const started = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`pool not started within ${timeout} ms: ${pool.stderr}`)), timeout)
    readline.createInterface({ input: child.stdout }).on('line', (text) => {
      // The access log's lines (one per request, when it is on) are skipped unparsed: at
      // thousands a second, parsing them would load the machine being measured.
      if (!onLine && text.includes('"event":"request"')) return
      let line
      try { line = JSON.parse(text) } catch { return }
      if (!line.event) return
      const at = performance.now()
      if (onLine) onLine(line, at)
      if (line.event === 'spawn') { pool.pids[line.slot] = line.pid; pool.allPids.add(line.pid) }
      if (line.event === 'ready') pool.ready.add(line.pid)
      if (line.event === 'exit') pool.ready.delete(line.pid)
      if (KEPT.has(line.event)) pool.events.push({ at, ...pick(line) })
      if (line.event === 'started') { clearTimeout(timer); resolve() }
    })
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`pool exited (${code}) before starting: ${pool.stderr}`)) })
  })
  // SIGTERM: the pool drains and stops its workers (each in its own process group). Whatever
  // is left after `grace` ms gets SIGKILL, and so does every worker pid ever seen.
  pool.stop = async ({ grace = 10000 } = {}) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), grace)
      await child.exited
      clearTimeout(timer)
    }
    for (const pid of pool.allPids) { try { process.kill(pid, 'SIGKILL') } catch {} }
  }
  pool.started = started
  return pool
}

const KEPT = new Set(['spawn', 'ready', 'exit', 'hung', 'reload', 'started', 'haproxy-maint', 'haproxy-ready'])

function pick ({ event, slot, pid, reason, ms, code, signal }) {
  return { event, slot, pid, reason, ms, code, signal }
}

module.exports = { startPoolProcess, ROOT, BIN, APP }
