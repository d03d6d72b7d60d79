'use strict'

// The soak: a pool under steady load while a worker is SIGKILLed from outside every few seconds
// (what the kernel's OOM killer or an operator does) and a rolling reload is asked every half
// minute. What it shows: the requests that failed, the pool's capacity (ready workers) over time,
// and how many of the reloads asked were answered, and run.
//
//   node bench/soak.js [--quick] [--duration 300] [--workers 4] [--rho 0.6] [--median 20]
//                      [--sigma 0.5] [--kill-every 2] [--reload-every 30] [--deadline 10000]
//                      [--seed 7] [--baseline FILE|none] [--results DIR]
//
// `pool start bench/lib/pool-app.js -n WORKERS` (the embedded balancer, its defaults, the access
// log read as it is written), open-loop
// Poisson arrivals at `rho` of the workers' capacity on a new connection each (lognormal renders,
// Atomics.wait), clients that give up after `deadline` ms. From 2 s on, every `kill-every` s a
// ready worker picked at random gets SIGKILL; every `reload-every` s, `pool reload` is run on the
// pool's control socket, whether or not the last one has answered.
//   failed     requests not answered 200: 503s, connections closed, clients that gave up
//   capacity   ready workers (the pool's log: `ready` adds one, `draining` and `exit` take it
//              away), sampled every 100 ms
//   reloads    asked: `pool reload` commands run; answered: those that exited 0; run: reloads
//              the pool carried out (its `reloaded` and `reload-failed` lines)
//   backoff    the respawn delays the pool scheduled (`respawn-scheduled`), their largest
//   why        the pool's reason for each request it did not answer 200 (its access log)
// --baseline FILE: an earlier result of this part (the code before a change, run from a checkout
// of it), copied into this one as `baseline` so that both sit side by side in the report; by
// default the one kept in bench/baselines/ for a run of this length (soak-before.json, or
// soak-before-quick.json with --quick), made on commit 4a46d81; `none`: without.
// Loopback only; every process is stopped at the end and on Ctrl-C.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { forkReady, freePorts, ask, sleep } = require('./lib/procs')
const { startPoolProcess, BIN, ROOT } = require('./lib/pool-process')
const { makeSchedule, rng } = require('./lib/schedule')
const { percentile } = require('./lib/stats')
const { runPart, progress, round, log } = require('./lib/part')

const BIN_S = 1 // the timeline's resolution
const SAMPLE_MS = 100 // how often capacity is sampled
const FIRST_KILL_MS = 2000

const defaults = { duration: 300, workers: 4, rho: 0.6, median: 20, sigma: 0.5, cap: 500, 'kill-every': 2, 'reload-every': 30, deadline: 10000, seed: 7, baseline: '' }
const quick = { duration: 75 }

// What the pool's log says, as it is read: ready workers (by pid), reloads run, respawn delays.
function watchLog () {
  const seen = { ready: new Set(), reloadsRun: 0, reloadsFailed: 0, respawnDelays: [], why: {} }
  const onLine = (line) => {
    switch (line.event) {
      case 'ready': return seen.ready.add(line.pid)
      case 'draining': case 'exit': return seen.ready.delete(line.pid)
      case 'reloaded': return seen.reloadsRun++
      case 'reload-failed': seen.reloadsFailed++; return seen.reloadsRun++
      case 'respawn-scheduled': return seen.respawnDelays.push(line.delay)
      case 'request': if (line.status !== 200) seen.why[line.reason ?? line.status] = (seen.why[line.reason ?? line.status] ?? 0) + 1
    }
  }
  return { seen, onLine }
}

// `pool reload` as an operator runs it; resolves { askedS, answeredS, code, said }.
function askReload (control, t0) {
  const askedS = (performance.now() - t0) / 1000
  const child = spawn(process.execPath, [BIN, 'reload', '--control', control, '--wait', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let said = ''
  child.stdout.on('data', (d) => { said += d })
  child.stderr.on('data', (d) => { said += d })
  return new Promise((resolve) => child.on('exit', (code) => resolve({ askedS: round(askedS, 2), answeredS: round((performance.now() - t0) / 1000, 2), code, said: said.trim().split('\n')[0].slice(0, 200) })))
}

async function soak (args) {
  const [port, workerPort] = [(await freePorts(1))[0], (await freePorts(args.workers))[0]]
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-soak-'))
  const control = path.join(dir, 'control.sock')
  const { seen, onLine } = watchLog()
  const pool = startPoolProcess(['-n', String(args.workers), '--port', String(port), '--worker-port', String(workerPort), '--control', control], { onLine })
  const load = await forkReady('load.js', {})
  try {
    await pool.started
    const url = `http://127.0.0.1:${port}`
    await ask(load, { cmd: 'idle', url, probes: args.workers }) // warm, and every worker answering
    const durationMs = args.duration * 1000
    const schedule = makeSchedule({ rho: args.rho, workers: args.workers, durationMs, median: args.median, sigma: args.sigma, capMs: args.cap, seed: args.seed })
    const t0 = performance.now()
    const elapsed = () => performance.now() - t0
    const running = ask(load, { cmd: 'run', url, at: schedule.at, ms: schedule.ms, deadlineMs: args.deadline })
    let loadDone = false
    running.then(() => { loadDone = true })

    const capacity = [] // { t, ready }
    const sampler = setInterval(() => capacity.push({ t: elapsed() / 1000, ready: seen.ready.size }), SAMPLE_MS)
    const kills = []
    const reloads = []
    const pick = rng(args.seed)
    const killer = (async () => {
      await sleep(FIRST_KILL_MS)
      while (!loadDone && elapsed() < durationMs) {
        const ready = [...seen.ready]
        if (ready.length > 0) {
          const pid = ready[Math.floor(pick() * ready.length)]
          try { process.kill(pid, 'SIGKILL'); kills.push(round(elapsed() / 1000, 2)) } catch {}
        }
        await sleep(args['kill-every'] * 1000)
      }
    })()
    const reloader = (async () => {
      for (let at = args['reload-every'] * 1000; at < durationMs; at += args['reload-every'] * 1000) {
        await sleep(at - elapsed())
        if (loadDone) break
        progress(Math.floor(at / 1000), args.duration, `${reloads.length + 1} reloads asked`)
        reloads.push(askReload(control, t0))
      }
    })()
    const result = await running
    await killer
    await reloader
    clearInterval(sampler)
    // Reloads still running are waited for, a while: one that never answers counts as not answered.
    const answers = await Promise.all(reloads.map((r) => Promise.race([r, sleep(60000).then(() => null)])))
    return summarize({ args, schedule, result, capacity, kills, answers, seen })
  } finally {
    await pool.stop({ grace: 10000 })
    load.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function summarize ({ args, schedule, result, capacity, kills, answers, seen }) {
  const n = schedule.at.length
  const bins = Array.from({ length: Math.ceil(args.duration / BIN_S) }, (_, i) => ({ t: i * BIN_S, ok: 0, failed: 0, readyMin: null, readyMean: null }))
  const binOf = (ms) => bins[Math.min(bins.length - 1, Math.floor(ms / 1000 / BIN_S))]
  const failedByStatus = {}
  let ok = 0
  for (let i = 0; i < n; i++) {
    const status = result.status[i]
    const b = binOf(result.sent[i] + result.latency[i])
    if (status === 200) { ok++; b.ok++; continue }
    b.failed++
    const kind = status === 0 ? 'gave up' : status === -1 ? 'closed or refused' : String(status)
    failedByStatus[kind] = (failedByStatus[kind] ?? 0) + 1
  }
  for (const b of bins) {
    const inBin = capacity.filter((c) => c.t >= b.t && c.t < b.t + BIN_S).map((c) => c.ready)
    if (inBin.length === 0) continue
    b.readyMin = Math.min(...inBin)
    b.readyMean = round(inBin.reduce((a, x) => a + x, 0) / inBin.length, 2)
  }
  const readies = capacity.map((c) => c.ready)
  const answered = answers.filter((a) => a && a.code === 0)
  const latency = []
  for (let i = 0; i < n; i++) if (result.status[i] === 200) latency.push(result.latency[i])
  return {
    requests: n,
    ok,
    failed: n - ok,
    failedShare: round((n - ok) / n, 5),
    failedByStatus,
    failedWhy: seen.why,
    p50: round(percentile(latency, 50)),
    p99: round(percentile(latency, 99)),
    lag: result.lag,
    kills,
    capacity: {
      target: args.workers,
      mean: round(readies.reduce((a, x) => a + x, 0) / readies.length, 2),
      min: Math.min(...readies),
      // the share of the samples with at most one worker short of the target
      withinOne: round(readies.filter((x) => x >= args.workers - 1).length / readies.length, 4),
      samples: readies.length
    },
    reloads: {
      asked: answers.length,
      answered: answered.length,
      run: seen.reloadsRun,
      failedRun: seen.reloadsFailed,
      each: answers.map((a) => a ?? { code: null, said: 'no answer within 60 s of the end' })
    },
    backoff: {
      respawns: seen.respawnDelays.length,
      maxDelayMs: seen.respawnDelays.length ? Math.max(...seen.respawnDelays) : null,
      p90DelayMs: round(percentile(seen.respawnDelays, 90)),
      atCap: seen.respawnDelays.filter((d) => d >= 15000).length
    },
    bins
  }
}

async function main (args) {
  const kept = `bench/baselines/soak-before${args.quick ? '-quick' : ''}.json`
  const file = args.baseline === 'none' ? null : path.resolve(ROOT, args.baseline || kept)
  const baseline = file && fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : null
  progress(0, args.duration, 'starting')
  const run = await soak(args)
  progress(args.duration, args.duration, 'done')
  const c = run.capacity
  log(`  ${run.kills.length} kills, ${run.reloads.asked} reloads asked: ${run.failed} of ${run.requests} requests failed ${JSON.stringify(run.failedByStatus)}; ready workers mean ${c.mean} min ${c.min} (target ${c.target}), within one of it ${(c.withinOne * 100).toFixed(1)}% of the time; reloads answered ${run.reloads.answered}, run ${run.reloads.run}; largest respawn delay ${run.backoff.maxDelayMs} ms (${run.backoff.atCap} at the 15 s cap)`)
  return {
    sampleMs: SAMPLE_MS,
    binS: BIN_S,
    run,
    baseline: baseline ? { command: baseline.command, startedAt: baseline.startedAt, source: baseline.source, machine: baseline.machine, config: baseline.config, run: baseline.run } : null
  }
}

runPart('soak', { defaults, quick, main })
