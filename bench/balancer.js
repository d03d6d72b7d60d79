'use strict'

// Benchmark of the fronts a pool can have, side by side, against the ideal.
//
//   node bench/balancer.js [--duration 15] [--rounds 3] [--rho 0.55,0.8,0.9] [--workers 15]
//                          [--median 30] [--sigma 0.8] [--seed 42] [--skip queueing,added,buffering]
//
// 1. Queueing: open-loop Poisson arrivals (a new connection per request) with lognormal
//    service times, at each utilisation ρ, replayed identically on each front: the embedded
//    balancer, HAProxy (maxconn 1) and Node's cluster (round-robin). The ideal is computed from
//    the same arrival and service times: one FIFO queue over the workers, zero overhead.
//    Each ρ's `duration` is cut into `rounds` runs that visit the fronts in turn, so that a
//    change in the machine's background load falls on every front alike.
// 2. Added latency: the median time a front adds to a 0 ms request, sequential requests on new
//    connections, against hitting a worker directly (also for a bare http-proxy front).
// 3. Buffering: a worker's busy time with a client uploading, then one reading, at 100 KB/s.
//
// Everything runs on 127.0.0.1 on free ports; every process is killed at the end.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { forkReady, stopAll, freePorts, ask, sleep, loadavg } = require('./lib/procs')
const { makeSchedule, lognormalMean } = require('./lib/schedule')
const { idealLatencies } = require('./lib/ideal')
const { percentile, median } = require('./lib/stats')
const haproxy = require('./lib/haproxy')
const { measureBuffering } = require('./lib/buffering')

function parseArgs (argv) {
  const args = { duration: 15, rounds: 3, rho: [0.55, 0.8, 0.9], workers: 15, median: 30, sigma: 0.8, cap: 2000, seed: 42, skip: [], addedCount: 2000 }
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '')
    const value = argv[i + 1]
    if (key === 'rho') args.rho = value.split(',').map(Number)
    else if (key === 'skip') args.skip = value.split(',')
    else if (key === 'json') args.json = value // also write the raw results there, for bench/run.js's report
    else if (key in args) args[key] = Number(value)
    else throw new Error(`unknown option --${key}`)
  }
  return args
}


async function startWorkers (ports, env = {}) {
  return Promise.all(ports.map((port) => forkReady('worker.js', { PORT: String(port), ...env })))
}

// Start every front over its own set of workers; returns { name: { url, ... } }.
async function startFronts (args) {
  const n = args.workers
  const [embeddedPort, haproxyPort, clusterPort, httpProxyPort] = await freePorts(4)
  const workerPorts = await freePorts(n)
  await startWorkers(workerPorts)
  const fronts = { direct: { url: `http://127.0.0.1:${workerPorts[0]}` } }
  await forkReady('embedded-front.js', {
    CONFIG: JSON.stringify({
      options: { port: embeddedPort, queueTimeout: 60000 },
      workers: workerPorts.map((port, i) => ({ slot: i + 1, port }))
    })
  })
  fronts.embedded = { url: `http://127.0.0.1:${embeddedPort}` }
  if (haproxy.available()) {
    await haproxy.startHaproxy([{ port: haproxyPort, workerPorts }])
    fronts.haproxy = { url: `http://127.0.0.1:${haproxyPort}` }
  } else {
    console.log('haproxy not found: its rows are skipped (set HAPROXY=/path/to/haproxy)')
  }
  await forkReady('cluster-primary.js', { PORT: String(clusterPort), WORKERS: String(n) }, { timeout: 60000 })
  fronts.cluster = { url: `http://127.0.0.1:${clusterPort}` }
  await forkReady('http-proxy-front.js', { CONFIG: JSON.stringify({ port: httpProxyPort, workers: workerPorts.map((port) => ({ port })) }) })
  fronts['http-proxy'] = { url: `http://127.0.0.1:${httpProxyPort}` }
  return fronts
}

async function queueing (args, fronts, load) {
  const rows = []
  const names = ['embedded', 'haproxy', 'cluster'].filter((n) => fronts[n])
  const shape = { workers: args.workers, median: args.median, sigma: args.sigma, capMs: args.cap }
  for (const [k, rho] of args.rho.entries()) {
    const pooled = Object.fromEntries(names.map((n) => [n, { latency: [], ideal: [], errors: 0 }]))
    let rate = 0
    for (let round = 0; round < args.rounds; round++) {
      const schedule = makeSchedule({ ...shape, rho, durationMs: (args.duration * 1000) / args.rounds, seed: args.seed + 100 * k + round })
      rate = schedule.ratePerSecond
      for (const name of names) {
        // Warm the connections and the JIT with a short burst at the same rate, then measure.
        const warm = makeSchedule({ ...shape, rho, durationMs: 500, seed: 7 })
        await ask(load, { cmd: 'run', url: fronts[name].url, at: warm.at, ms: warm.ms })
        await sleep(300)
        const r = await ask(load, { cmd: 'run', url: fronts[name].url, at: schedule.at, ms: schedule.ms })
        const p = pooled[name]
        p.latency.push(...r.latency)
        p.ideal.push(...idealLatencies(r.sent, schedule.ms, args.workers))
        p.errors += r.status.filter((s) => s !== 200).length
        await sleep(500)
      }
    }
    // The whole distribution at ρ 0.8, for the report's chart (capped: a sample is enough).
    if (rho === 0.8) rows.samples = { rho, latency: Object.fromEntries(names.map((n) => [n, sample(pooled[n].latency)])), ideal: sample(pooled[names[0]].ideal) }
    for (const name of names) {
      const p = pooled[name]
      const row = { rho, front: name, requests: p.latency.length, errors: p.errors, rps: rate }
      for (const q of [50, 90, 99]) {
        row[`p${q}`] = percentile(p.latency, q)
        row[`ideal${q}`] = percentile(p.ideal, q)
      }
      rows.push(row)
      console.log(`  ρ=${rho} ${name.padEnd(8)} p50 ${fmt(row.p50)} (ideal ${fmt(row.ideal50)})  p90 ${fmt(row.p90)} (${fmt(row.ideal90)})  p99 ${fmt(row.p99)} (${fmt(row.ideal99)})  errors ${row.errors}`)
    }
  }
  return rows
}

// Every n-th value, sorted, at most `max` of them.
function sample (values, max = 2000) {
  const sorted = [...values].sort((a, b) => a - b)
  const step = Math.max(1, Math.ceil(sorted.length / max))
  return sorted.filter((_, i) => i % step === 0).map((v) => Math.round(v * 100) / 100)
}

async function addedLatency (args, fronts, load) {
  const names = ['direct', 'embedded', 'haproxy', 'cluster', 'http-proxy'].filter((n) => fronts[n])
  const pooled = Object.fromEntries(names.map((n) => [n, []]))
  for (const name of names) await ask(load, { cmd: 'sequential', url: fronts[name].url, count: 200 }) // warm-up
  for (let round = 0; round < args.rounds; round++) {
    for (const name of names) {
      const r = await ask(load, { cmd: 'sequential', url: fronts[name].url, count: Math.ceil(args.addedCount / args.rounds) })
      pooled[name].push(...r.latency)
    }
  }
  return Object.fromEntries(names.map((n) => [n, median(pooled[n])]))
}

async function buffering () {
  const [w1, w2, w3, embeddedPort, haproxyPort] = await freePorts(5)
  const [direct, viaEmbedded, viaHaproxy] = await startWorkers([w1, w2, w3], { REPORT_BUSY: '1' })
  await forkReady('embedded-front.js', { CONFIG: JSON.stringify({ options: { port: embeddedPort }, workers: [{ slot: 1, port: w2 }] }) })
  const fronts = [
    { name: 'direct', url: `http://127.0.0.1:${w1}`, worker: direct },
    { name: 'embedded', url: `http://127.0.0.1:${embeddedPort}`, worker: viaEmbedded }
  ]
  if (haproxy.available()) {
    await haproxy.startHaproxy([{ port: haproxyPort, workerPorts: [w3] }])
    fronts.push({ name: 'haproxy', url: `http://127.0.0.1:${haproxyPort}`, worker: viaHaproxy })
  }
  return measureBuffering(fronts)
}

// The tables go to stdout and to bench/results/balancer.md, with the command that made them.
const report = []
function out (line) {
  report.push(line)
  console.log(line)
}

const fmt = (ms) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1)).padStart(5) + ' ms'

function printQueueing (args, rows) {
  const mean = lognormalMean(args.median, args.sigma)
  out(`\n## Latency under load: ${args.workers} workers, service time lognormal (median ${args.median} ms, σ ${args.sigma}, mean ${mean.toFixed(1)} ms, cap ${args.cap} ms), Poisson arrivals, ${args.duration} s per front and ρ (${args.rounds} interleaved rounds), a new connection per request\n`)
  out('| ρ | front | req/s | p50 ms (ideal) | p90 ms (ideal) | p99 ms (ideal) | p50 / ideal | p90 / ideal | p99 / ideal | errors |')
  out('|---|---|---|---|---|---|---|---|---|---|')
  for (const r of rows) {
    const cell = (p) => `${r[`p${p}`].toFixed(1)} (${r[`ideal${p}`].toFixed(1)})`
    const ratio = (p) => (r[`p${p}`] / r[`ideal${p}`]).toFixed(3)
    out(`| ${r.rho} | ${r.front} | ${r.rps.toFixed(0)} | ${cell(50)} | ${cell(90)} | ${cell(99)} | ${ratio(50)} | ${ratio(90)} | ${ratio(99)} | ${r.errors} |`)
  }
}

function printAdded (added) {
  out('\n## Latency added per request (0 ms handler, sequential, new connection each; median)\n')
  out('| front | median ms | added vs direct ms |')
  out('|---|---|---|')
  for (const [name, ms] of Object.entries(added)) {
    out(`| ${name} | ${ms.toFixed(3)} | ${name === 'direct' ? '-' : (ms - added.direct).toFixed(3)} |`)
  }
}

function printBuffering (b) {
  out(`\n## Worker busy time with slow clients (render ${b.renderMs} ms; ${b.uploadKb} KB uploaded at ${b.rateKbps} KB/s; ${b.readKb} KB read at ${b.rateKbps} KB/s)\n`)
  out('| front | worker busy, slow upload | worker busy, slow reader |')
  out('|---|---|---|')
  const cell = (r) => (r ? (r.finished ? `${r.busyMs.toFixed(0)} ms` : `> ${r.busyMs.toFixed(0)} ms (still sending when the client gave up)`) : 'n/a')
  for (const r of b.results) out(`| ${r.name} | ${cell(r.upload)} | ${cell(r.read)} |`)
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const started = Date.now()
  const loadAtStart = loadavg()
  console.log(`bench: ${JSON.stringify(args)}; ${os.cpus().length} CPUs, load average ${loadAtStart}`)
  const fronts = await startFronts(args)
  const load = await forkReady('load.js', {})
  const rows = args.skip.includes('queueing') ? [] : await queueing(args, fronts, load)
  const added = args.skip.includes('added') ? null : await addedLatency(args, fronts, load)
  await stopAll()
  const buffered = args.skip.includes('buffering') ? null : await buffering()
  await stopAll()
  if (rows.length) printQueueing(args, rows)
  if (added) printAdded(added)
  if (buffered) printBuffering(buffered)
  out(`\nMade by: \`node bench/balancer.js${process.argv.slice(2).map((a) => ' ' + a).join('')}\` in ${((Date.now() - started) / 1000).toFixed(0)} s on ${os.cpus().length} CPUs (${os.cpus()[0].model}), load average ${loadAtStart} at the start and ${loadavg()} at the end (other work on the machine shows in the numbers).`)
  const file = path.join(__dirname, 'results', 'balancer.md')
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, report.join('\n').trim() + '\n')
  console.log(`\n(written to ${path.relative(process.cwd(), file)})`)
  if (args.json) {
    const madeBy = `node bench/balancer.js${process.argv.slice(2).map((a) => ' ' + a).join('')}`
    const json = {
      args,
      madeBy,
      at: new Date().toISOString(),
      machine: { cpus: os.cpus().length, model: os.cpus()[0].model, loadavg: [loadAtStart, loadavg()], node: process.version },
      queueing: rows.map(({ rho, front, rps, errors, p50, ideal50, p90, ideal90, p99, ideal99 }) => ({ rho, front, rps, errors, p50, ideal50, p90, ideal90, p99, ideal99 })),
      samples: rows.samples || null,
      added: added ? Object.entries(added).map(([front, medianMs]) => ({ front, medianMs })) : null,
      buffering: buffered
    }
    fs.writeFileSync(args.json, JSON.stringify(json, null, 2) + '\n')
  }
}

for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => stopAll().then(() => process.exit(130)))
main().catch(async (err) => {
  console.error(err)
  await stopAll()
  process.exit(1)
})
