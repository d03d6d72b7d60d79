'use strict'

// The kill experiment: what a crashing worker costs behind HAProxy, with and without the pool
// setting MAINT on exit, counted per health-check line of the config.
//
//   node bench/haproxy-kill.js [--quick] [--duration 8] [--repeat 2] [--only a,b,...] [--results DIR]
//
// Each run: HAProxy from `pool config haproxy` (4 servers, maxconn 1, balance first, redispatch
// 1, retries 1, L7 retries for GET and HEAD), `pool start -n 4` of the bench app, 12 closed-loop
// keep-alive clients sending GET /?ms=20 through HAProxy, and one worker SIGKILLed every second
// (slots in turn, only workers that are serving). Runs differ in who sets server states and in
// the health-check line of the config:
//   pool drives HAProxy  `--balancer haproxy`: READY on ready, MAINT on exit
//   nobody drives it     `--balancer none`; every server is set READY once, as a static config
//   check + observe      the generated `check inter 2s fall 1 rise 1 observe layer4 ...`
//   check only           the same without `observe layer4 error-limit 1 on-error mark-down`
//   no check             neither (HAProxy learns nothing about a dead worker by itself)
// and run g is run a on Debian 13's HAProxy 3.0 (the generated nbthread 1), beside the system's.
// The configurations take turns, `repeat` times; the report shows each run's count and the
// median failed per kill with its 95% interval. With the pool driving, it also records how long
// the pool took to set MAINT after each exit (its debug log). Loopback only; HAProxy and the
// pool (and its workers) are stopped after each run, also on Ctrl-C.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { freePorts } = require('./lib/procs')
const { startPoolProcess } = require('./lib/pool-process')
const { startGeneratedHaproxy, has, HAPROXY, HAPROXY_30 } = require('./lib/stack')
const { closedLoop } = require('./lib/closed-loop')
const { runPart, interleaved, sleep, round, log } = require('./lib/part')

const WORKERS = 4
const CLIENTS = 12
const RENDER_MS = 20
const OBSERVE = ' observe layer4 error-limit 1 on-error mark-down'

const CHECKS = {
  'check + observe': (cfg) => cfg,
  'check only': (cfg) => cfg.replace(OBSERVE, ''),
  'no check': (cfg) => cfg.replace(/ check inter \S+ fall \d+ rise \d+/, '').replace(OBSERVE, '')
}

const RUNS = [
  { id: 'a', drive: true, checks: 'check + observe' },
  { id: 'b', drive: true, checks: 'check only' },
  { id: 'c', drive: true, checks: 'no check' },
  { id: 'd', drive: false, checks: 'check + observe' },
  { id: 'e', drive: false, checks: 'check only' },
  { id: 'f', drive: false, checks: 'no check' },
  { id: 'g', drive: true, checks: 'check + observe', bin: HAPROXY_30 }
]

const defaults = { duration: 8, repeat: 2, only: RUNS.map((r) => r.id) }
const quick = { duration: 5, repeat: 1, only: ['a', 'd', 'f', 'g'] }

async function run (spec, seconds) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-kill-'))
  const ports = await freePorts(WORKERS)
  const [port, statsPort] = await freePorts(2)
  const haproxy = await startGeneratedHaproxy({ workers: WORKERS, workerPort: ports[0], port, statsPort, edit: CHECKS[spec.checks], bin: spec.bin })
  const front = spec.drive
    ? ['--balancer', 'haproxy', '--haproxy-socket', haproxy.socket, '--haproxy-backend', 'pool', '--log-level', 'debug']
    : ['--balancer', 'none']
  const pool = startPoolProcess(['-n', String(WORKERS), '--worker-port', String(ports[0]), '--control', path.join(dir, 'control.sock'), ...front])
  try {
    await pool.started
    // Nobody drives HAProxy: every server READY once, as a static config would be.
    if (!spec.drive) for (let slot = 1; slot <= WORKERS; slot++) await haproxy.client.setServerState('pool', `worker${slot}`, 'ready')
    await sleep(200)
    const loading = closedLoop({ url: haproxy.url, connections: CLIENTS, durationS: seconds + 0.5, timeoutS: 15, service: { ms: RENDER_MS } })
    let kills = 0
    for (let i = 0; i < seconds; i++) {
      await sleep(1000)
      const pid = pool.pids[(i % WORKERS) + 1]
      if (!pool.ready.has(pid)) continue // still booting: killing it would cost no request
      try { process.kill(pid, 'SIGKILL'); kills++ } catch {}
    }
    const s = (await loading).summary
    // MAINTs for exits only: those that end a drain (at the final stop) are not what is measured.
    const maint = pool.events.filter((e) => e.event === 'haproxy-maint' && e.reason !== 'drained')
    return { id: spec.id, haproxy: haproxy.version, drive: spec.drive, checks: spec.checks, seconds, kills, ok: s.ok, failed: s.failed, failedByKind: s.failedByKind, rps: round(s.rps), maintMs: maint.map((e) => e.ms) }
  } finally {
    await pool.stop({ grace: 5000 })
    haproxy.child.kill('SIGKILL')
    await haproxy.child.exited
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

async function main (args) {
  if (!has(HAPROXY)) return { runs: [], skipped: [{ reason: `${HAPROXY} not found` }] }
  const wanted = RUNS.filter((r) => args.only.includes(r.id))
  const specs = wanted.filter((r) => !r.bin || has(r.bin))
  const skipped = wanted.filter((r) => !specs.includes(r)).map((r) => ({ id: r.id, reason: `${r.bin} not found` }))
  const runs = []
  await interleaved({
    repeats: args.repeat,
    cells: specs,
    label: (spec) => `run ${spec.id}`,
    async run (spec) {
      const r = await run(spec, args.duration)
      runs.push(r)
      log(`  ${spec.id}: ${spec.drive ? 'pool drives HAProxy ' : 'nobody drives it    '} ${spec.checks.padEnd(16)} ${r.failed} failed / ${r.kills} kills, ${r.ok} answered ${JSON.stringify(r.failedByKind)}`)
    }
  })
  return { workers: WORKERS, clients: CLIENTS, renderMs: RENDER_MS, configs: specs.map(({ bin, ...spec }) => spec), runs, skipped }
}

runPart('haproxy-kill', { defaults, quick, main })
