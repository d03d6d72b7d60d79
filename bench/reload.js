'use strict'

// Rolling reload under load, for each front: failed requests, and latency during the reload
// against steady state measured just before it, in the same run.
//
//   node bench/reload.js [--workers 8] [--connections 12] [--steady 5] [--cost 20] [--fronts embedded,haproxy]
//
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
  const args = { workers: 8, connections: 12, steady: 5, cost: 20, fronts: ['embedded', 'haproxy'] }
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

async function runFront (name, args) {
  const [front, stats, worker] = await freePorts(args.workers + 3).then((p) => [p[0], p[1], p[3]])
  const ports = { front, stats, worker }
  const made = name === 'haproxy' ? await haproxyFront(ports, args.workers) : await embeddedFront(ports)
  const pool = new Pool({ app: APP, workers: args.workers, workerPort: worker, logger: silent, fronts: [made.front], execArgv: [] })
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
    return { name, steady, inReload, reloadMs, replaced: `${replaced}/${reload.replaced.length}` }
  } finally {
    await pool.stop({ timeout: 5000 })
    await made.stop()
  }
}

function haproxyInstalled () {
  try { execFileSync('haproxy', ['-v'], { stdio: 'ignore' }); return true } catch { return false }
}

function table (rows, args) {
  const lines = [
    `Rolling reload under load: ${args.workers} workers, ${args.connections} connections, SSR page (20 items) + ${args.cost} ms modelled CPU, reload batch 1.`,
    '',
    '| front | steady p50 / p99 (ms) | during reload p50 / p99 (ms) | p99 ratio | failed during reload | reload time | pids replaced |',
    '| --- | --- | --- | --- | --- | --- | --- |'
  ]
  for (const r of rows) {
    lines.push(`| ${r.name} | ${r.steady.p50} / ${r.steady.p99} | ${r.inReload.p50} / ${r.inReload.p99} | ${(r.inReload.p99 / r.steady.p99).toFixed(2)}× | ${r.inReload.failed} of ${r.inReload.requests} | ${(r.reloadMs / 1000).toFixed(1)} s | ${r.replaced} |`)
  }
  return lines.join('\n')
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const rows = []
  for (const name of args.fronts) {
    if (name === 'haproxy' && !haproxyInstalled()) { console.error('haproxy is not installed: skipping it'); continue }
    rows.push(await runFront(name, args))
  }
  const out = table(rows, args)
  console.log(out)
  const dir = path.join(__dirname, 'results')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'reload.md'), `${out}\n\nMade by: node bench/reload.js ${process.argv.slice(2).join(' ')}\n`)
}

main().catch((err) => { console.error(err); process.exit(1) })
