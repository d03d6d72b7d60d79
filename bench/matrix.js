'use strict'

// The matrix SSR operators run before trusting a front, the way the seed article ran it and a
// second way: 15 workers, closed-loop clients at 5, 13 and 20 concurrent clients (low load, high
// load, a standing queue of 5), in two views:
//
//   ab           a new connection per request, as `ab -c N -n 10000` (no -k): the front deals
//                each request to a worker
//   keep-alive   each client keeps its connection: under cluster and PM2 a connection stays
//                with the worker that accepted it, so each client is pinned to one worker
//
// and in these situations:
//
//   normal   nothing happens; `requests` per cell as the seed did (10,000 for ab)
//   reload   rolling reloads back to back for the whole run (`pool reload`, `pm2 reload`, the
//            cluster docs' rolling restart)
//   kill     a serving worker SIGKILLed at random times (a Poisson process, 1 per second on
//            average; the victim drawn at random too)
//   loop     a few requests that never return (the app blocks its event loop for good) mixed
//            in: how long until each is ended, and what the other requests see
//   stop     one worker SIGSTOPped (unresponsive, but its port still accepts connections)
//
// and open-loop runs of `kill` and `reload`: Poisson arrivals at ρ `openRho` (a new connection
// per request, sent on schedule whatever happens to the earlier ones, by bench/lib/load.js in a
// process of its own), so that failures count per request offered, not per request a stalled
// client got round to sending.
//
// Fronts (bench/lib/fronts.js): the embedded balancer (`pool start`), HAProxy mode, Node's
// cluster, PM2 cluster mode. Every cell runs `repeats` times (kill and reload: `incidentRepeats`),
// the cells taking turns, so that a change in the machine's load falls on every front alike;
// the report shows the median of the runs with a bootstrap 95% interval.
//
//   node bench/matrix.js [--quick] [--connections 5,13,20] [--views ab,keep-alive]
//                        [--fronts embedded,haproxy,cluster,pm2] [--results DIR] ...
//
// Service times are the bench's lognormal (median 30 ms, σ 0.8), modelled with Atomics.wait.
// The pool runs with --timeout and --heartbeat-timeout of `timeout` ms, so that a hung worker is
// ended within a run; clients give up after `clientTimeout` s. Loopback only; every process is
// stopped at the end and on Ctrl-C.

const http = require('node:http')
const { forkReady, ask } = require('./lib/procs')
const { startFront, unavailable, KINDS } = require('./lib/fronts')
const { closedLoop } = require('./lib/closed-loop')
const { makeSchedule, rng } = require('./lib/schedule')
const { percentile } = require('./lib/stats')
const { runPart, interleaved, progress, sleep, round, log } = require('./lib/part')

const VIEWS = ['ab', 'keep-alive']
const CLOSED = ['normal', 'reload', 'kill']
const STUCK = ['loop', 'stop']
const OPEN = ['kill', 'reload']

const defaults = {
  workers: 15,
  connections: [5, 13, 20],
  views: VIEWS,
  fronts: KINDS,
  repeats: 5,
  abRequests: 10000, // per cell, all runs together: the seed's `ab -n 10000`
  keepAliveRequests: 1000,
  incidentRepeats: 3,
  incidentSeconds: 2,
  stuckConnections: 13,
  stuckSeconds: 5,
  openRho: 0.7,
  openRepeats: 3,
  openSeconds: 4,
  timeout: 3000,
  clientTimeout: 5,
  hangs: 2,
  median: 30,
  sigma: 0.8,
  seed: 42
}
const quick = { connections: [13], repeats: 2, abRequests: 600, keepAliveRequests: 600, incidentRepeats: 1, incidentSeconds: 2, stuckSeconds: 5, openRepeats: 1, openSeconds: 3 }

// ── what happens during a run ────────────────────────────────────────────────────────────────

// Each driver starts with the load and returns { stop(): Promise<data> }.
const DRIVERS = {
  normal: () => ({ stop: async () => ({}) }),

  // Rolling reloads back to back until the load ends; the one under way then is waited for.
  reload (front) {
    const state = { stopped: false }
    const reloads = []
    const loop = (async () => {
      while (!state.stopped) reloads.push(await front.reload())
    })()
    return { stop: async () => { state.stopped = true; await loop; return { reloads } } }
  },

  // SIGKILL a serving worker at random times (exponential gaps, mean 1 s), drawn at random.
  kill (front, args, t0, seed) {
    const rand = rng(seed)
    const state = { stopped: false }
    const kills = []
    const loop = (async () => {
      for (;;) {
        await sleep(-Math.log(1 - rand()) * 1000)
        if (state.stopped) break
        const serving = await front.serving()
        if (!serving.length) continue
        const victim = serving[Math.floor(rand() * serving.length)]
        try { process.kill(victim.pid, 'SIGKILL'); kills.push({ at: round(performance.now() - t0, 0), slot: victim.slot }) } catch {}
      }
    })()
    return { stop: async () => { state.stopped = true; await loop; return { kills } } }
  },

  // A request that never returns, every second from 1 s on; each one's outcome is timed.
  loop (front, args, t0) {
    const hangs = []
    const pending = []
    const timers = []
    for (let i = 0; i < args.hangs; i++) {
      // Long enough for the pool to end it twice (a GET may be retried once on another worker).
      const giveUpMs = 2 * args.timeout + 2000
      timers.push(setTimeout(() => pending.push(hangRequest(front.url, giveUpMs).then((r) => hangs.push({ sentAt: round(r.sentAt - t0, 0), ms: round(r.ms, 0), outcome: r.outcome, giveUpMs }))), 1000 + i * 1000))
    }
    return {
      async stop () {
        for (const t of timers) clearTimeout(t)
        await Promise.all(pending)
        hangs.sort((a, b) => a.sentAt - b.sentAt)
        return { hangs }
      }
    }
  },

  // SIGSTOP the lowest serving slot 1 s in; see when (if ever) the front ends it.
  stop (front, args, t0) {
    let victim = null
    const timer = setTimeout(async () => {
      const serving = (await front.serving()).sort((a, b) => a.slot - b.slot)
      if (!serving.length) return
      victim = { ...serving[0], at: performance.now() }
      try { process.kill(victim.pid, 'SIGSTOP') } catch {}
    }, 1000)
    return {
      async stop () {
        clearTimeout(timer)
        if (!victim) return { stopped: null }
        const exit = front.pool?.events.find((e) => e.event === 'exit' && e.pid === victim.pid)
        const hung = front.pool?.events.find((e) => e.event === 'hung' && e.pid === victim.pid)
        // Never leave a stopped process behind: it would not even die with its parent.
        if (!exit) { try { process.kill(victim.pid, 'SIGKILL') } catch {} }
        return { stopped: { slot: victim.slot, at: round(victim.at - t0, 0), endedAfterMs: exit ? round(exit.at - victim.at, 0) : null, observedMs: round(performance.now() - victim.at, 0), reason: hung?.reason ?? null } }
      }
    }
  }
}

function hangRequest (url, giveUpMs) {
  const sentAt = performance.now()
  return new Promise((resolve) => {
    const done = (outcome) => { clearTimeout(timer); req.destroy(); resolve({ sentAt, ms: performance.now() - sentAt, outcome }) }
    const req = http.get(`${url}/?hang=1`, { agent: false }, (res) => { res.resume(); res.on('end', () => done(`${res.statusCode}`)); res.on('error', () => done('cut')) })
    req.on('error', (err) => done(err.code === 'ECONNRESET' || /hang up/.test(err.message) ? 'closed' : err.code || err.message))
    const timer = setTimeout(() => done('no answer'), giveUpMs)
  })
}

// ── runs ─────────────────────────────────────────────────────────────────────────────────────

const service = (args, seed) => ({ median: args.median, sigma: args.sigma, seed })
const numbers = (s) => Object.fromEntries(Object.entries(s).map(([k, v]) => [k, typeof v === 'number' ? round(v) : v]))

// One closed-loop run: `requests` (normal) or `seconds` (incidents) of load with the scenario's
// driver running alongside. Returns the run's summary and what the driver did.
async function closedRun (front, { view, scenario, connections, requests, seconds, seed }, args) {
  const eventsBefore = front.pool ? front.pool.events.length : 0
  const t0 = performance.now()
  const driver = DRIVERS[scenario](front, args, t0, seed)
  const load = await closedLoop({
    url: front.url,
    connections,
    keepAlive: view === 'keep-alive',
    requests: requests ?? Infinity,
    durationS: seconds ?? 600,
    timeoutS: args.clientTimeout,
    service: service(args, seed)
  })
  const data = await driver.stop()
  const hungKills = front.pool ? front.pool.events.slice(eventsBefore).filter((e) => e.event === 'hung').map((e) => ({ at: round(e.at - t0, 0), reason: e.reason, ms: e.ms })) : []
  return { ...numbers(load.summary), elapsedS: round(load.elapsedS), timedOut: load.summary.failedByKind.timeout ?? 0, hungKills, ...data }
}

// One open-loop run: Poisson arrivals at ρ of the workers for `seconds`, the scenario's driver
// alongside; every request offered counts, answered or not.
async function openRun (front, load, { scenario, seed }, args) {
  const schedule = makeSchedule({ rho: args.openRho, workers: args.workers, durationMs: args.openSeconds * 1000, median: args.median, sigma: args.sigma, capMs: 2000, seed })
  const t0 = performance.now()
  const driver = DRIVERS[scenario](front, args, t0, seed)
  const r = await ask(load, { cmd: 'run', url: front.url, at: schedule.at, ms: schedule.ms, deadlineMs: args.clientTimeout * 1000 })
  const data = await driver.stop()
  const byKind = {}
  for (const s of r.status) if (s !== 200) { const k = s === 0 ? 'timeout' : s === -1 ? 'closed or refused' : String(s); byKind[k] = (byKind[k] || 0) + 1 }
  const answered = r.latency.filter((_, i) => r.status[i] === 200)
  return {
    offered: r.status.length,
    ok: answered.length,
    failed: r.status.length - answered.length,
    failedByKind: byKind,
    p50: round(percentile(answered, 50)),
    p99: round(percentile(answered, 99)),
    lag: r.lag,
    ...data
  }
}

function describe (cell, run) {
  const extra = run.kills ? `, ${run.kills.length} kills` : run.reloads ? `, ${run.reloads.length} reloads` : ''
  const lat = `p50 ${Math.round(run.p50)} ms  p99 ${Math.round(run.p99)} ms`
  if (cell.open) return `  open ${cell.scenario.padEnd(6)} ${cell.front.padEnd(8)} ${run.failed}/${run.offered} failed  ${lat}  send lag p99 ${run.lag?.p99} ms${extra}`
  return `  ${cell.view.padEnd(10)} ${cell.scenario.padEnd(6)} ${cell.front.padEnd(8)} c=${String(cell.connections).padStart(2)}  ${String(Math.round(run.rps)).padStart(4)} req/s  ${lat}  failed ${run.failed}/${run.requests}${extra}`
}

function stuckNote (r) {
  if (r.hangs) return `, hangs ended after ${r.hangs.map((h) => `${(h.ms / 1000).toFixed(1)} s (${h.outcome})`).join(', ')}`
  if (r.stopped) return `, stopped worker ended after ${r.stopped.endedAfterMs === null ? 'never' : `${(r.stopped.endedAfterMs / 1000).toFixed(1)} s`}`
  return ''
}

async function main (args) {
  for (const f of args.fronts) if (!KINDS.includes(f)) throw new Error(`unknown front ${f} (one of ${KINDS.join(', ')})`)
  for (const v of args.views) if (!VIEWS.includes(v)) throw new Error(`unknown view ${v} (one of ${VIEWS.join(', ')})`)
  const skipped = args.fronts.filter((f) => unavailable(f)).map((f) => ({ front: f, reason: unavailable(f) }))
  const kinds = args.fronts.filter((f) => !unavailable(f))
  const fronts = {}
  const start = async (kind) => { fronts[kind] = await startFront(kind, { workers: args.workers, timeout: args.timeout }) }
  for (const kind of kinds) {
    try {
      await start(kind)
      // Warm the JIT on both sides, and the connections, before anything counts.
      await closedLoop({ url: fronts[kind].url, connections: 13, durationS: 1, timeoutS: args.clientTimeout, service: service(args, 7) })
    } catch (err) {
      skipped.push({ front: kind, reason: err.message.split('\n')[0] })
      log(`  ${kind}: failed to start: ${err.message}`)
    }
  }
  const live = kinds.filter((k) => fronts[k])

  // 1. Closed loop: every (view, situation, clients, front) cell, the cells taking turns.
  const cells = []
  for (const view of args.views) {
    for (const scenario of CLOSED) {
      for (const connections of args.connections) {
        for (const front of live) cells.push({ view, scenario, connections, front, runs: [] })
      }
    }
  }
  const perRun = (cell) => Math.round((cell.view === 'ab' ? args.abRequests : args.keepAliveRequests) / args.repeats)
  const byRepeat = Math.max(args.repeats, args.incidentRepeats)
  let seq = 0
  await interleaved({
    repeats: byRepeat,
    cells,
    label: (c) => `${c.view} ${c.scenario} ${c.front} c=${c.connections}`,
    async run (cell, r) {
      if (r >= (cell.scenario === 'normal' ? args.repeats : args.incidentRepeats)) return
      const front = fronts[cell.front]
      await front.settle()
      const spec = cell.scenario === 'normal' ? { requests: perRun(cell) } : { seconds: args.incidentSeconds }
      const run = await closedRun(front, { ...cell, ...spec, seed: args.seed + 1000 * r + (seq++ % 1000) }, args)
      cell.runs.push(run)
      log(describe(cell, run))
      await sleep(100)
    }
  })

  // 2. Open loop: kills and reloads under Poisson arrivals, failures per request offered.
  const load = await forkReady('load.js', {})
  const open = []
  for (const scenario of OPEN) for (const front of live) open.push({ open: true, scenario, front, rho: args.openRho, runs: [] })
  await interleaved({
    repeats: args.openRepeats,
    cells: open,
    label: (c) => `open loop ${c.scenario} ${c.front}`,
    async run (cell, r) {
      const front = fronts[cell.front]
      await front.settle()
      const run = await openRun(front, load, { scenario: cell.scenario, seed: args.seed + 7 * r + (cell.scenario === 'kill' ? 0 : 3) }, args)
      cell.runs.push(run)
      log(describe(cell, run))
      await sleep(300)
    }
  })

  // 3. Workers that hang or stop: once per front, view and situation, at one concurrency. Last:
  // cluster and PM2 never end a stuck worker, so they are started afresh after each.
  const stuck = []
  const stuckCells = args.views.flatMap((view) => STUCK.flatMap((scenario) => live.map((front) => ({ view, scenario, front, connections: args.stuckConnections }))))
  for (const [i, cell] of stuckCells.entries()) {
    progress(i, stuckCells.length, `${cell.view} ${cell.scenario} ${cell.front}`)
    try {
      if (!fronts[cell.front]) await start(cell.front)
      await fronts[cell.front].settle()
      const run = await closedRun(fronts[cell.front], { ...cell, seconds: args.stuckSeconds, seed: args.seed }, args)
      stuck.push({ ...cell, ...run })
      log(`  ${cell.view.padEnd(10)} ${cell.scenario.padEnd(6)} ${cell.front.padEnd(8)} c=${cell.connections}  p99 ${Math.round(run.p99)} ms  failed ${run.failed}/${run.requests}${stuckNote(run)}`)
    } catch (err) {
      log(`  ${cell.view} ${cell.scenario} ${cell.front}: failed: ${err.message}`)
    }
    if (cell.front === 'cluster' || cell.front === 'pm2') { await fronts[cell.front]?.stop(); fronts[cell.front] = null }
  }
  for (const f of Object.values(fronts)) if (f) await f.stop()
  return { views: args.views, closed: cells, open, stuck, skipped }
}

runPart('matrix', { defaults, quick, main })
