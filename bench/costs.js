'use strict'

// What a front costs besides latency, per front (bench/lib/fronts.js: `pool start`, `pool start
// --balancer haproxy`, Node's cluster, PM2 cluster mode):
//
//   cpu       CPU time (user + system, from /proc) per request of the front's processes (the
//             supervisor with its embedded balancer; the supervisor and HAProxy; cluster's
//             primary; PM2's daemon) and of the workers, at a fixed rate of `rate` req/s of
//             `ms` ms renders, open loop, and the resident memory (RSS) of each after it:
//             a pool worker against a plain cluster worker of the same app
//   ceiling   the embedded balancer's most requests per second (0 ms handler, autocannon with
//             `connections` keep-alive connections), with the balancer alone on CPU 0 and the
//             load generator and the workers on CPU 1 (taskset), and how busy the balancer's
//             core was: below ~90% the ceiling measured is the load generator's or the workers',
//             and the balancer's is only known to be higher
//   cpu-bound the workload of bench/balancer.js with renders that burn their core (a busy loop)
//             on as many workers as cores: the front competes with the renders for the CPU;
//             p50 and p99 against the ideal central queue, ρ `cpuRho`
//
// Each measurement runs `runs` times, the fronts taking turns; the report shows the median of the
// runs with its 95% interval. On a shared machine other work can take CPU 0 too: the load
// average is recorded. Loopback only; every process is stopped at the end and on Ctrl-C.

const fs = require('node:fs')
const os = require('node:os')
const { execFileSync } = require('node:child_process')
const { forkReady, ask, sleep } = require('./lib/procs')
const { makeSchedule } = require('./lib/schedule')
const { idealLatencies } = require('./lib/ideal')
const { percentile, median } = require('./lib/stats')
const { startFront, unavailable, KINDS } = require('./lib/fronts')
const { runPart, progress, round, log } = require('./lib/part')

const defaults = { runs: 3, fronts: KINDS, workers: 4, rate: 200, ms: 5, seconds: 3, connections: 32, peakSeconds: 3, cpuRho: 0.8, median: 30, sigma: 0.8, seed: 42 }
const quick = { runs: 1, seconds: 2, peakSeconds: 2 }

const TICK_MS = 1000 / 100 // USER_HZ is 100 on Linux

// CPU time (user + system) a process used so far, in ms; null once it is gone.
function cpuMs (pid) {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS
  } catch { return null }
}

function rssMb (pid) {
  try { return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024 } catch { return null }
}

const sum = (xs) => xs.reduce((a, b) => a + (b ?? 0), 0)

// The front's own processes, named: the pool's supervisor and, in HAProxy mode, HAProxy.
async function named (front) {
  const p = await front.processes()
  const names = front.kind === 'haproxy' ? ['supervisor', 'HAProxy'] : [front.kind === 'cluster' ? 'primary' : front.kind === 'pm2' ? 'PM2 daemon' : 'supervisor']
  return { front: p.front.map((pid, i) => ({ name: names[i] ?? `process ${i + 1}`, pid })), workers: p.workers }
}

// Open loop at `rate` req/s for `seconds`: CPU per request of each front process and of the
// workers together, and RSS after.
async function cpuRun (front, load, args, seed) {
  const { front: procs, workers } = await named(front)
  const n = Math.round(args.rate * args.seconds)
  const at = Array.from({ length: n }, (_, i) => (i * 1000) / args.rate)
  const ms = at.map(() => args.ms)
  const before = { front: procs.map((p) => cpuMs(p.pid)), workers: workers.map(cpuMs) }
  const r = await ask(load, { cmd: 'run', url: front.url, at, ms })
  const answered = r.status.filter((s) => s === 200).length
  const perRequest = (delta) => round((delta * 1000) / Math.max(1, answered), 1)
  const out = { requests: n, answered, lag: r.lag, processes: {} }
  procs.forEach((p, i) => { out.processes[p.name] = { cpuUsPerRequest: perRequest(cpuMs(p.pid) - before.front[i]), rssMb: round(rssMb(p.pid), 1) } })
  out.workers = { cpuUsPerRequest: perRequest(sum(workers.map(cpuMs)) - sum(before.workers)), rssMb: round(median(workers.map(rssMb).filter((x) => x !== null)), 1) }
  return out
}

// The embedded balancer alone on CPU 0; its workers and the load generator on CPU 1.
async function ceilingRun (front, peak, args) {
  const { front: procs, workers } = await named(front)
  const pin = (cpu, pid) => execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' })
  for (const p of procs) pin(0, p.pid)
  for (const pid of workers) pin(1, pid)
  pin(1, peak.pid)
  const cpuBefore = cpuMs(procs[0].pid)
  const started = performance.now()
  const r = await ask(peak, { cmd: 'peak', url: `${front.url}/?ms=0`, connections: args.connections, seconds: args.peakSeconds })
  const busy = (cpuMs(procs[0].pid) - cpuBefore) / (performance.now() - started)
  for (const pid of [...procs.map((p) => p.pid), ...workers, peak.pid]) { try { pin('0-' + (os.cpus().length - 1), pid) } catch {} }
  return { rps: round(r.rps, 0), errors: r.errors, p99: r.p99, frontCore: round(busy, 3) }
}

// The CPU-bound variant: `workers` = cores, renders that burn the core, ρ `cpuRho`.
async function cpuBoundRun (front, load, args, seed) {
  const schedule = makeSchedule({ rho: args.cpuRho, workers: os.cpus().length, durationMs: args.seconds * 1000, median: args.median, sigma: args.sigma, capMs: 500, seed })
  const r = await ask(load, { cmd: 'run', url: front.url, at: schedule.at, ms: schedule.ms, query: 'busy=1' })
  const ideal = Array.from(idealLatencies(r.sent, schedule.ms, os.cpus().length))
  const ok = r.status.map((s) => s === 200)
  const latency = r.latency.filter((_, i) => ok[i])
  return { requests: r.status.length, errors: ok.filter((x) => !x).length, lag: r.lag, p50: round(percentile(latency, 50), 2), p99: round(percentile(latency, 99), 2), ideal50: round(percentile(ideal, 50), 2), ideal99: round(percentile(ideal, 99), 2) }
}

async function main (args) {
  const skipped = args.fronts.filter((f) => unavailable(f)).map((f) => ({ front: f, reason: unavailable(f) }))
  const kinds = args.fronts.filter((f) => !unavailable(f))
  const load = await forkReady('load.js', {})
  const cpu = kinds.map((front) => ({ front, runs: [] }))
  const cpuBound = kinds.map((front) => ({ front, runs: [] }))
  const ceiling = { front: 'embedded', runs: [] }
  const cores = os.cpus().length
  const total = args.runs * kinds.length * 2 + args.runs
  let done = 0

  // 1. CPU and memory at a fixed rate, `workers` workers per front, all fronts up at once.
  const fronts = {}
  for (const kind of kinds) {
    try { fronts[kind] = await startFront(kind, { workers: args.workers }) } catch (err) { skipped.push({ front: kind, reason: err.message.split('\n')[0] }); log(`  ${kind}: not measured: ${err.message.split('\n')[0]}`) }
  }
  const warm = Array.from({ length: 200 }, (_, i) => i * 5)
  for (const f of Object.values(fronts)) await ask(load, { cmd: 'run', url: f.url, at: warm, ms: warm.map(() => args.ms) })
  for (let r = 0; r < args.runs; r++) {
    for (let j = 0; j < kinds.length; j++) {
      const kind = kinds[(j + r) % kinds.length]
      if (!fronts[kind]) continue
      progress(done++, total, `CPU and memory: ${kind}, run ${r + 1}/${args.runs}`)
      const run = await cpuRun(fronts[kind], load, args, args.seed + r)
      cpu.find((c) => c.front === kind).runs.push(run)
      log(`  cpu ${kind.padEnd(8)} ${Object.entries(run.processes).map(([n, p]) => `${n} ${p.cpuUsPerRequest} µs/req, ${p.rssMb} MB`).join('; ')}; workers ${run.workers.cpuUsPerRequest} µs/req, ${run.workers.rssMb} MB each; send lag p99 ${run.lag?.p99} ms`)
      await sleep(300)
    }
  }

  // 2. The embedded balancer's ceiling, pinned.
  if (fronts.embedded && cores >= 2) {
    const peak = await forkReady('peak.js', {})
    await ask(peak, { cmd: 'peak', url: `${fronts.embedded.url}/?ms=0`, connections: args.connections, seconds: 1 })
    for (let r = 0; r < args.runs; r++) {
      progress(done++, total, `ceiling, run ${r + 1}/${args.runs}`)
      const run = await ceilingRun(fronts.embedded, peak, args)
      ceiling.runs.push(run)
      log(`  ceiling: ${run.rps} req/s, the balancer's core ${(run.frontCore * 100).toFixed(0)}% busy, p99 ${run.p99} ms, ${run.errors} errors`)
      await sleep(500)
    }
  } else skipped.push({ front: 'ceiling', reason: cores < 2 ? 'one core: nothing to pin apart' : 'the embedded balancer did not start' })
  for (const f of Object.values(fronts)) await f.stop()

  // 3. CPU-bound renders, as many workers as cores.
  const busy = {}
  for (const kind of kinds) {
    try { busy[kind] = await startFront(kind, { workers: cores }) } catch (err) { skipped.push({ front: `${kind} (CPU-bound)`, reason: err.message.split('\n')[0] }); log(`  ${kind} (CPU-bound): not measured: ${err.message.split('\n')[0]}`) }
  }
  for (const f of Object.values(busy)) await ask(load, { cmd: 'run', url: f.url, at: [0, 100, 200, 300], ms: [5, 5, 5, 5], query: 'busy=1' })
  for (let r = 0; r < args.runs; r++) {
    for (let j = 0; j < kinds.length; j++) {
      const kind = kinds[(j + r) % kinds.length]
      if (!busy[kind]) continue
      progress(done++, total, `CPU-bound: ${kind}, run ${r + 1}/${args.runs}`)
      const run = await cpuBoundRun(busy[kind], load, args, args.seed + r)
      cpuBound.find((c) => c.front === kind).runs.push(run)
      log(`  cpu-bound ${kind.padEnd(8)} p50 ${run.p50} (ideal ${run.ideal50}) p99 ${run.p99} (ideal ${run.ideal99}) send lag p99 ${run.lag?.p99} ms`)
      await sleep(500)
    }
  }
  for (const f of Object.values(busy)) await f.stop()
  progress(total, total, 'done')
  return { cores, cpu, ceiling, cpuBound, skipped }
}

runPart('costs', { defaults, quick, main })
