'use strict'

// Rolling reload under load, for each front: failed requests, and latency during the reload
// against steady state measured just before it, in the same run.
//
//   node bench/reload.js [--workers 8] [--connections 12] [--steady 5] [--cost 20] [--fronts embedded,haproxy]
//                        [--warmup-requests 5] [--rounds 3]
//
// Each front runs twice, side by side: without warm-up, and with `--warmup /?items=20` and
// `--warmup-requests N` (the SSR page, no modelled cost: what is warmed is the JIT and React),
// so that what warm-up buys shows in one run. `--warmup-requests 0` runs only without. Each
// configuration runs `rounds` times, the configurations taking turns, so that a change in the
// machine's background load falls on each alike; the table gives every round's p99 ratio and
// their median.
// The app is the SSR demo (examples/ssr) rendering a 20-item page plus `cost` ms of modelled
// CPU time (Atomics.wait, so 8 workers behave like 8 cores on a 2-core machine). autocannon
// keeps `connections` requests in flight (more than the workers, so there is always a queue).
// Traffic stays on 127.0.0.1; every process started here is stopped at the end.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const autocannon = require('autocannon')
const pino = require('pino')
const { Pool } = require('..')
const { createBalancer } = require('../lib/balancer')
const { freePorts } = require('../test/helpers')
const { startHaproxy } = require('../test/helpers/haproxy')

const APP = path.join(__dirname, '..', 'examples', 'ssr', 'server.js')
const silent = pino({ level: 'silent' })

function parseArgs (argv) {
  const args = { workers: 8, connections: 12, steady: 5, cost: 20, fronts: ['embedded', 'haproxy'], 'warmup-requests': 5, rounds: 3 }
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '')
    args[key] = key === 'fronts' ? argv[i + 1].split(',') : Number(argv[i + 1])
  }
  return args
}

function load (url, connections, durationSec) {
  let instance
  const done = new Promise((resolve, reject) => {
    instance = autocannon({ url, connections, duration: durationSec, timeout: 30 }, (err, result) => err ? reject(err) : resolve(result))
  })
  return { done, stop: () => instance.stop() }
}

function summary (result) {
  return {
    requests: result.requests.total,
    failed: result.errors + result.timeouts + result.non2xx,
    p50: result.latency.p50,
    p99: result.latency.p99
  }
}

async function embeddedFront (ports) {
  return { front: createBalancer({ port: ports.front }, { logger: silent }), url: `http://127.0.0.1:${ports.front}`, stop: async () => {} }
}

async function haproxyFront (ports, workers) {
  const { haproxyConfig } = require('../lib/config/haproxy')
  const { createHaproxyFront } = require('../lib/haproxy/front')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-haproxy-'))
  const cfg = haproxyConfig({ workers, workerPort: ports.worker, port: ports.front, statsPort: ports.stats, prefix: dir, log: 'none' })
  const haproxy = await startHaproxy({ cfg, dir })
  const socket = haproxy.socket
  const front = createHaproxyFront({ haproxySocket: socket, haproxyBackend: 'pool', workers }, { logger: silent })
  const stop = async () => {
    await haproxy.stop()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  return { front, url: `http://127.0.0.1:${ports.front}`, stop }
}

const WARMUP_PATH = '/?items=20'

async function runFront (name, args, warmupRequests) {
  const [front, stats, worker] = await freePorts(args.workers + 3).then((p) => [p[0], p[1], p[3]])
  const ports = { front, stats, worker }
  const made = name === 'haproxy' ? await haproxyFront(ports, args.workers) : await embeddedFront(ports)
  const warmup = warmupRequests > 0 ? { warmup: [WARMUP_PATH], warmupRequests } : {}
  const pool = new Pool({ app: APP, workers: args.workers, workerPort: worker, logger: silent, fronts: [made.front], execArgv: [], ...warmup })
  try {
    await pool.start()
    const url = `${made.url}/?items=20&cost=${args.cost}`
    await load(url, args.connections, 1).done // warm up
    const steady = summary(await load(url, args.connections, args.steady).done)
    const before = pool.workers().map((w) => w.pid)
    const during = load(url, args.connections, 120)
    const started = Date.now()
    const reload = await pool.reload()
    const reloadMs = Date.now() - started
    during.stop()
    const inReload = summary(await during.done)
    const replaced = pool.workers().filter((w) => !before.includes(w.pid)).length
    return { name, warmupRequests, steady, inReload, reloadMs, replaced: `${replaced}/${reload.replaced.length}` }
  } finally {
    await pool.stop({ timeout: 5000 })
    await made.stop()
  }
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2 }

// One row per front and warm-up: the round with the median p99 ratio stands for them, and
// every round's ratio is listed.
function combine (name, warmupRequests, runs) {
  const ratios = runs.map((r) => r.inReload.p99 / r.steady.p99)
  const mid = median(ratios)
  const closest = ratios.reduce((best, x, i) => Math.abs(x - mid) < Math.abs(ratios[best] - mid) ? i : best, 0)
  const typical = runs[closest]
  return { ...typical, ratios, ratio: mid, failed: runs.reduce((n, r) => n + r.inReload.failed, 0), requests: runs.reduce((n, r) => n + r.inReload.requests, 0) }
}

function haproxyInstalled () {
  try { execFileSync('haproxy', ['-v'], { stdio: 'ignore' }); return true } catch { return false }
}

function table (rows, args) {
  const lines = [
    `Rolling reload under load: ${args.workers} workers, ${args.connections} connections, SSR page (20 items) + ${args.cost} ms modelled CPU, reload batch 1.`,
    '',
    '| front | warm-up | steady p50 / p99 (ms) | during reload p50 / p99 (ms) | p99 ratio (median; each round) | failed during reload (all rounds) | reload time | pids replaced |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |'
  ]
  for (const r of rows) {
    lines.push(`| ${r.name} | ${r.warmupRequests > 0 ? `${r.warmupRequests} × ${WARMUP_PATH}` : 'none'} | ${r.steady.p50} / ${r.steady.p99} | ${r.inReload.p50} / ${r.inReload.p99} | ${r.ratio.toFixed(2)}× (${r.ratios.map((x) => x.toFixed(2)).join(', ')}) | ${r.failed} of ${r.requests} | ${(r.reloadMs / 1000).toFixed(1)} s | ${r.replaced} |`)
  }
  return lines.join('\n')
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const rows = []
  for (const name of args.fronts) {
    if (name === 'haproxy' && !haproxyInstalled()) { console.error('haproxy is not installed: skipping it'); continue }
    const runs = new Map() // warm-up → runs
    for (let round = 0; round < args.rounds; round++) {
      for (const warmupRequests of [...new Set([0, args['warmup-requests']])]) {
        const run = await runFront(name, args, warmupRequests)
        runs.set(warmupRequests, [...(runs.get(warmupRequests) || []), run])
      }
    }
    for (const [warmupRequests, list] of runs) rows.push(combine(name, warmupRequests, list))
  }
  const out = table(rows, args)
  console.log(out)
  const dir = path.join(__dirname, 'results')
  fs.mkdirSync(dir, { recursive: true })
  const madeBy = `node bench/reload.js ${process.argv.slice(2).join(' ')}`.trim()
  fs.writeFileSync(path.join(dir, 'reload.md'), `${out}\n\nMade by: ${madeBy}\n`)
  const machine = { cpus: os.cpus().length, loadavg: os.loadavg(), node: process.version }
  fs.writeFileSync(path.join(dir, 'reload.json'), JSON.stringify({ at: new Date().toISOString(), madeBy, args, machine, rows }, null, 2) + '\n')
}

main().catch((err) => { console.error(err); process.exit(1) })
