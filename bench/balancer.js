'use strict'

// Latency against the ideal central queue: the fronts a pool can have, and what people run
// instead, side by side, on the same requests.
//
//   node bench/balancer.js [--quick] [--rho 0.55,0.8,0.9] [--runs 5] [--seconds 2.5] [--workers 15]
//                          [--fronts embedded,haproxy,haproxy-3.0,cluster,pm2] [--median 30] [--sigma 0.8]
//                          [--seed 42] [--results DIR]
//
// Open-loop Poisson arrivals (a new connection per request, sent on schedule by bench/lib/load.js
// in a process of its own) with lognormal service times, at each utilisation ρ, replayed
// identically on each front (bench/lib/fronts.js: `pool start`, `pool start --balancer haproxy`
// with the generated config on the system's HAProxy and on Debian 13's 3.0 (nbthread 1, as
// generated), Node's cluster, PM2 cluster mode; each with its own workers). The
// ideal is computed from the very arrivals and service times of each run: one FIFO queue over
// the workers, zero overhead. Each run of `seconds` is one schedule sent to every front in turn
// (a different one per run), `runs` times, so that a change in the machine's load falls on
// every front alike; the report shows the median of the runs with a bootstrap 95% interval.
//
// Beside the ratios, each run records the queue wait (latency minus the service time the
// request asked for) against the ideal's: what the balancer's hop costs in ms, not diluted by
// the service time's tail, and the load generator's send lag (a run that fell behind its
// schedule is set aside by the report).

const { forkReady, ask, sleep } = require('./lib/procs')
const { makeSchedule, lognormalMean } = require('./lib/schedule')
const { idealLatencies } = require('./lib/ideal')
const { percentile } = require('./lib/stats')
const { startFront, unavailable, HAPROXY_OF } = require('./lib/fronts')
const { runPart, progress, round, log } = require('./lib/part')

const FRONTS = ['embedded', 'haproxy', 'haproxy-3.0', 'cluster', 'pm2']
const defaults = { workers: 15, rho: [0.55, 0.8, 0.9], runs: 5, seconds: 2.5, fronts: FRONTS, median: 30, sigma: 0.8, cap: 2000, seed: 42 }
const quick = { rho: [0.8], runs: 2, seconds: 2 }

// The distribution chart's sample: every n-th latency, sorted, at most `max` of them.
function sample (values, max = 2000) {
  const sorted = Float64Array.from(values).sort()
  const step = Math.max(1, Math.ceil(sorted.length / max))
  return Array.from(sorted.filter((_, i) => i % step === 0), (v) => round(v, 2))
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
const waitSummary = (waits) => ({ mean: round(mean(waits), 3), p50: round(percentile(waits, 50), 3), p90: round(percentile(waits, 90), 3), p99: round(percentile(waits, 99), 3) })

// One run of `schedule` on a front; its percentiles and queue waits against the ideal's.
async function measure (load, front, schedule, args) {
  const shape = { workers: args.workers, median: args.median, sigma: args.sigma, capMs: args.cap }
  // Warm the connections and the JIT with a short burst at the same rate, then measure.
  const warm = makeSchedule({ ...shape, rho: 0.5, durationMs: 300, seed: 7 })
  await ask(load, { cmd: 'run', url: front.url, at: warm.at, ms: warm.ms })
  await sleep(200)
  const r = await ask(load, { cmd: 'run', url: front.url, at: schedule.at, ms: schedule.ms })
  const ideal = Array.from(idealLatencies(r.sent, schedule.ms, args.workers))
  const ok = r.status.map((s) => s === 200)
  const latency = r.latency.filter((_, i) => ok[i])
  const run = { requests: r.status.length, errors: ok.filter((x) => !x).length, lag: r.lag }
  for (const q of [50, 90, 99]) {
    run[`p${q}`] = round(percentile(latency, q), 3)
    run[`ideal${q}`] = round(percentile(ideal, q), 3)
  }
  run.wait = waitSummary(r.latency.map((l, i) => l - schedule.ms[i]).filter((_, i) => ok[i]))
  run.idealWait = waitSummary(ideal.map((l, i) => l - schedule.ms[i]))
  return { run, latency, ideal }
}

async function main (args) {
  for (const f of args.fronts) if (!FRONTS.includes(f)) throw new Error(`unknown front ${f} (one of ${FRONTS.join(', ')})`)
  const skipped = args.fronts.filter((f) => unavailable(f)).map((f) => ({ front: f, reason: unavailable(f) }))
  const fronts = {}
  for (const kind of args.fronts.filter((f) => !unavailable(f))) {
    try { fronts[kind] = await startFront(kind, { workers: args.workers }) } catch (err) { skipped.push({ front: kind, reason: err.message.split('\n')[0] }); log(`  ${kind}: not measured: ${err.message.split('\n')[0]}`) }
  }
  const names = Object.keys(fronts)
  // Which HAProxy each HAProxy-mode front ran, for the report.
  const haproxy = Object.fromEntries(names.filter((n) => HAPROXY_OF[n]).map((n) => [n, fronts[n].haproxy.version]))
  const load = await forkReady('load.js', {})
  const shape = { workers: args.workers, median: args.median, sigma: args.sigma, capMs: args.cap }
  const cells = args.rho.flatMap((rho) => names.map((front) => ({ rho, front, runs: [] })))
  const pooled = {} // ρ 0.8: every front's latencies and the ideal's, for the distribution chart
  const total = args.runs * args.rho.length * names.length
  let done = 0
  for (let r = 0; r < args.runs; r++) {
    for (const [k, rho] of args.rho.entries()) {
      const schedule = makeSchedule({ ...shape, rho, durationMs: args.seconds * 1000, seed: args.seed + 100 * k + r })
      // The same schedule on every front, starting one front further along each run.
      for (let j = 0; j < names.length; j++) {
        const name = names[(j + r) % names.length]
        progress(done++, total, `ρ ${rho} ${name}, run ${r + 1}/${args.runs}`)
        const { run, latency, ideal } = await measure(load, fronts[name], schedule, args)
        run.rps = round(schedule.ratePerSecond, 1)
        cells.find((c) => c.rho === rho && c.front === name).runs.push(run)
        if (rho === 0.8) {
          pooled[name] = (pooled[name] ?? []).concat(latency)
          if (j === 0) pooled.ideal = (pooled.ideal ?? []).concat(ideal)
        }
        log(`  ρ=${rho} ${name.padEnd(8)} p50 ${run.p50.toFixed(1)} (ideal ${run.ideal50.toFixed(1)})  p99 ${run.p99.toFixed(1)} (${run.ideal99.toFixed(1)})  wait mean ${run.wait.mean.toFixed(2)} ms (ideal ${run.idealWait.mean.toFixed(2)})  send lag p99 ${run.lag?.p99} ms  errors ${run.errors}`)
        await sleep(300)
      }
    }
  }
  progress(total, total, 'done')
  for (const f of Object.values(fronts)) await f.stop()
  const samples = pooled.ideal ? { rho: 0.8, latency: Object.fromEntries(Object.entries(pooled).map(([n, v]) => [n, sample(v)])) } : null
  return { workload: { mean: round(lognormalMean(args.median, args.sigma), 1) }, fronts: names, haproxy, cells, samples, skipped }
}

runPart('balancer', { defaults, quick, main })
