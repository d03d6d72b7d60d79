'use strict'

// What the pool's supervisor and its workers cost outside the work they do for a request:
//
//   requests  the supervisor's CPU per request, its idle cost subtracted, in HAProxy mode (where it
//             is not in the request's path at all) and with the embedded balancer, 4 workers, a
//             0 ms handler, open loop at each rate, kept-alive client connections
//   idle      an idle pool (embedded balancer, defaults, the stats listener on): the supervisor's
//             and each worker's CPU per second (and an idle HAProxy-mode supervisor's), and a worker's resident memory (and the part of
//             it that is its own, not the node binary's pages shared with the others) against a
//             plain Node cluster worker serving the same app; the pool's reaper's, once per pool
//
// CPU is read from /proc/PID/task/*/schedstat (nanoseconds, every thread of the process), so an
// idle cost of a tenth of a millisecond per second shows in a run of seconds. Each measurement is
// repeated (--repeats); the table shows each run and their median. On a shared machine other work
// moves these figures: compare before and after in one sitting.
//
//   node bench/supervisor-costs.js [requests|idle|all] [--repeats 3] [--seconds 5]
//        [--idle-seconds 20] [--settle 15] [--rates 200,1000] [--modes haproxy,embedded]
//        [--workers 4] [--json FILE]

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { forkReady, freePorts, ask, sleep, stopAll } = require('./lib/procs')
const { startFront, unavailable } = require('./lib/fronts')
const { startPoolProcess } = require('./lib/pool-process')
const { median } = require('./lib/stats')

const defaults = { repeats: 3, seconds: 5, idleSeconds: 20, settle: 15, rates: [200, 1000], modes: ['haproxy', 'embedded'], workers: 4, json: '' }

function parseArgs (argv) {
  const args = { what: 'all', ...defaults }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (!a.startsWith('--')) { args.what = a; continue }
    const key = a.slice(2).replace(/-(\w)/g, (_, c) => c.toUpperCase())
    const value = argv[++i]
    if (!(key in defaults) || value === undefined) throw new Error(`unknown option or missing value: ${a}`)
    const d = defaults[key]
    args[key] = Array.isArray(d) ? value.split(',').map((v) => (typeof d[0] === 'number' ? Number(v) : v)) : typeof d === 'number' ? Number(value) : value
  }
  if (!['requests', 'idle', 'all'].includes(args.what)) throw new Error(`measure requests, idle or all (got ${args.what})`)
  return args
}

// CPU time used so far by every thread of `pid`, in ns; null once it is gone.
function cpuNs (pid) {
  let tids
  try { tids = fs.readdirSync(`/proc/${pid}/task`) } catch { return null }
  let total = 0
  for (const tid of tids) {
    try { total += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[0]) } catch {}
  }
  return total
}

// How often the process's main thread has slept and been woken so far (its voluntary context
// switches): the wakes a request costs.
function wakes (pid) {
  try { return Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) } catch { return null }
}

function rssMb (pid) {
  try { return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) / 1024 } catch { return null }
}

// The process's own memory (private pages), in MB: what it costs besides the pages of the node
// binary and its snapshot, which every Node process on the machine shares.
function privateMb (pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1')
    const kb = (key) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? 0)
    return (kb('Private_Clean') + kb('Private_Dirty')) / 1024
  } catch { return null }
}

function threads (pid) {
  try { return fs.readdirSync(`/proc/${pid}/task`).length } catch { return null }
}

// CPU per second of each pid over `seconds` of wall time, in ms/s.
async function cpuRates (pids, seconds) {
  const before = pids.map(cpuNs)
  const t0 = performance.now()
  await sleep(seconds * 1000)
  const wall = (performance.now() - t0) / 1000
  return pids.map((pid, i) => (cpuNs(pid) - before[i]) / 1e6 / wall)
}

const fixed = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '–')

// ── requests ─────────────────────────────────────────────────────────────────────────────────

async function requestsRun (front, load, { rate, seconds, idleSeconds }) {
  const [supervisor] = (await front.processes()).front
  const [idleRate] = await cpuRates([supervisor], idleSeconds)
  const n = Math.round(rate * seconds)
  const at = Array.from({ length: n }, (_, i) => (i * 1000) / rate)
  const before = cpuNs(supervisor)
  const wakesBefore = wakes(supervisor)
  const t0 = performance.now()
  const r = await ask(load, { cmd: 'run', url: front.url, at, ms: at.map(() => 0), keepAlive: true })
  const wallMs = performance.now() - t0
  const used = (cpuNs(supervisor) - before) / 1e3 // µs
  const answered = r.status.filter((s) => s === 200).length
  const perRequest = (used - idleRate * wallMs) / Math.max(1, answered) // idleRate ms/s = µs/ms
  const wakesPerRequest = (wakes(supervisor) - wakesBefore) / Math.max(1, answered)
  return { rate, answered, requests: n, idleMsPerS: idleRate, usPerRequest: perRequest, wakesPerRequest, lagP99: r.lag?.p99 }
}

async function measureRequests (args, out) {
  const load = await forkReady('load.js', {})
  out.requests = []
  for (const mode of args.modes) {
    if (unavailable(mode)) { console.log(`${mode}: not measured: ${unavailable(mode)}`); continue }
    const front = await startFront(mode, { workers: args.workers })
    try {
      await ask(load, { cmd: 'run', url: front.url, at: Array.from({ length: 500 }, (_, i) => i * 2), ms: new Array(500).fill(0), keepAlive: true })
      await sleep(5000) // what the warm-up left settles
      for (const rate of args.rates) {
        const runs = []
        for (let r = 0; r < args.repeats; r++) {
          const run = await requestsRun(front, load, { rate, seconds: args.seconds, idleSeconds: Math.min(args.idleSeconds, 5) })
          runs.push(run)
          console.log(`  ${mode.padEnd(8)} ${String(rate).padStart(5)} req/s run ${r + 1}: ${fixed(run.usPerRequest)} µs/request, ${fixed(run.wakesPerRequest, 2)} wakes/request (idle ${fixed(run.idleMsPerS, 2)} ms/s subtracted; ${run.answered}/${run.requests} answered; send lag p99 ${run.lagP99} ms)`)
        }
        out.requests.push({ mode, rate, runs, medianUsPerRequest: median(runs.map((x) => x.usPerRequest)) })
      }
    } finally {
      await front.stop()
    }
  }
  await stopAll()
  console.log('\nThe supervisor\'s CPU per request (µs, idle subtracted; median of the runs [each run]):')
  console.log('| mode | ' + args.rates.map((r) => `${r} req/s kept alive`).join(' | ') + ' |')
  console.log('| --- | ' + args.rates.map(() => '---').join(' | ') + ' |')
  for (const mode of args.modes) {
    const cells = args.rates.map((rate) => out.requests.find((x) => x.mode === mode && x.rate === rate))
    if (cells.some((c) => !c)) continue
    console.log(`| ${mode === 'haproxy' ? 'HAProxy mode: the supervisor' : 'embedded balancer: the supervisor'} | ` +
      cells.map((c) => `${fixed(c.medianUsPerRequest)} [${c.runs.map((x) => fixed(x.usPerRequest)).join(', ')}]`).join(' | ') + ' |')
  }
}

// ── idle ─────────────────────────────────────────────────────────────────────────────────────

async function idlePool (args) {
  const ports = await freePorts(args.workers)
  const [port, statsPort] = await freePorts(2)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-idle-'))
  let reaper = null // its pid, from the pool's `starting` line (none before the reaper)
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

async function measureIdle (args, out) {
  const load = await forkReady('load.js', {})
  const warm = { cmd: 'run', at: Array.from({ length: 200 }, (_, i) => i * 5), ms: new Array(200).fill(0), keepAlive: true }
  out.idle = []
  for (let r = 0; r < args.repeats; r++) {
    const pool = await idlePool(args)
    const cluster = await clusterPool(args)
    const haproxy = unavailable('haproxy') ? null : await startFront('haproxy', { workers: args.workers })
    try {
      await ask(load, { ...warm, url: pool.url })
      await ask(load, { ...warm, url: cluster.url })
      if (haproxy) await ask(load, { ...warm, url: haproxy.url })
      await sleep(args.settle * 1000) // what the requests left settles (V8 compiles, and collects for a while)
      const workers = pool.workers()
      const clusterWorkers = cluster.workers()
      const haproxySupervisor = haproxy ? (await haproxy.processes()).front[0] : null
      const rates = await cpuRates([pool.pool.child.pid, ...workers, cluster.child.pid, ...clusterWorkers, ...(haproxy ? [haproxySupervisor] : [])], args.idleSeconds)
      const run = {
        supervisorMsPerS: rates[0],
        haproxySupervisorMsPerS: haproxy ? rates.at(-1) : null,
        workerMsPerS: median(rates.slice(1, 1 + workers.length)),
        clusterPrimaryMsPerS: rates[1 + workers.length],
        clusterWorkerMsPerS: median(rates.slice(2 + workers.length, 2 + workers.length + clusterWorkers.length)),
        workerRssMb: median(workers.map(rssMb)),
        clusterWorkerRssMb: median(clusterWorkers.map(rssMb)),
        workerPrivateMb: median(workers.map(privateMb)),
        clusterWorkerPrivateMb: median(clusterWorkers.map(privateMb)),
        reaperRssMb: pool.reaper() ? rssMb(pool.reaper()) : null,
        reaperPrivateMb: pool.reaper() ? privateMb(pool.reaper()) : null,
        workerThreads: threads(workers[0]),
        clusterWorkerThreads: threads(clusterWorkers[0])
      }
      out.idle.push(run)
      console.log(`  run ${r + 1}: supervisor ${fixed(run.supervisorMsPerS, 3)} ms/s (HAProxy mode ${fixed(run.haproxySupervisorMsPerS, 3)}), worker ${fixed(run.workerMsPerS, 3)} ms/s (cluster worker ${fixed(run.clusterWorkerMsPerS, 3)}, its primary ${fixed(run.clusterPrimaryMsPerS, 3)}); ` +
        `worker RSS ${fixed(run.workerRssMb)} MB (${fixed(run.workerPrivateMb)} own), ${run.workerThreads} threads (cluster worker ${fixed(run.clusterWorkerRssMb)} MB (${fixed(run.clusterWorkerPrivateMb)} own), ${run.clusterWorkerThreads} threads)` +
        (run.reaperRssMb !== null ? `; the reaper ${fixed(run.reaperRssMb)} MB (${fixed(run.reaperPrivateMb)} own)` : ''))
    } finally {
      await pool.pool.stop({ grace: 5000 })
      if (cluster.child.connected) cluster.child.disconnect()
      await cluster.child.exited
      await haproxy?.stop()
    }
  }
  await stopAll()
  const m = (key, d) => `${fixed(median(out.idle.map((x) => x[key])), d)} [${out.idle.map((x) => fixed(x[key], d)).join(', ')}]`
  console.log('\nAn idle pool (median of the runs [each run]):')
  console.log('| | pool | plain Node cluster |')
  console.log('| --- | --- | --- |')
  console.log(`| supervisor / primary, CPU ms/s | ${m('supervisorMsPerS', 3)} | ${m('clusterPrimaryMsPerS', 3)} |`)
  if (out.idle.some((x) => x.haproxySupervisorMsPerS !== null)) console.log(`| the supervisor in HAProxy mode (stats off), CPU ms/s | ${m('haproxySupervisorMsPerS', 3)} | |`)
  console.log(`| a worker, CPU ms/s | ${m('workerMsPerS', 3)} | ${m('clusterWorkerMsPerS', 3)} |`)
  console.log(`| a worker, RSS MB | ${m('workerRssMb')} | ${m('clusterWorkerRssMb')} |`)
  console.log(`| a worker's own memory (private pages), MB | ${m('workerPrivateMb')} | ${m('clusterWorkerPrivateMb')} |`)
  console.log(`| a worker over a cluster worker, RSS MB | ${fixed(median(out.idle.map((x) => x.workerRssMb - x.clusterWorkerRssMb)))} | |`)
  if (out.idle.some((x) => x.reaperRssMb !== null)) console.log(`| the pool's reaper, once per pool: RSS MB (own) | ${m('reaperRssMb')} (${m('reaperPrivateMb')}) | |`)
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const out = { args, machine: { cpus: os.cpus().length, loadavg: os.loadavg() } }
  const onSignal = () => stopAll().then(() => process.exit(130))
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  if (args.what !== 'idle') await measureRequests(args, out)
  if (args.what !== 'requests') await measureIdle(args, out)
  out.machine.loadavgEnd = os.loadavg()
  if (args.json) fs.writeFileSync(args.json, JSON.stringify(out, null, 1) + '\n')
  process.exit(0)
}

main().catch(async (err) => {
  console.error(err)
  await stopAll()
  process.exit(1)
})
