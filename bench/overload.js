'use strict'

// The fronts under overload, side by side: how much of the workers' capacity still reaches
// clients in time when more arrives than they can render.
//
//   node bench/overload.js [--quick] [--load 0.5,0.8,1.2,1.5,2] [--runs 3] [--measure 2] [--warmup 1]
//                          [--deadline 1000] [--workers 15] [--median 30] [--sigma 0.8] [--seed 42]
//                          [--fronts embedded-oc,embedded-fifo,haproxy,haproxy-fifo,cluster] [--results DIR]
//
// The workload of bench/balancer.js (15 workers blocking for lognormal service times, open-loop
// Poisson arrivals, a new connection per request) at `load` times the workers' capacity, with
// clients that give up after `deadline` ms and close their connection. Each run lasts
// warmup + measure seconds; only requests sent after the warm-up count, so the figures are the
// steady state, not the first second's empty queue. Each run is one schedule sent to every
// front in turn, `runs` times; the report shows the median of the runs with a 95% interval.
//
//   goodput   answers (200) that reached their client within the deadline, per second, as a
//             share of capacity (workers / mean service time of the very requests sent)
//   p50, p99  of the answered requests' latency
//   503       answered 503 by the front (turned away); gave up: the client's deadline passed
//   drain     how long after the run the front took to answer a probe quickly again (what it
//             still had queued: HAProxy and cluster render for clients long gone)
//
// Fronts (bench/lib/fronts.js, each with its own workers): `pool start` (overload control, its
// default), `pool start --no-overload-control` (FIFO), `pool start --balancer haproxy` with the
// generated config (its queue capped, `--max-queue 100`), the same with `pool config haproxy
// --max-queue 0` (FIFO), and Node's cluster (round-robin). The loads below 1 show what overload
// control costs when there is no overload: on and off side by side. Before each run the bench
// waits until the front has worked off what the previous run left queued.

const { forkReady, ask, sleep } = require('./lib/procs')
const { makeSchedule } = require('./lib/schedule')
const { percentile } = require('./lib/stats')
const { startFront, unavailable } = require('./lib/fronts')
const { runPart, progress, round, log } = require('./lib/part')

const VARIANTS = {
  'embedded-oc': ['embedded', {}],
  'embedded-fifo': ['embedded', { poolArgs: ['--no-overload-control'] }],
  haproxy: ['haproxy', {}],
  'haproxy-fifo': ['haproxy', { maxQueue: 0 }],
  cluster: ['cluster', {}]
}

const defaults = { load: [0.5, 0.8, 1.2, 1.5, 2], runs: 3, measure: 2, warmup: 1, deadline: 1000, workers: 15, median: 30, sigma: 0.8, cap: 2000, seed: 42, fronts: Object.keys(VARIANTS) }
const quick = { load: [0.8, 1.5], runs: 1, measure: 2, warmup: 1 }

function summarize ({ schedule, result, args }) {
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
    offered: round(counted.length / seconds, 1),
    capacity: round(capacity, 1),
    goodput: round(good.length / seconds, 1),
    share: round(good.length / seconds / capacity, 4),
    p50: round(percentile(latency, 50)),
    p99: round(percentile(latency, 99)),
    turnedAway: round(count((s) => s === 503) / counted.length, 4),
    gaveUp: round(count((s) => s === 0) / counted.length, 4),
    errors: count((s) => s !== 200 && s !== 503 && s !== 0),
    requests: counted.length,
    lag: result.lag
  }
}

async function main (args) {
  for (const f of args.fronts) if (!VARIANTS[f]) throw new Error(`unknown front ${f} (one of ${Object.keys(VARIANTS).join(', ')})`)
  const skipped = args.fronts.filter((f) => unavailable(VARIANTS[f][0])).map((f) => ({ front: f, reason: unavailable(VARIANTS[f][0]) }))
  const fronts = {}
  for (const name of args.fronts.filter((f) => !unavailable(VARIANTS[f][0]))) {
    const [kind, options] = VARIANTS[name]
    try { fronts[name] = await startFront(kind, { workers: args.workers, ...options }) } catch (err) { skipped.push({ front: name, reason: err.message.split('\n')[0] }); log(`  ${name}: not measured: ${err.message.split('\n')[0]}`) }
  }
  const names = Object.keys(fronts)
  const load = await forkReady('load.js', {})
  const shape = { workers: args.workers, median: args.median, sigma: args.sigma, capMs: args.cap }
  // Warm the JIT on both sides and the load generator before anything counts: a first run on
  // a cold front measures its start, not its queue.
  const warm = makeSchedule({ ...shape, rho: 0.8, durationMs: 1500, seed: 7 })
  for (const name of names) {
    await ask(load, { cmd: 'run', url: fronts[name].url, at: warm.at, ms: warm.ms, deadlineMs: args.deadline })
    await ask(load, { cmd: 'idle', url: fronts[name].url, probes: args.workers })
  }
  const cells = args.load.flatMap((x) => names.map((front) => ({ load: x, front, runs: [] })))
  const total = args.runs * cells.length
  let done = 0
  for (let r = 0; r < args.runs; r++) {
    for (const [k, x] of args.load.entries()) {
      const schedule = makeSchedule({ ...shape, rho: x, durationMs: (args.warmup + args.measure) * 1000, seed: args.seed + 100 * k + r })
      for (let j = 0; j < names.length; j++) {
        const name = names[(j + r) % names.length]
        progress(done++, total, `${x}× ${name}, run ${r + 1}/${args.runs}`)
        const result = await ask(load, { cmd: 'run', url: fronts[name].url, at: schedule.at, ms: schedule.ms, deadlineMs: args.deadline })
        const run = summarize({ schedule, result, args })
        // Let the front work off what it still holds (renders for clients long gone, for HAProxy
        // and cluster) before anything else runs: a backlog draining in the background would
        // take CPU from the next front.
        const started = performance.now()
        const idle = await ask(load, { cmd: 'idle', url: fronts[name].url, probes: args.workers })
        run.drainS = round((performance.now() - started) / 1000, 1)
        run.drained = idle.idle
        cells.find((c) => c.load === x && c.front === name).runs.push(run)
        log(`  ${x}× ${name.padEnd(11)} goodput ${(run.share * 100).toFixed(1).padStart(5)}% of capacity  p50 ${run.p50} ms  p99 ${run.p99} ms  503 ${(run.turnedAway * 100).toFixed(1)}%  gave up ${(run.gaveUp * 100).toFixed(1)}%  send lag p99 ${run.lag?.p99} ms  (drained after ${run.drainS} s${idle.idle ? '' : ', not quite'})`)
        await sleep(300)
      }
    }
  }
  progress(total, total, 'done')
  for (const f of Object.values(fronts)) await f.stop()
  return { fronts: names, cells, skipped }
}

runPart('overload', { defaults, quick, main })
