'use strict'

// The fronts under overload, side by side, and overload control against a FIFO queue on the
// loads it must leave alone (bench/lib/overload-shapes.js; the same loads on a simulated clock:
// node bench/overload-sim.js).
//
//   node bench/overload.js [--quick] [--load 0.8,1,1.2,1.5,2] [--runs 3] [--measure 2] [--warmup 1]
//                          [--deadline 1000] [--workers 15] [--median 30] [--sigma 0.8] [--seed 42]
//                          [--fronts embedded-oc,embedded-fifo,haproxy,haproxy-fifo,cluster]
//                          [--mixed 0.8,1.2,1.5,2] [--clients 5,13,20,50] [--closed-workers 2,15]
//                          [--renders cpu,await] [--closed-seconds 6] [--closed-runs 2] [--results DIR]
//
// Open loop: the workload of bench/balancer.js (15 workers blocking for lognormal service times,
// Poisson arrivals, a new connection per request) at `load` times the workers' capacity, with
// clients that give up after `deadline` ms and close their connection. Only requests sent after
// the warm-up count. The warm-up is `warmup` s, unless a FIFO's wait would reach the deadline
// within the run: then the run is measured once every front has reached its steady state (see
// openWarmup: 3 s at 1.5×, 2 s at 2×). Below that load the overload ends before a FIFO fails
// anyone, as a short peak does, and overload control must do exactly what a FIFO does. Each run
// is one schedule sent to every front in turn, `runs` times; the report shows the median of the
// runs with a 95% interval.
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
// --max-queue 0` (FIFO), and Node's cluster (round-robin). Before each run the bench waits until
// the front has worked off what the previous run left queued.
//
// Mixed routes: the same open loop with a fast route and a slow one (`--mixed` loads), and
// closed-loop clients (`--clients` on `--closed-workers`, renders on the CPU or pages awaiting
// 200 ms of data, each run right after a burst of fast requests): the embedded balancer's
// defaults against FIFO only, `--closed-runs` times each.

const { forkReady, ask, sleep } = require('./lib/procs')
const { percentile } = require('./lib/stats')
const { startFront, unavailable } = require('./lib/fronts')
const { closedLoop } = require('./lib/closed-loop')
const { RENDERS, BURST, openWarmup, openSchedule, closedShapes, mixedShapes } = require('./lib/overload-shapes')
const { runPart, progress, round, log } = require('./lib/part')

const VARIANTS = {
  'embedded-oc': ['embedded', {}],
  'embedded-fifo': ['embedded', { poolArgs: ['--no-overload-control'] }],
  haproxy: ['haproxy', {}],
  'haproxy-fifo': ['haproxy', { maxQueue: 0 }],
  cluster: ['cluster', {}]
}
// What the mixed and closed-loop shapes compare.
const EMBEDDED = ['embedded-oc', 'embedded-fifo']

const defaults = {
  load: [0.8, 1, 1.2, 1.5, 2],
  runs: 3,
  measure: 2,
  warmup: 1,
  deadline: 1000,
  workers: 15,
  median: 30,
  sigma: 0.8,
  seed: 42,
  fronts: Object.keys(VARIANTS),
  mixed: [0.8, 1.2, 1.5, 2],
  clients: [5, 13, 20, 50],
  'closed-workers': [2, 15],
  renders: ['cpu', 'await'],
  'closed-seconds': 6,
  'closed-runs': 2
}
const quick = { load: [0.8, 1.2, 2], runs: 1, mixed: [1.5], clients: [13, 50], 'closed-workers': [2], 'closed-seconds': 3, 'closed-runs': 1 }

function summarize ({ schedule, result, args, warmup }) {
  const warmupMs = warmup * 1000
  const counted = []
  for (let i = 0; i < schedule.at.length; i++) if (schedule.at[i] >= warmupMs) counted.push(i)
  const seconds = args.measure
  const capacity = args.workers * 1000 / (counted.reduce((a, i) => a + schedule.ms[i], 0) / counted.length) // req/s
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

// One open-loop run of `schedule` on a front, then the wait until it has worked off its queue.
async function openRun (load, front, { schedule, args, warmup }) {
  const result = await ask(load, { cmd: 'run', url: front.url, at: schedule.at, ms: schedule.ms, deadlineMs: args.deadline })
  const run = summarize({ schedule, result, args, warmup })
  // Let the front work off what it still holds (renders for clients long gone, for HAProxy
  // and cluster) before anything else runs: a backlog draining in the background would
  // take CPU from the next front.
  const started = performance.now()
  const idle = await ask(load, { cmd: 'idle', url: front.url, probes: args.workers })
  run.drainS = round((performance.now() - started) / 1000, 1)
  run.drained = idle.idle
  return run
}

// One closed-loop run: the burst of fast requests, then `shape.clients` clients for its seconds.
async function closedRun (load, front, shape, seed) {
  await closedLoop({ url: front.url, connections: BURST.clients, requests: BURST.count, durationS: 60, service: { ms: BURST.ms } })
  const render = RENDERS[shape.render]
  const how = render.await ? { query: `wait=${render.ms}` } : { service: { median: render.median, sigma: render.sigma, seed } }
  const { summary: s } = await closedLoop({ url: front.url, connections: shape.clients, durationS: shape.seconds, timeoutS: 10, ...how })
  await ask(load, { cmd: 'idle', url: front.url, probes: shape.workers })
  return { requests: s.requests, ok: s.ok, turnedAway: s.failedByKind['503'] ?? 0, failed: s.failed, failedByKind: s.failedByKind, rps: round(s.rps, 1), p50: round(s.p50), p99: round(s.p99) }
}

const line = (label, run) => `  ${label.padEnd(34)} goodput ${(run.share * 100).toFixed(1).padStart(5)}% of capacity  p50 ${run.p50} ms  p99 ${run.p99} ms  503 ${(run.turnedAway * 100).toFixed(1)}%  gave up ${(run.gaveUp * 100).toFixed(1)}%  send lag p99 ${run.lag?.p99} ms  (drained after ${run.drainS} s${run.drained ? '' : ', not quite'})`

async function main (args) {
  for (const f of args.fronts) if (!VARIANTS[f]) throw new Error(`unknown front ${f} (one of ${Object.keys(VARIANTS).join(', ')})`)
  for (const r of args.renders) if (!RENDERS[r] || r === 'mixed') throw new Error(`unknown render ${r} (cpu or await)`)
  const skipped = args.fronts.filter((f) => unavailable(VARIANTS[f][0])).map((f) => ({ front: f, reason: unavailable(VARIANTS[f][0]) }))
  // The fronts of the open loop (args.workers each), and the embedded ones the other shapes need
  // on other pool sizes: pools[workers][name].
  const pools = { [args.workers]: {} }
  const start = async (workers, name) => {
    pools[workers] ??= {}
    if (pools[workers][name]) return pools[workers][name]
    const [kind, options] = VARIANTS[name]
    try {
      pools[workers][name] = await startFront(kind, { workers, ...options })
    } catch (err) {
      skipped.push({ front: name, workers, reason: err.message.split('\n')[0] })
      log(`  ${name} (${workers} workers): not measured: ${err.message.split('\n')[0]}`)
    }
    return pools[workers][name]
  }
  for (const name of args.fronts.filter((f) => !unavailable(VARIANTS[f][0]))) await start(args.workers, name)
  for (const workers of args['closed-workers']) for (const name of EMBEDDED) await start(workers, name)
  const fronts = pools[args.workers]
  const names = args.fronts.filter((f) => fronts[f])
  const load = await forkReady('load.js', {})
  // Warm the JIT on every front and the load generator before anything counts: a first run on a
  // cold front measures its start, not its queue.
  const render = { median: args.median, sigma: args.sigma }
  for (const [workers, p] of Object.entries(pools)) {
    const warm = openSchedule({ load: 0.8, workers: Number(workers), warmup: 1.5, measure: 0, render }, 7)
    for (const front of Object.values(p)) {
      await ask(load, { cmd: 'run', url: front.url, at: warm.at, ms: warm.ms, deadlineMs: args.deadline })
      await ask(load, { cmd: 'idle', url: front.url, probes: Number(workers) })
    }
  }

  const opens = args.load.map((x) => ({ id: `${x}×`, load: x, render, warmup: openWarmup(x, { deadline: args.deadline, measure: args.measure, base: args.warmup }) }))
  const mixes = mixedShapes({ loads: args.mixed, measure: args.measure, deadline: args.deadline }).map((s) => ({ ...s, warmup: openWarmup(s.load, { deadline: args.deadline, measure: args.measure, base: args.warmup }) }))
  const closes = closedShapes({ clients: args.clients, workers: args['closed-workers'], renders: args.renders, seconds: args['closed-seconds'] })
  const cells = opens.flatMap((o) => names.map((front) => ({ load: o.load, warmup: o.warmup, front, runs: [] })))
  const mixed = mixes.flatMap((m) => EMBEDDED.filter((f) => fronts[f]).map((front) => ({ load: m.load, warmup: m.warmup, front, runs: [] })))
  const closed = closes.flatMap((c) => EMBEDDED.filter((f) => pools[c.workers]?.[f]).map((front) => ({ workers: c.workers, clients: c.clients, render: c.render, seconds: c.seconds, front, runs: [] })))
  const total = args.runs * (cells.length + mixed.length) + args['closed-runs'] * closed.length
  let done = 0

  for (let r = 0; r < args.runs; r++) {
    for (const [k, shape] of [...opens.map((o) => ['open', o]), ...mixes.map((m) => ['mixed', m])].entries()) {
      const [kind, o] = shape
      const schedule = openSchedule({ ...o, workers: args.workers, measure: args.measure }, args.seed + 100 * k + r)
      const list = kind === 'open' ? names : EMBEDDED.filter((f) => fronts[f])
      for (let j = 0; j < list.length; j++) {
        const name = list[(j + r) % list.length]
        progress(done++, total, `${kind} ${o.load}× ${name}, run ${r + 1}/${args.runs}`)
        const run = await openRun(load, fronts[name], { schedule, args, warmup: o.warmup })
        ;(kind === 'open' ? cells : mixed).find((c) => c.load === o.load && c.front === name).runs.push(run)
        log(line(`${kind === 'open' ? '' : 'mixed '}${o.load}× ${name}`, run))
        await sleep(300)
      }
    }
  }
  for (let r = 0; r < args['closed-runs']; r++) {
    for (const shape of closes) {
      const list = EMBEDDED.filter((f) => pools[shape.workers]?.[f])
      for (let j = 0; j < list.length; j++) {
        const name = list[(j + r) % list.length]
        progress(done++, total, `${shape.id} ${name}, run ${r + 1}/${args['closed-runs']}`)
        const run = await closedRun(load, pools[shape.workers][name], shape, args.seed + r)
        closed.find((c) => c.workers === shape.workers && c.clients === shape.clients && c.render === shape.render && c.front === name).runs.push(run)
        log(`  ${shape.id.padEnd(22)} ${name.padEnd(14)} ${run.requests} requests, ${run.turnedAway} × 503, ${run.failed - run.turnedAway} other failures, p50 ${run.p50} ms, p99 ${run.p99} ms`)
      }
    }
  }
  progress(total, total, 'done')
  for (const p of Object.values(pools)) for (const f of Object.values(p)) await f.stop()
  return { fronts: names, cells, mixed, closed, renders: RENDERS, burst: BURST, skipped }
}

runPart('overload', { defaults, quick, main })
