'use strict'

// Rolling reload under load, per front: latency during the reload against steady state measured
// just before it, in the same run, and what failed.
//
//   node bench/reload.js [--quick] [--workers 8] [--connections 12] [--steady 3] [--cost 20]
//                        [--rounds 3] [--warmupRequests 5] [--fronts embedded,haproxy,cluster,pm2]
//                        [--results DIR]
//
// The app is the SSR demo (examples/ssr) rendering a 20-item page plus `cost` ms of modelled CPU
// time (Atomics.wait, so 8 workers behave like 8 cores on a 2-core machine), `connections`
// closed-loop keep-alive clients (more than the workers, so there is always a queue), each
// failure counted (a connection closed without an answer too). Fronts (bench/lib/fronts.js):
// `pool start` and `pool start --balancer haproxy`, each twice: without warm-up, and with
// `--warmup /?items=20 --warmup-requests N` (the page without the modelled cost: what is warmed
// is the JIT and React), so that what warm-up buys shows in one run; Node's cluster (the cluster
// docs' rolling restart); PM2 cluster mode (`pm2 reload`). Every configuration runs `rounds`
// times, the configurations taking turns; the report shows the median with its 95% interval.
// Traffic stays on 127.0.0.1; every process started here is stopped at the end.

const path = require('node:path')
const { startFront, unavailable } = require('./lib/fronts')
const { closedLoop } = require('./lib/closed-loop')
const { runPart, interleaved, round, log } = require('./lib/part')

const APP = path.join(__dirname, '..', 'examples', 'ssr', 'server.js')
const WARMUP_PATH = '/?items=20'

const defaults = { workers: 8, connections: 12, steady: 3, cost: 20, rounds: 3, warmupRequests: 5, fronts: ['embedded', 'haproxy', 'cluster', 'pm2'] }
const quick = { rounds: 1, steady: 2, warmupRequests: 0 }

const summary = (load) => ({ requests: load.summary.requests, failed: load.summary.failed, failedByKind: load.summary.failedByKind, p50: round(load.summary.p50), p99: round(load.summary.p99) })

async function main (args) {
  const configs = []
  const skipped = []
  for (const kind of args.fronts) {
    if (unavailable(kind)) { skipped.push({ front: kind, reason: unavailable(kind) }); continue }
    const pool = kind === 'embedded' || kind === 'haproxy'
    for (const warmup of pool && args.warmupRequests > 0 ? [0, args.warmupRequests] : [0]) {
      const poolArgs = warmup ? ['--warmup', WARMUP_PATH, '--warmup-requests', String(warmup)] : []
      try {
        configs.push({ front: kind, warmupRequests: pool ? warmup : null, runs: [], handle: await startFront(kind, { workers: args.workers, app: APP, poolArgs }) })
      } catch (err) {
        skipped.push({ front: kind, reason: err.message.split('\n')[0] })
        log(`  ${kind}: not measured: ${err.message.split('\n')[0]}`)
      }
    }
  }
  const query = `items=20&cost=${args.cost}`
  const load = (front, durationS, until) => closedLoop({ url: front.url, connections: args.connections, durationS, timeoutS: 30, query, until })
  for (const c of configs) await load(c.handle, 1) // the JIT and connections, before anything counts
  await interleaved({
    repeats: args.rounds,
    cells: configs,
    label: (c) => `${c.front}${c.warmupRequests ? ', warm-up' : ''}`,
    async run (c) {
      await c.handle.settle()
      const before = (await c.handle.serving()).map((w) => w.pid)
      const steady = summary(await load(c.handle, args.steady))
      let reloaded = false
      const during = load(c.handle, 120, () => reloaded)
      const reload = await c.handle.reload()
      reloaded = true
      const inReload = summary(await during)
      await c.handle.settle()
      const after = (await c.handle.serving()).map((w) => w.pid)
      const run = { steady, during: inReload, reloadMs: reload.ms, reloadCode: reload.code, replaced: after.filter((pid) => !before.includes(pid)).length, workers: args.workers }
      c.runs.push(run)
      log(`  ${c.front.padEnd(8)} warm-up ${c.warmupRequests ?? '–'}: steady p50/p99 ${steady.p50}/${steady.p99} ms, during ${inReload.p50}/${inReload.p99} ms, failed ${inReload.failed} of ${inReload.requests}, reload ${(reload.ms / 1000).toFixed(1)} s, ${run.replaced}/${args.workers} replaced`)
    }
  })
  for (const c of configs) await c.handle.stop()
  return { app: 'examples/ssr/server.js', configs: configs.map(({ handle, ...c }) => c), skipped }
}

runPart('reload', { defaults, quick, main })
