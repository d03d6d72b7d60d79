'use strict'

// What a front costs by itself: the latency it adds to a request that takes no time, and the
// most requests per second the whole stack answers, per front, against a worker reached directly.
//
//   node bench/overhead.js [--quick] [--count 2000] [--rounds 5] [--peak 0] [--connections 16]
//                          [--workers 4] [--results DIR]
//
// The handler answers at once (0 ms; the bench app's `ok`). Fronts: direct (one worker, no
// front), the embedded balancer, HAProxy from `pool config haproxy` (servers set READY), nginx →
// HAProxy from `pool config nginx` (over HAProxy's unix socket, upstream keep-alive), and Node's
// cluster (round-robin), and the smallest proxy built on http-proxy (over the embedded balancer's
// workers); each front but direct has `workers` workers.
//   added latency   sequential requests, one at a time, `count` per front in `rounds` rounds
//                   that visit the fronts in turn; once on a new connection each (what a front
//                   pays to accept), once on one kept-alive connection. Median and p99.
//   peak req/s      with --peak S: autocannon, `connections` keep-alive connections for S s per
//                   round (off by default: bench/costs.js measures the embedded balancer's
//                   ceiling with the load generator on a core of its own instead).
//                   On this machine the load generator, the front and the workers share the
//                   same cores, so this is the CPU each request costs the whole stack more than
//                   a front's capacity on a bigger machine.
// Loopback only; every process is stopped at the end and on Ctrl-C.

const http = require('node:http')
const autocannon = require('autocannon')
const { forkReady, freePorts } = require('./lib/procs')
const { startGeneratedHaproxy, startGeneratedNginx, has, HAPROXY, NGINX } = require('./lib/stack')
const { percentile } = require('./lib/stats')
const { runPart, progress, round, log } = require('./lib/part')

const defaults = { count: 2000, rounds: 5, peak: 0, connections: 16, workers: 4 }
const quick = { count: 300, rounds: 1 }

async function startFronts (args) {
  const fronts = []
  const skipped = []
  const startWorkers = async (n) => {
    const ports = await freePorts(n)
    await Promise.all(ports.map((port) => forkReady('worker.js', { PORT: String(port) })))
    return ports
  }
  const [directPort] = await startWorkers(1)
  fronts.push({ name: 'direct', url: `http://127.0.0.1:${directPort}` })
  const workerPorts = await startWorkers(args.workers)
  const [embeddedPort] = await freePorts(1)
  await forkReady('embedded-front.js', { CONFIG: JSON.stringify({ options: { port: embeddedPort }, workers: workerPorts.map((port, i) => ({ slot: i + 1, port })) }) })
  fronts.push({ name: 'embedded', url: `http://127.0.0.1:${embeddedPort}` })
  if (has(HAPROXY)) {
    // The same workers, measured one front at a time.
    const [hp, hs, nginxPort] = await freePorts(3)
    const haproxy = await startGeneratedHaproxy({ workers: args.workers, workerPort: workerPorts[0], port: hp, statsPort: hs, ready: true })
    fronts.push({ name: 'haproxy', url: haproxy.url })
    if (has(NGINX)) {
      const nginx = await startGeneratedNginx({ port: nginxPort, haproxySocket: haproxy.httpSocket })
      fronts.push({ name: 'nginx-haproxy', url: nginx.url })
    } else skipped.push({ front: 'nginx-haproxy', reason: `${NGINX} not found` })
  } else skipped.push({ front: 'haproxy', reason: `${HAPROXY} not found` }, { front: 'nginx-haproxy', reason: `${HAPROXY} not found` })
  const [clusterPort] = await freePorts(1)
  await forkReady('cluster-primary.js', { PORT: String(clusterPort), WORKERS: String(args.workers) }, { timeout: 60000 })
  fronts.push({ name: 'cluster', url: `http://127.0.0.1:${clusterPort}` })
  // The smallest proxy built on http-proxy, over the embedded balancer's workers: what that
  // library adds per request, next to the balancer's own forwarding.
  const [httpProxyPort] = await freePorts(1)
  await forkReady('http-proxy-front.js', { CONFIG: JSON.stringify({ port: httpProxyPort, workers: workerPorts.map((port) => ({ port })) }) })
  fronts.push({ name: 'http-proxy', url: `http://127.0.0.1:${httpProxyPort}` })
  return { fronts, skipped }
}

// `count` requests one after the other; a new connection each, or one kept-alive connection.
async function sequential (url, count, keepAlive) {
  const agent = keepAlive ? new http.Agent({ keepAlive: true, maxSockets: 1 }) : false
  const latency = []
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    await new Promise((resolve, reject) => {
      const req = http.get(`${url}/?ms=0`, { agent }, (res) => {
        res.resume()
        res.on('end', resolve)
      })
      req.setTimeout(5000, () => req.destroy(new Error('timeout')))
      req.on('error', reject)
    })
    latency.push(performance.now() - start)
  }
  if (agent) agent.destroy()
  return latency
}

function peak (url, connections, durationS) {
  return new Promise((resolve, reject) => {
    autocannon({ url: `${url}/?ms=0`, connections, duration: durationS }, (err, r) => {
      if (err) return reject(err)
      resolve({ rps: r.requests.total / durationS, ok: r['2xx'], failed: r.errors + r.non2xx, p50: r.latency.p50, p99: r.latency.p99 })
    })
  })
}

async function main (args) {
  const { fronts, skipped } = await startFronts(args)
  const per = Math.ceil(args.count / args.rounds)
  const steps = fronts.length * (1 + args.rounds)
  let done = 0
  const data = Object.fromEntries(fronts.map((f) => [f.name, { fresh: [], kept: [], peaks: [], rounds: [] }]))
  for (const f of fronts) { // warm connections and the JIT on both sides
    progress(done++, steps, `warm-up ${f.name}`)
    await sequential(f.url, 200, false)
    await sequential(f.url, 200, true)
    if (args.peak > 0) await peak(f.url, args.connections, 1)
  }
  for (let r = 0; r < args.rounds; r++) {
    for (const f of fronts) {
      progress(done++, steps, `${f.name}, round ${r + 1}`)
      const d = data[f.name]
      const fresh = await sequential(f.url, per, false)
      const kept = await sequential(f.url, per, true)
      d.fresh.push(...fresh)
      d.kept.push(...kept)
      d.rounds.push({ newConnection: { p50: round(percentile(fresh, 50), 3), p99: round(percentile(fresh, 99), 3) }, keepAlive: { p50: round(percentile(kept, 50), 3), p99: round(percentile(kept, 99), 3) } })
      if (args.peak > 0) d.peaks.push(await peak(f.url, args.connections, args.peak))
    }
  }
  progress(steps, steps, 'done')
  const rows = fronts.map((f) => {
    const d = data[f.name]
    const sum = (k) => d.peaks.reduce((a, p) => a + p[k], 0)
    return {
      front: f.name,
      newConnection: { p50: round(percentile(d.fresh, 50), 3), p99: round(percentile(d.fresh, 99), 3), n: d.fresh.length },
      keepAlive: { p50: round(percentile(d.kept, 50), 3), p99: round(percentile(d.kept, 99), 3), n: d.kept.length },
      peak: d.peaks.length ? { rps: round(sum('rps') / d.peaks.length, 0), failed: sum('failed'), p50: round(sum('p50') / d.peaks.length, 2), p99: round(sum('p99') / d.peaks.length, 2), rounds: d.peaks.map((p) => round(p.rps, 0)) } : null,
      // Each round's own figures, for the report's intervals.
      runs: d.rounds.map((x, i) => ({ ...x, ...(d.peaks[i] ? { peakRps: round(d.peaks[i].rps, 0), peakP99: round(d.peaks[i].p99, 2) } : {}) }))
    }
  })
  for (const r of rows) log(`  ${r.front.padEnd(14)} new connection p50 ${r.newConnection.p50.toFixed(3)} ms  keep-alive p50 ${r.keepAlive.p50.toFixed(3)} ms${r.peak ? `  peak ${r.peak.rps} req/s` : ''}`)
  return { fronts: fronts.map((f) => f.name), skipped, rows }
}

runPart('overhead', { defaults, quick, main })
