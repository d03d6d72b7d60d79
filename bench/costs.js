'use strict'

// What a front costs besides latency, read against the floor of a Node balancer for the pool's
// rule (bench/lib/minimal-balancer.js: Node's http server, one central FIFO, one request per
// worker, kept-alive worker connections, buffered responses, nothing else). Fronts
// (bench/lib/fronts.js): that minimal balancer, `pool start` (the embedded balancer, its
// defaults: access log, metrics), `pool start --balancer haproxy` (the supervisor is not in the
// request's path; HAProxy is), Node's cluster, PM2 cluster mode.
//
//   requests  CPU time per request of the front's own processes (the supervisor, HAProxy,
//             cluster's primary, PM2's daemon, the minimal balancer) and of its workers, 0 ms
//             handler, `workers` workers: open loop at 200 req/s on a new connection each, at
//             200 and 1000 req/s on kept-alive connections, and at saturation (autocannon,
//             `connections` keep-alive clients, everything sharing the machine's cores). CPU
//             from /proc/PID/task/*/schedstat, the process's idle cost (measured over
//             `idleSeconds` just before: a whole number of the HAProxy-mode supervisor's 2 s
//             checks of HAProxy) subtracted
//   pinned    the most requests per second with the front's processes alone on CPU 0 and its
//             workers and the load generator on CPU 1 (taskset), how busy CPU 0 was, and what
//             one core of the front serves at that cost (req/s ÷ its busy share: the rate
//             itself once CPU 0 is saturated; on 2 cores CPU 1 is often the limit first)
//   idle      an idle pool (embedded balancer, defaults, the stats listener on): the supervisor's
//             and each worker's CPU per second, an idle HAProxy-mode supervisor's, a worker's
//             resident memory (and its own, private part) against a plain Node cluster worker's
//             serving the same app, every worker having served its share of 200 requests
//             first, and the pool's reaper's, once per pool
//   cpu-bound the workload of bench/balancer.js with renders that burn their core (a busy loop)
//             on as many workers as cores: the front competes with the renders for the CPU;
//             p50 and p99 against the ideal central queue, ρ `cpuRho`
//
// Each measurement runs `runs` times, the fronts taking turns; the report shows the median of the
// runs with its 95% interval, and each front's CPU per request as a ratio to the minimal
// balancer's in the same round. On a shared machine other work moves these figures: the load
// average is recorded. Loopback only; every process is stopped at the end and on Ctrl-C.

const os = require('node:os')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { forkReady, freePorts, ask, sleep } = require('./lib/procs')
const { makeSchedule } = require('./lib/schedule')
const { idealLatencies } = require('./lib/ideal')
const { percentile, median } = require('./lib/stats')
const { startFront, unavailable, KINDS } = require('./lib/fronts')
const { startPoolProcess } = require('./lib/pool-process')
const { cpuNs, wakes, rssMb, privateMb, threads, cpuRates } = require('./lib/usage')
const { costTargets } = require('./lib/cost-targets')
const { runPart, progress, round, log } = require('./lib/part')

const FRONTS = ['minimal', ...KINDS]
// The loads of `requests`: open loop at `rate` req/s, or saturation (rate null).
const LOADS = [
  { key: 'new-200', rate: 200, keepAlive: false, label: '200 req/s, new connections' },
  { key: 'ka-200', rate: 200, keepAlive: true, label: '200 req/s, kept alive' },
  { key: 'ka-1000', rate: 1000, keepAlive: true, label: '1000 req/s, kept alive' },
  { key: 'saturation', rate: null, keepAlive: true, label: 'saturation' }
]

const defaults = { runs: 3, fronts: FRONTS, loads: LOADS.map((l) => l.key), workers: 4, seconds: 3, idleSeconds: 4, connections: 32, peakSeconds: 3, idleRuns: 3, idleMeasure: 20, idleSettle: 20, cpuSeconds: 3, cpuRho: 0.8, median: 30, sigma: 0.8, seed: 42, parts: ['requests', 'pinned', 'idle', 'cpu-bound'] }
const quick = { runs: 1, seconds: 2, idleSeconds: 2, peakSeconds: 2, idleRuns: 1, idleMeasure: 6, idleSettle: 10, cpuSeconds: 2 }

// The front's own processes, named: the pool's supervisor and, in HAProxy mode, HAProxy.
const NAMES = { haproxy: ['supervisor', 'HAProxy'], cluster: ['primary'], pm2: ['PM2 daemon'], minimal: ['balancer'], embedded: ['supervisor'] }

async function named (front) {
  const p = await front.processes()
  return { front: p.front.map((pid, i) => ({ name: NAMES[front.kind]?.[i] ?? `process ${i + 1}`, pid })), workers: p.workers }
}

const sum = (xs) => xs.reduce((a, b) => a + (b ?? 0), 0)

// One load on one front: the CPU its processes and its workers used per request answered, each
// process's idle cost over the same time subtracted.
async function requestsRun (front, load, tools, args) {
  const { front: procs, workers } = await named(front)
  const idle = await cpuRates(procs.map((p) => p.pid), args.idleSeconds) // ms/s
  const before = { front: procs.map((p) => cpuNs(p.pid)), wakes: procs.map((p) => wakes(p.pid)), workers: sum(workers.map(cpuNs)) }
  const t0 = performance.now()
  let answered, lag, rps, errors
  if (load.rate === null) {
    const r = await ask(tools.peak, { cmd: 'peak', url: `${front.url}/?ms=0`, connections: args.connections, seconds: args.peakSeconds })
    answered = r.total - r.errors
    rps = r.rps
    errors = r.errors
  } else {
    const n = Math.round(load.rate * args.seconds)
    const at = Array.from({ length: n }, (_, i) => (i * 1000) / load.rate)
    const r = await ask(tools.load, { cmd: 'run', url: front.url, at, ms: at.map(() => 0), keepAlive: load.keepAlive })
    answered = r.status.filter((s) => s === 200).length
    errors = n - answered
    lag = r.lag
  }
  const wallMs = performance.now() - t0
  const perRequest = (ns, idleMsPerS = 0) => round((ns / 1e3 - idleMsPerS * wallMs) / Math.max(1, answered), 1) // ms/s × ms = µs
  const processes = {}
  procs.forEach((p, i) => {
    processes[p.name] = { cpuUsPerRequest: perRequest(cpuNs(p.pid) - before.front[i], idle[i]), idleMsPerS: round(idle[i], 3), wakesPerRequest: round((wakes(p.pid) - before.wakes[i]) / Math.max(1, answered), 2) }
  })
  return {
    answered,
    errors,
    lag,
    rps: round(rps ?? answered / (wallMs / 1000), 0),
    processes,
    frontUsPerRequest: round(sum(Object.values(processes).map((p) => p.cpuUsPerRequest)), 1),
    workersUsPerRequest: perRequest(sum(workers.map(cpuNs)) - before.workers),
    workerRssMb: round(median(workers.map(rssMb).filter((x) => x !== null)), 1)
  }
}

const MIN_BUSY = 0.05

// The front's processes alone on CPU 0; its workers and the load generator on CPU 1.
async function pinnedRun (front, peak, args) {
  const { front: procs, workers } = await named(front)
  const pin = (cpu, pid) => execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' })
  for (const p of procs) pin(0, p.pid)
  for (const pid of workers) pin(1, pid)
  pin(1, peak.pid)
  const before = sum(procs.map((p) => cpuNs(p.pid)))
  const started = performance.now()
  try {
    const r = await ask(peak, { cmd: 'peak', url: `${front.url}/?ms=0`, connections: args.connections, seconds: args.peakSeconds })
    const busy = (sum(procs.map((p) => cpuNs(p.pid))) - before) / 1e6 / (performance.now() - started)
    // What the front's core could serve at this cost per request: the rate measured when the
    // core is saturated; above it when the other core (workers, load generator) was the limit;
    // none for a front hardly in the request's path (cluster's primary, kept-alive connections).
    return { rps: round(r.rps, 0), errors: r.errors, p99: r.p99, frontCore: round(busy, 3), perCore: busy >= MIN_BUSY ? round(r.rps / Math.min(1, busy), 0) : null }
  } finally {
    const all = '0-' + (os.cpus().length - 1)
    for (const pid of [...procs.map((p) => p.pid), ...workers, peak.pid]) { try { pin(all, pid) } catch {} }
  }
}

// ── idle ─────────────────────────────────────────────────────────────────────────────────────

async function idlePool (args) {
  const ports = await freePorts(args.workers)
  const [port, statsPort] = await freePorts(2)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-idle-'))
  let reaper = null // its pid, from the pool's `starting` line
  const pool = startPoolProcess(['-n', String(args.workers), '--worker-port', String(ports[0]), '--port', String(port), '--stats-port', String(statsPort), '--control', path.join(dir, 'control.sock')],
    { onLine: (line) => { if (line.event === 'starting') reaper = line.reaperPid ?? null } })
  pool.child.exited.then(() => fs.rmSync(dir, { recursive: true, force: true }))
  await pool.started
  return { pool, url: `http://127.0.0.1:${port}`, workers: () => Object.values(pool.pids), reaper: () => reaper }
}

async function clusterPool (args) {
  const [port] = await freePorts(1)
  const child = await forkReady('cluster-primary.js', { PORT: String(port), WORKERS: String(args.workers) }, { timeout: 30000 })
  const workers = () => fs.readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'latin1').trim().split(/\s+/).filter(Boolean).map(Number)
  return { child, url: `http://127.0.0.1:${port}`, workers }
}

async function idleRun (tools, args) {
  // Every worker serves requests before it is measured, as in use: bursts of one request per
  // worker, each holding its worker 5 ms on a new connection, so that the pool's balancer (which
  // fills its first worker first) and cluster's round robin (per connection) both give each
  // worker its share. A worker never used would be measured in a state no serving worker is in:
  // V8 grows a young generation at its first collection, which a near-empty app's worker may
  // not reach while it boots, and one that served a request has.
  const bursts = 50
  const burst = (i) => Math.floor(i / args.workers) * 20
  const warm = { cmd: 'run', at: Array.from({ length: bursts * args.workers }, (_, i) => burst(i)), ms: new Array(bursts * args.workers).fill(5) }
  const pool = await idlePool(args)
  const cluster = await clusterPool(args)
  const haproxy = unavailable('haproxy') ? null : await startFront('haproxy', { workers: args.workers })
  try {
    for (const url of [pool.url, cluster.url, haproxy?.url].filter(Boolean)) await ask(tools.load, { ...warm, url })
    await sleep(args.idleSettle * 1000) // what the requests left settles (V8 compiles, and collects for a while)
    const workers = pool.workers()
    const clusterWorkers = cluster.workers()
    const haproxySupervisor = haproxy ? (await haproxy.processes()).front[0] : null
    const rates = await cpuRates([pool.pool.child.pid, ...workers, cluster.child.pid, ...clusterWorkers, ...(haproxy ? [haproxySupervisor] : [])], args.idleMeasure)
    return {
      supervisorMsPerS: round(rates[0], 3),
      haproxySupervisorMsPerS: haproxy ? round(rates.at(-1), 3) : null,
      workerMsPerS: round(median(rates.slice(1, 1 + workers.length)), 3),
      clusterPrimaryMsPerS: round(rates[1 + workers.length], 3),
      clusterWorkerMsPerS: round(median(rates.slice(2 + workers.length, 2 + workers.length + clusterWorkers.length)), 3),
      workerRssMb: round(median(workers.map(rssMb)), 2),
      clusterWorkerRssMb: round(median(clusterWorkers.map(rssMb)), 2),
      workerPrivateMb: round(median(workers.map(privateMb)), 2),
      clusterWorkerPrivateMb: round(median(clusterWorkers.map(privateMb)), 2),
      reaperRssMb: pool.reaper() ? round(rssMb(pool.reaper()), 1) : null,
      reaperPrivateMb: pool.reaper() ? round(privateMb(pool.reaper()), 1) : null,
      workerThreads: threads(workers[0]),
      clusterWorkerThreads: threads(clusterWorkers[0])
    }
  } finally {
    await pool.pool.stop({ grace: 5000 })
    if (cluster.child.connected) cluster.child.disconnect()
    await cluster.child.exited
    await haproxy?.stop()
  }
}

// ── CPU-bound renders ────────────────────────────────────────────────────────────────────────

// `workers` = cores, renders that burn the core, ρ `cpuRho`.
async function cpuBoundRun (front, load, args, seed) {
  const schedule = makeSchedule({ rho: args.cpuRho, workers: os.cpus().length, durationMs: args.cpuSeconds * 1000, median: args.median, sigma: args.sigma, capMs: 500, seed })
  const r = await ask(load, { cmd: 'run', url: front.url, at: schedule.at, ms: schedule.ms, query: 'busy=1' })
  const ideal = Array.from(idealLatencies(r.sent, schedule.ms, os.cpus().length))
  const ok = r.status.map((s) => s === 200)
  const latency = r.latency.filter((_, i) => ok[i])
  return { requests: r.status.length, errors: ok.filter((x) => !x).length, lag: r.lag, p50: round(percentile(latency, 50), 2), p99: round(percentile(latency, 99), 2), ideal50: round(percentile(ideal, 50), 2), ideal99: round(percentile(ideal, 99), 2) }
}

// ── the part ─────────────────────────────────────────────────────────────────────────────────

async function startAll (kinds, options, skipped, what = '') {
  const fronts = {}
  for (const kind of kinds) {
    try {
      fronts[kind] = await startFront(kind, { ...options, accessLog: true })
    } catch (err) {
      const reason = err.message.split('\n')[0]
      skipped.push({ front: `${kind}${what}`, reason })
      log(`  ${kind}${what}: not measured: ${reason}`)
    }
  }
  return fronts
}

const fmtProcesses = (run) => Object.entries(run.processes).map(([n, p]) => `${n} ${p.cpuUsPerRequest} µs`).join(', ')

async function main (args) {
  for (const f of args.fronts) if (!FRONTS.includes(f)) throw new Error(`unknown front ${f} (one of ${FRONTS.join(', ')})`)
  const loads = args.loads.map((key) => LOADS.find((l) => l.key === key) ?? (() => { throw new Error(`unknown load ${key} (one of ${LOADS.map((l) => l.key).join(', ')})`) })())
  const parts = new Set(args.parts)
  const skipped = args.fronts.filter((f) => unavailable(f)).map((f) => ({ front: f, reason: unavailable(f) }))
  const kinds = args.fronts.filter((f) => !unavailable(f))
  const cores = os.cpus().length
  const tools = { load: await forkReady('load.js', {}), peak: await forkReady('peak.js', {}) }
  const requests = []
  const pinned = kinds.map((front) => ({ front, runs: [] }))
  const idle = []
  const cpuBound = kinds.filter((k) => k !== 'minimal').map((front) => ({ front, runs: [] }))
  const cell = (front, load) => {
    let c = requests.find((x) => x.front === front && x.load === load)
    if (!c) requests.push(c = { front, load, runs: [] })
    return c
  }
  const pinnable = cores >= 2
  if (!pinnable && parts.has('pinned')) skipped.push({ front: 'pinned', reason: 'one core: nothing to pin apart' })
  const total = (parts.has('requests') ? args.runs * kinds.length * loads.length : 0) + (parts.has('pinned') && pinnable ? args.runs * kinds.length : 0) +
    (parts.has('idle') ? args.idleRuns : 0) + (parts.has('cpu-bound') ? args.runs * cpuBound.length : 0)
  let done = 0

  // 1. CPU per request at each load, and the pinned ceiling: every front up at once, taking turns.
  if (parts.has('requests') || parts.has('pinned')) {
    const fronts = await startAll(kinds, { workers: args.workers }, skipped)
    // Every kind of connection the loads use: V8 compiles a front's code for a new connection
    // (accept, parser, the connection's own state) only once it has run often, and a warm-up on
    // kept-alive connections alone left that to the first round's run on new connections, which
    // then counted compiles the later rounds did not (the front with more code on that path the
    // more).
    const warm = Array.from({ length: 500 }, (_, i) => i * 2)
    const warmNew = Array.from({ length: 1500 }, (_, i) => i * 2)
    for (const f of Object.values(fronts)) {
      await ask(tools.load, { cmd: 'run', url: f.url, at: warm, ms: warm.map(() => 0), keepAlive: true })
      if (loads.some((l) => !l.keepAlive)) await ask(tools.load, { cmd: 'run', url: f.url, at: warmNew, ms: warmNew.map(() => 0), keepAlive: false })
      await ask(tools.peak, { cmd: 'peak', url: `${f.url}/?ms=0`, connections: args.connections, seconds: 1 })
    }
    await sleep(2000) // what the warm-up left (V8's compiles and collections) settles
    const up = kinds.filter((k) => fronts[k])
    for (let r = 0; r < args.runs; r++) {
      for (let j = 0; j < up.length; j++) {
        const kind = up[(j + r) % up.length]
        if (parts.has('requests')) {
          for (let k = 0; k < loads.length; k++) {
            const load = loads[(k + r) % loads.length]
            progress(done++, total, `CPU per request: ${kind}, ${load.label}, run ${r + 1}/${args.runs}`)
            const run = await requestsRun(fronts[kind], load, tools, args)
            cell(kind, load.key).runs.push(run)
            log(`  ${kind.padEnd(8)} ${load.label.padEnd(26)} ${fmtProcesses(run)}; workers ${run.workersUsPerRequest} µs; ${run.rps} req/s, ${run.errors} errors${run.lag ? `, send lag p99 ${run.lag.p99} ms` : ''}`)
            await sleep(200)
          }
        }
        if (parts.has('pinned') && pinnable) {
          progress(done++, total, `pinned ceiling: ${kind}, run ${r + 1}/${args.runs}`)
          const run = await pinnedRun(fronts[kind], tools.peak, args)
          pinned.find((c) => c.front === kind).runs.push(run)
          log(`  ${kind.padEnd(8)} pinned: ${run.rps} req/s, its core ${(run.frontCore * 100).toFixed(0)}% busy (${run.perCore} req/s per core), p99 ${run.p99} ms, ${run.errors} errors`)
          await sleep(300)
        }
      }
    }
    for (const f of Object.values(fronts)) await f.stop()
  }

  // 2. An idle pool against Node's cluster.
  if (parts.has('idle')) {
    for (let r = 0; r < args.idleRuns; r++) {
      progress(done++, total, `idle, run ${r + 1}/${args.idleRuns}`)
      const run = await idleRun(tools, args)
      idle.push(run)
      log(`  idle: supervisor ${run.supervisorMsPerS} ms/s (HAProxy mode ${run.haproxySupervisorMsPerS}), worker ${run.workerMsPerS} ms/s (cluster worker ${run.clusterWorkerMsPerS}, its primary ${run.clusterPrimaryMsPerS}); ` +
        `worker RSS ${run.workerRssMb} MB (${run.workerPrivateMb} own), cluster worker ${run.clusterWorkerRssMb} MB (${run.clusterWorkerPrivateMb} own); the reaper ${run.reaperRssMb} MB (${run.reaperPrivateMb} own)`)
    }
  }

  // 3. CPU-bound renders, as many workers as cores.
  if (parts.has('cpu-bound')) {
    const kindsBusy = cpuBound.map((c) => c.front)
    const busy = await startAll(kindsBusy, { workers: cores }, skipped, ' (CPU-bound)')
    for (const f of Object.values(busy)) await ask(tools.load, { cmd: 'run', url: f.url, at: [0, 100, 200, 300], ms: [5, 5, 5, 5], query: 'busy=1' })
    for (let r = 0; r < args.runs; r++) {
      for (let j = 0; j < kindsBusy.length; j++) {
        const kind = kindsBusy[(j + r) % kindsBusy.length]
        if (!busy[kind]) continue
        progress(done++, total, `CPU-bound: ${kind}, run ${r + 1}/${args.runs}`)
        const run = await cpuBoundRun(busy[kind], tools.load, args, args.seed + r)
        cpuBound.find((c) => c.front === kind).runs.push(run)
        log(`  cpu-bound ${kind.padEnd(8)} p50 ${run.p50} (ideal ${run.ideal50}) p99 ${run.p99} (ideal ${run.ideal99}) send lag p99 ${run.lag?.p99} ms`)
        await sleep(500)
      }
    }
    for (const f of Object.values(busy)) await f.stop()
  }
  progress(total, total, 'done')
  const result = { cores, loads, requests, pinned: pinned.filter((c) => c.runs.length), idle, cpuBound: cpuBound.filter((c) => c.runs.length), skipped }
  log('\nThe cost targets (median of the rounds):')
  for (const t of costTargets(result)) log(`  ${t.met === null ? '–  ' : t.met ? 'met' : 'NOT'}  ${t.what}: ${t.value === null ? 'not measured' : `${round(t.value, 3)} ${t.unit}`} (target ${t.op} ${t.target} ${t.unit})`)
  return result
}

runPart('costs', { defaults, quick, main })
