'use strict'

// Benchmark of the fronts under overload, side by side: how much of the workers' capacity
// still reaches clients in time when more arrives than they can render.
//
//   node bench/overload.js [--load 0.8,1.2,1.5,2] [--measure 6] [--warmup 2] [--deadline 1000]
//                          [--workers 15] [--median 30] [--sigma 0.8] [--seed 42]
//                          [--fronts embedded-oc,embedded,haproxy,haproxy-tq,cluster]
//
// The workload of bench/balancer.js (15 workers blocking for lognormal service times, open-loop
// Poisson arrivals, a new connection per request) at `load` times the workers' capacity, with
// clients that give up after `deadline` ms and close their connection. Each run lasts
// warmup + measure seconds; only requests sent after the warm-up count, so the table shows
// the steady state, not the first second's empty queue.
//
//   goodput   answers (200) that reached their client within the deadline, per second, as a
//             share of capacity (workers / mean service time of the very requests sent)
//   p50, p99  of the answered requests' latency
//   503       answered 503 by the front (turned away); gave up: the client's deadline passed
//   busy after  how long after the last arrival the front took to answer a probe quickly again
//             (what it still had queued; HAProxy and cluster render for clients long gone)
//
// Fronts: the embedded balancer with --overload-control (its defaults) and without (FIFO),
// HAProxy configured as bench/lib/haproxy.js does (FIFO, timeout queue 20s), the same HAProxy
// with `timeout queue` below the deadline (haproxy-tq: the most HAProxy itself can do), and
// Node's cluster (round-robin). The embedded fronts and HAProxy share one set of workers,
// cluster has its own; before each run the bench waits until the front has worked off what the
// previous run left queued (HAProxy and cluster render requests whose client has left).
//
// Everything runs on 127.0.0.1 on free ports; every process is killed at the end.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { forkReady, stopAll, freePorts, ask, sleep, loadavg } = require('./lib/procs')
const { makeSchedule, lognormalMean } = require('./lib/schedule')
const { percentile } = require('./lib/stats')
const haproxy = require('./lib/haproxy')
const { startTunedHaproxy } = require('./lib/overload-haproxy')

const ALL_FRONTS = ['embedded-oc', 'embedded', 'haproxy', 'haproxy-tq', 'cluster']
const HAPROXY_TQ_MS = 500

function parseArgs (argv) {
  const args = { load: [0.8, 1.2, 1.5, 2], measure: 6, warmup: 2, deadline: 1000, workers: 15, median: 30, sigma: 0.8, cap: 2000, seed: 42, fronts: ALL_FRONTS }
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '')
    const value = argv[i + 1]
    if (key === 'load') args.load = value.split(',').map(Number)
    else if (key === 'fronts') args.fronts = value.split(',')
    else if (key in args) args[key] = Number(value)
    else throw new Error(`unknown option --${key}`)
  }
  for (const f of args.fronts) if (!ALL_FRONTS.includes(f)) throw new Error(`unknown front ${f} (one of ${ALL_FRONTS.join(', ')})`)
  return args
}


async function startEmbedded (port, workerPorts, options) {
  await forkReady('embedded-front.js', {
    CONFIG: JSON.stringify({ options: { port, ...options }, workers: workerPorts.map((p, i) => ({ slot: i + 1, port: p })) })
  })
  return `http://127.0.0.1:${port}`
}

// Start the fronts asked for; returns { name: url }.
async function startFronts (args) {
  const want = new Set(args.fronts)
  const [ocPort, fifoPort, haproxyPort, tqPort, clusterPort] = await freePorts(5)
  const workerPorts = await freePorts(args.workers)
  await Promise.all(workerPorts.map((port) => forkReady('worker.js', { PORT: String(port) })))
  const urls = {}
  if (want.has('embedded-oc')) urls['embedded-oc'] = await startEmbedded(ocPort, workerPorts, { overloadControl: true })
  if (want.has('embedded')) urls.embedded = await startEmbedded(fifoPort, workerPorts, {})
  const haproxyWanted = want.has('haproxy') || want.has('haproxy-tq')
  if (haproxyWanted && !haproxy.available()) console.log('haproxy not found: its rows are skipped (set HAPROXY=/path/to/haproxy)')
  if (haproxyWanted && haproxy.available()) {
    if (want.has('haproxy')) {
      await haproxy.startHaproxy([{ port: haproxyPort, workerPorts }])
      urls.haproxy = `http://127.0.0.1:${haproxyPort}`
    }
    if (want.has('haproxy-tq')) {
      await startTunedHaproxy({ port: tqPort, workerPorts, queueTimeoutMs: HAPROXY_TQ_MS })
      urls['haproxy-tq'] = `http://127.0.0.1:${tqPort}`
    }
  }
  if (want.has('cluster')) {
    await forkReady('cluster-primary.js', { PORT: String(clusterPort), WORKERS: String(args.workers) }, { timeout: 60000 })
    urls.cluster = `http://127.0.0.1:${clusterPort}`
  }
  return urls
}

function summarize ({ load, front, schedule, result, args }) {
  const warmupMs = args.warmup * 1000
  const counted = []
  for (let i = 0; i < schedule.at.length; i++) if (schedule.at[i] >= warmupMs) counted.push(i)
  const seconds = args.measure
  const capacity = args.workers * 1000 / (schedule.ms.reduce((a, b) => a + b, 0) / schedule.ms.length) // req/s
  const answered = counted.filter((i) => result.status[i] === 200)
  const good = answered.filter((i) => result.latency[i] <= args.deadline)
  const latency = answered.map((i) => result.latency[i])
  const count = (pred) => counted.filter((i) => pred(result.status[i])).length
  return {
    load,
    front,
    offered: counted.length / seconds,
    capacity,
    goodput: good.length / seconds,
    share: good.length / seconds / capacity,
    p50: percentile(latency, 50),
    p99: percentile(latency, 99),
    turnedAway: count((s) => s === 503) / counted.length,
    gaveUp: count((s) => s === 0) / counted.length,
    errors: count((s) => s !== 200 && s !== 503 && s !== 0),
    requests: counted.length
  }
}

async function measure (args, urls, load) {
  const rows = []
  const shape = { workers: args.workers, median: args.median, sigma: args.sigma, capMs: args.cap }
  const names = args.fronts.filter((n) => urls[n])
  for (const name of names) await ask(load, { cmd: 'idle', url: urls[name], probes: args.workers })
  for (const [k, rho] of args.load.entries()) {
    const schedule = makeSchedule({ ...shape, rho, durationMs: (args.warmup + args.measure) * 1000, seed: args.seed + 100 * k })
    for (const name of names) {
      const result = await ask(load, { cmd: 'run', url: urls[name], at: schedule.at, ms: schedule.ms, deadlineMs: args.deadline })
      const row = summarize({ load: rho, front: name, schedule, result, args })
      rows.push(row)
      // Let the front work off what it still holds (renders for clients long gone, for HAProxy
      // and cluster) before anything else runs: the next front may share its workers, and a
      // backlog draining in the background would take CPU from it.
      const started = performance.now()
      const idle = await ask(load, { cmd: 'idle', url: urls[name], probes: args.workers })
      row.drainS = (performance.now() - started) / 1000
      console.log(`  ${rho}× ${name.padEnd(11)} goodput ${(row.share * 100).toFixed(1).padStart(5)}% of capacity  p50 ${fmt(row.p50)}  p99 ${fmt(row.p99)}  503 ${pct(row.turnedAway)}  gave up ${pct(row.gaveUp)}  errors ${row.errors}  (idle again after ${row.drainS.toFixed(1)} s${idle.idle ? '' : ', not quite'})`)
      await sleep(300)
    }
  }
  return rows
}

const fmt = (ms) => (Number.isNaN(ms) ? '-' : ms >= 100 ? ms.toFixed(0) : ms.toFixed(1)).padStart(5) + ' ms'
const pct = (x) => `${(x * 100).toFixed(1)}%`

const FRONT_LABEL = {
  'embedded-oc': 'embedded, --overload-control',
  embedded: 'embedded, FIFO (default)',
  haproxy: 'HAProxy, FIFO (timeout queue 20s)',
  'haproxy-tq': `HAProxy, timeout queue ${HAPROXY_TQ_MS}ms`,
  cluster: 'cluster (round-robin)'
}

const report = []
function out (line) {
  report.push(line)
  console.log(line)
}

function print (args, rows) {
  const mean = lognormalMean(args.median, args.sigma)
  out(`\n## Goodput under overload: ${args.workers} workers, service time lognormal (median ${args.median} ms, σ ${args.sigma}, mean ${mean.toFixed(1)} ms, cap ${args.cap} ms), Poisson arrivals at load × capacity, a new connection per request, clients giving up after ${args.deadline} ms; ${args.warmup} s warm-up, then ${args.measure} s measured per front and load\n`)
  out('| load | front | offered req/s | goodput req/s | goodput / capacity | answered p50 ms | answered p99 ms | 503 | gave up | errors | busy after the run |')
  out('|---|---|---|---|---|---|---|---|---|---|---|')
  for (const r of rows) {
    const ms = (x) => (Number.isNaN(x) ? '-' : x.toFixed(0))
    out(`| ${r.load}× | ${FRONT_LABEL[r.front]} | ${r.offered.toFixed(0)} | ${r.goodput.toFixed(0)} | **${(r.share * 100).toFixed(0)}%** | ${ms(r.p50)} | ${ms(r.p99)} | ${pct(r.turnedAway)} | ${pct(r.gaveUp)} | ${r.errors} | ${r.drainS.toFixed(1)} s |`)
  }
  out(`\nCapacity: ${rows.length ? rows[0].capacity.toFixed(0) : '-'} req/s (${args.workers} workers / the mean service time of the requests sent).`)
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const started = Date.now()
  const loadAtStart = loadavg()
  console.log(`bench: ${JSON.stringify(args)}; ${os.cpus().length} CPUs, load average ${loadAtStart}`)
  const urls = await startFronts(args)
  const load = await forkReady('load.js', {})
  const rows = await measure(args, urls, load)
  await stopAll()
  print(args, rows)
  out(`\nMade by: \`node bench/overload.js${process.argv.slice(2).map((a) => ' ' + a).join('')}\` in ${((Date.now() - started) / 1000).toFixed(0)} s on ${os.cpus().length} CPUs (${os.cpus()[0].model}), load average ${loadAtStart} at the start and ${loadavg()} at the end (other work on the machine shows in the numbers).`)
  const dir = path.join(__dirname, 'results')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'overload.md'), report.join('\n').trim() + '\n')
  fs.writeFileSync(path.join(dir, 'overload.json'), JSON.stringify({ args, rows }, null, 2) + '\n')
  console.log(`\n(written to ${path.relative(process.cwd(), path.join(dir, 'overload.md'))} and overload.json)`)
}

for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => stopAll().then(() => process.exit(130)))
main().catch(async (err) => {
  console.error(err)
  await stopAll()
  process.exit(1)
})
