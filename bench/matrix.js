'use strict'

// The matrix SSR operators run: 15 workers, closed-loop load (keep-alive clients that send their
// next request once the last is answered; bench/lib/closed-loop.js says why not autocannon) at
// 5, 13 and 20 concurrent clients (low load, high load, a standing queue of 5), in five situations:
//
//   normal   nothing happens
//   reload   rolling reloads back to back (`pool reload`, one slot at a time) for the whole run
//   kill     one worker SIGKILLed every second (slots in turn, only serving ones)
//   loop     a few requests that never return (the app blocks its event loop for good) mixed
//            in: how long until each is ended, and what the other requests see
//   stop     one worker SIGSTOPped (unresponsive, but its port still accepts connections)
//
// for the embedded balancer (`pool start`), HAProxy mode (`pool start --balancer haproxy`
// driving HAProxy from the generated config), and Node's cluster (round-robin, a primary that
// respawns workers; it has no rolling reload, so `reload` does not apply to it).
//
//   node bench/matrix.js [--quick] [--connections 5,13,20] [--duration 15] [--scenarios ...]
//                        [--fronts embedded,haproxy,cluster] [--timeout 3000] [--results DIR]
//
// Service times are the bench's lognormal (median 30 ms, σ 0.8), modelled with Atomics.wait.
// The pool runs with --timeout and --heartbeat-timeout of `timeout` ms, so that a hung worker is
// ended within a run; clients give up after `clientTimeout` s. One front is started per front
// kind and reused across runs: between runs the bench waits until every worker serves again
// (cluster is restarted after `loop` and `stop`: nothing ever ends its stuck worker).
// Loopback only; every process is stopped at the end and on Ctrl-C.

const fs = require('node:fs')
const os = require('node:os')
const http = require('node:http')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { forkReady, freePorts } = require('./lib/procs')
const { startPoolProcess, BIN } = require('./lib/pool-process')
const { startGeneratedHaproxy, allServersUp, has, HAPROXY } = require('./lib/stack')
const { closedLoop } = require('./lib/closed-loop')
const { runPart, progress, sleep, round, log } = require('./lib/part')

const SCENARIOS = ['normal', 'reload', 'kill', 'loop', 'stop']
const FRONTS = ['embedded', 'haproxy', 'cluster']
const APPLIES = { embedded: SCENARIOS, haproxy: SCENARIOS, cluster: ['normal', 'kill', 'loop', 'stop'] }
const BIN_MS = 500

const defaults = {
  workers: 15,
  connections: [5, 13, 20],
  duration: 15,
  warmup: 1,
  scenarios: SCENARIOS,
  fronts: FRONTS,
  timeout: 3000,
  clientTimeout: 5,
  hangs: 3,
  hangEvery: 4,
  median: 30,
  sigma: 0.8,
  seed: 42
}
const quick = { connections: [20], duration: 5, warmup: 0.5, hangs: 2, hangEvery: 2 }

// ── fronts ───────────────────────────────────────────────────────────────────────────────────

async function startPoolFront (kind, args) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-matrix-'))
  const workerPorts = await freePorts(args.workers)
  const [port, statsPort] = await freePorts(2)
  const common = ['-n', String(args.workers), '--worker-port', String(workerPorts[0]), '--control', path.join(dir, 'control.sock'),
    '--timeout', `${args.timeout}ms`, '--heartbeat-timeout', `${args.timeout}ms`]
  let haproxy = null
  let front
  if (kind === 'haproxy') {
    haproxy = await startGeneratedHaproxy({ workers: args.workers, workerPort: workerPorts[0], port, statsPort, timeout: args.timeout })
    front = ['--balancer', 'haproxy', '--haproxy-socket', haproxy.socket, '--haproxy-backend', 'pool']
  } else {
    front = ['--port', String(port), '--no-access-log']
  }
  const pool = startPoolProcess([...common, ...front])
  await pool.started
  const f = {
    kind,
    url: `http://127.0.0.1:${port}`,
    control: path.join(dir, 'control.sock'),
    pool,
    haproxy,
    // [{ slot, pid }] of the workers serving now.
    serving: () => Object.entries(pool.pids).filter(([, pid]) => pool.ready.has(pid)).map(([slot, pid]) => ({ slot: Number(slot), pid })),
    async settle () {
      const deadline = Date.now() + 30000
      while (f.serving().length < args.workers && Date.now() < deadline) await sleep(100)
      if (haproxy) await allServersUp(haproxy.client, { timeout: 10000 }).catch(() => {})
      return f.serving().length === args.workers
    },
    async stop () {
      await pool.stop({ grace: 5000 })
      if (haproxy) { haproxy.child.kill('SIGKILL'); await haproxy.child.exited }
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  if (haproxy) await allServersUp(haproxy.client)
  return f
}

async function startClusterFront (args) {
  const [port] = await freePorts(1)
  const child = await forkReady('cluster-managed.js', { PORT: String(port), WORKERS: String(args.workers) }, { timeout: 60000 })
  // The live workers' pids, or [] if the primary does not answer within a second.
  const pids = () => new Promise((resolve) => {
    const timer = setTimeout(() => { child.removeListener('message', onMessage); resolve([]) }, 1000)
    const onMessage = (m) => { if (m && m.pids) { clearTimeout(timer); child.removeListener('message', onMessage); resolve(m.pids) } }
    child.on('message', onMessage)
    if (child.connected) child.send('pids')
  })
  const f = {
    kind: 'cluster',
    url: `http://127.0.0.1:${port}`,
    child,
    pids,
    serving: async () => (await pids()).map((pid, i) => ({ slot: i + 1, pid })),
    async settle () {
      const deadline = Date.now() + 30000
      while ((await pids()).length < args.workers && Date.now() < deadline) await sleep(100)
      return true
    },
    // Disconnecting makes the primary SIGKILL its workers (stopped ones too) and exit.
    async stop () {
      const all = await pids()
      if (child.connected) child.disconnect()
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000)
      await child.exited
      clearTimeout(timer)
      for (const pid of all) { try { process.kill(pid, 'SIGKILL') } catch {} }
    }
  }
  return f
}

const startFront = (kind, args) => (kind === 'cluster' ? startClusterFront(args) : startPoolFront(kind, args))

// ── what happens during a run ───────────────────────────────────────────────────────────────

// Each driver starts with the load and returns { stop(): Promise<data> }.
const DRIVERS = {
  normal: () => ({ stop: async () => ({}) }),

  // `pool reload` again and again, each waiting for the reload to finish, until the load ends.
  reload (front) {
    const state = { stopped: false }
    const reloads = []
    const loop = (async () => {
      while (!state.stopped) {
        const started = performance.now()
        const code = await new Promise((resolve) => {
          execFile(process.execPath, [BIN, 'reload', '--control', front.control, '--timeout', '60s'], { timeout: 70000 }, (err) => resolve(err ? err.code ?? 1 : 0))
        })
        reloads.push({ ms: round(performance.now() - started, 0), code })
      }
    })()
    // The reload under way when the load ends is waited for (`pool reload` is bounded itself).
    return { stop: async () => { state.stopped = true; await loop; return { reloads } } }
  },

  // SIGKILL one serving worker every second, slots in turn.
  kill (front, args, t0) {
    const state = { stopped: false }
    const kills = []
    let next = 0
    const loop = (async () => {
      while (!state.stopped) {
        await sleep(1000)
        if (state.stopped) break
        const serving = await front.serving()
        if (serving.length === 0) continue
        // The next slot in turn that is serving now.
        const sorted = serving.sort((a, b) => a.slot - b.slot)
        const victim = sorted.find((w) => w.slot > next) || sorted[0]
        next = victim.slot % args.workers
        try { process.kill(victim.pid, 'SIGKILL'); kills.push({ at: round(performance.now() - t0, 0), slot: victim.slot }) } catch {}
      }
    })()
    return { stop: async () => { state.stopped = true; await loop; return { kills } } }
  },

  // A request that never returns, every `hangEvery` s from 1 s on; each one's outcome is timed.
  loop (front, args, t0) {
    const hangs = []
    const pending = []
    const timers = []
    for (let i = 0; i < args.hangs; i++) {
      // Long enough for the pool to end it twice (a GET may be retried once on another worker).
      const giveUpMs = 2 * args.timeout + 3000
      timers.push(setTimeout(() => pending.push(hangRequest(front.url, giveUpMs).then((r) => hangs.push({ sentAt: round(r.sentAt - t0, 0), ms: round(r.ms, 0), outcome: r.outcome }))), 1000 + i * args.hangEvery * 1000))
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

  // SIGSTOP the first worker (the busiest under `balance first`) 1 s in; see when it is ended.
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
        return { stopped: { slot: victim.slot, at: round(victim.at - t0, 0), endedAfterMs: exit ? round(exit.at - victim.at, 0) : null, reason: hung?.reason ?? null } }
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

// ── one run ─────────────────────────────────────────────────────────────────────────────────

function timeline (load) {
  const bins = []
  const at = (t) => {
    const i = Math.floor(t / BIN_MS)
    while (bins.length <= i) bins.push({ t: bins.length * BIN_MS / 1000, ok: 0, failed: 0 })
    return bins[i]
  }
  for (const r of load.responses) at(r.end)[r.status >= 200 && r.status < 300 ? 'ok' : 'failed']++
  for (const f of load.failures) at(f.end).failed++
  return bins
}

async function run (front, scenario, connections, args) {
  const service = { median: args.median, sigma: args.sigma, seed: args.seed }
  await closedLoop({ url: front.url, connections, durationS: args.warmup, timeoutS: args.clientTimeout, service: { ...service, seed: 7 } })
  const eventsBefore = front.pool ? front.pool.events.length : 0
  const t0 = performance.now()
  const driver = DRIVERS[scenario](front, args, t0)
  const load = await closedLoop({ url: front.url, connections, durationS: args.duration, timeoutS: args.clientTimeout, service })
  const data = await driver.stop()
  const hung = front.pool ? front.pool.events.slice(eventsBefore).filter((e) => e.event === 'hung').map((e) => ({ at: round(e.at - t0, 0), reason: e.reason, ms: e.ms })) : []
  const s = load.summary
  return {
    front: front.kind,
    scenario,
    connections,
    ...Object.fromEntries(Object.entries(s).map(([k, v]) => [k, typeof v === 'number' ? round(v) : v])),
    hungKills: hung,
    ...data,
    timeline: timeline(load)
  }
}

function describe (r) {
  const extra = r.kills ? `, ${r.kills.length} kills` : r.reloads ? `, ${r.reloads.length} reloads` : r.hangs ? `, hangs ended after ${r.hangs.map((h) => `${(h.ms / 1000).toFixed(1)} s (${h.outcome})`).join(', ')}` : r.stopped ? `, stopped worker ended after ${r.stopped.endedAfterMs === null ? 'never' : `${(r.stopped.endedAfterMs / 1000).toFixed(1)} s`}` : ''
  return `  ${r.front.padEnd(8)} ${r.scenario.padEnd(6)} c=${String(r.connections).padStart(2)}  ${String(Math.round(r.rps)).padStart(4)} req/s  p50 ${Math.round(r.p50)} ms  p99 ${Math.round(r.p99)} ms  failed ${r.failed}${extra}`
}

async function main (args) {
  for (const f of args.fronts) if (!FRONTS.includes(f)) throw new Error(`unknown front ${f}`)
  for (const s of args.scenarios) if (!SCENARIOS.includes(s)) throw new Error(`unknown scenario ${s}`)
  const fronts = args.fronts.filter((f) => f !== 'haproxy' || has(HAPROXY))
  const plan = fronts.flatMap((f) => args.scenarios.filter((s) => APPLIES[f].includes(s)).flatMap((s) => args.connections.map((c) => ({ f, s, c }))))
  const rows = []
  const skipped = []
  if (!fronts.includes('haproxy') && args.fronts.includes('haproxy')) skipped.push({ front: 'haproxy', reason: `${HAPROXY} not found` })
  let done = 0
  progress(0, plan.length, 'starting')
  for (const kind of fronts) {
    let front = null
    try {
      for (const step of plan.filter((p) => p.f === kind)) {
        progress(done, plan.length, `${kind} ${step.s} c=${step.c}`)
        if (!front) front = await startFront(kind, args)
        else await front.settle()
        const row = await run(front, step.s, step.c, args)
        rows.push(row)
        log(describe(row))
        done++
        // Nothing ends cluster's stuck worker; start afresh rather than measure it again.
        if (kind === 'cluster' && (step.s === 'loop' || step.s === 'stop')) { await front.stop(); front = null }
      }
    } catch (err) {
      skipped.push({ front: kind, reason: err.message.split('\n')[0] })
      log(`  ${kind}: failed: ${err.message}`)
    } finally {
      if (front) await front.stop()
    }
  }
  progress(plan.length, plan.length, 'done')
  return { scenarios: args.scenarios, applies: APPLIES, rows, skipped, binMs: BIN_MS }
}

runPart('matrix', { defaults, quick, main })
