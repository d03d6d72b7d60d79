'use strict'

// Request bodies held in memory: the front's peak RSS against the number of large POSTs queued
// at once behind busy workers, and its RSS once the burst is over.
//
//   node bench/body-budget.js [--quick] [--counts 50,100,200,400] [--mb 4] [--workers 2]
//                             [--render 5] [--settle 3000] [--fronts embedded,...] [--results DIR]
//
// For each count, each front is started afresh with `workers` workers; every worker is first
// given a render long enough (Atomics.wait) for the whole burst to arrive while it is busy; then
// `count` POSTs of `mb` MB each are sent at once, each rendering `render` ms once a worker
// takes it. The front's processes are sampled (VmRSS, /proc) every 20 ms until every POST is
// answered, then once more `settle` ms later.
//
// Fronts:
//   embedded             `pool start`, defaults: the body budget (1/16 of RAM, at most 256 MiB)
//                        and --max-queue 1024; bodies past the budget get 503 unread
//   embedded-unbounded   the same with --body-budget 0: every body held, as before the budget
//   nginx-haproxy        nginx 1.22 from `pool config nginx` with client_body_buffer_size left
//                        at nginx's default (16 KB on 64-bit: larger bodies go to a temp file),
//                        in front of HAProxy from `pool config haproxy` and the same workers.
//                        Bytes spilled: nginx's own count ("a client request body is buffered
//                        to a temporary file" in its error log, times the body size); on disk at
//                        once: the temp files nginx's processes hold open, sampled with the RSS.
// Loopback only; every process is stopped at the end and on Ctrl-C.

const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const { forkReady, freePorts, stop, sleep } = require('./lib/procs')
const { startPoolProcess } = require('./lib/pool-process')
const { startGeneratedHaproxy, startGeneratedNginx, has, HAPROXY, NGINX } = require('./lib/stack')
const { runPart, progress, round, log } = require('./lib/part')

const FRONTS = ['embedded', 'embedded-unbounded', 'nginx-haproxy']
const defaults = { counts: [50, 100, 200, 400], mb: 4, workers: 2, render: 5, settle: 3000, fronts: FRONTS }
const quick = { counts: [50, 200], mb: 2, settle: 2000 }

const MiB = 1024 * 1024
const SAMPLE_MS = 20
const SPILL = 'a client request body is buffered to a temporary file'

// ── what a process holds ─────────────────────────────────────────────────────────────────────

function memoryOf (pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') }
  } catch {
    return { rss: 0, hwm: 0 } // gone
  }
}

// The pids whose parent is `pid` (nginx's workers), from /proc.
function childrenOf (pid) {
  const out = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(entry))
    } catch {}
  }
  return out
}

// Bytes of the files under `dir` that `pids` hold open. nginx unlinks a body's temp file as soon
// as it has created it and keeps only the descriptor, so the directory itself always looks empty.
function bytesHeldOpen (pids, dir) {
  let total = 0
  for (const pid of pids) {
    let fds = []
    try { fds = fs.readdirSync(`/proc/${pid}/fd`) } catch { continue }
    for (const fd of fds) {
      try {
        if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith(dir)) total += fs.statSync(`/proc/${pid}/fd/${fd}`).size
      } catch {} // closed meanwhile
    }
  }
  return total
}

// ── the fronts ───────────────────────────────────────────────────────────────────────────────

// Each returns { url, groups: { name: () => pids }, tempDir?, spilled?(), stop() }.
async function startEmbedded (args, extra = []) {
  const [port, workerPort] = await freePorts(1 + args.workers)
  const pool = startPoolProcess(['-n', String(args.workers), '--port', String(port), '--worker-port', String(workerPort), '--queue-timeout', '120', ...extra])
  await pool.started
  return { url: `http://127.0.0.1:${port}`, groups: { supervisor: () => [pool.child.pid] }, stop: () => pool.stop() }
}

async function startNginx (args) {
  const ports = await freePorts(args.workers)
  const workers = await Promise.all(ports.map((port) => forkReady('worker.js', { PORT: String(port) })))
  const [hp, hs, np] = await freePorts(3)
  const haproxy = await startGeneratedHaproxy({ workers: args.workers, workerPort: ports[0], port: hp, statsPort: hs, timeout: 120000, queueTimeout: 120000, ready: true })
  // nginx's default client_body_buffer_size, not the 1m of the generated config.
  const nginx = await startGeneratedNginx({ port: np, haproxySocket: haproxy.httpSocket, edit: (c) => c.replace(/\n\s*client_body_buffer_size [^;]+;/, '') })
  if (/client_body_buffer_size/.test(nginx.cfg)) throw new Error('client_body_buffer_size is still set in the nginx config')
  const errorLog = path.join(nginx.dir, 'logs', 'error.log')
  return {
    url: nginx.url,
    groups: { nginx: () => [nginx.child.pid, ...childrenOf(nginx.child.pid)], haproxy: () => [haproxy.child.pid] },
    tempDir: path.join(nginx.dir, 'client_body_temp'),
    diskHeldBy: 'nginx',
    spills: () => { try { return fs.readFileSync(errorLog, 'utf8').split(SPILL).length - 1 } catch { return null } },
    stop: async () => { await stop(nginx.child); await stop(haproxy.child); await Promise.all(workers.map(stop)) }
  }
}

function startFront (name, args) {
  if (name === 'embedded') return startEmbedded(args)
  if (name === 'embedded-unbounded') return startEmbedded(args, ['--body-budget', '0'])
  if (name === 'nginx-haproxy') return startNginx(args)
  throw new Error(`unknown front ${name} (one of ${FRONTS.join(', ')})`)
}

// ── the client ───────────────────────────────────────────────────────────────────────────────

function get (url) {
  return new Promise((resolve) => {
    http.get(url, { agent: false }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)) }).on('error', (err) => resolve(err.code))
  })
}

// A POST of `body`; resolves with its status (or the error code of a connection that broke
// before any answer) and when its body was handed to the kernel.
function post (url, body) {
  return new Promise((resolve) => {
    let answered = false
    let sentAt = null
    const req = http.request(url, { method: 'POST', agent: false, headers: { 'Content-Length': body.length } }, (res) => {
      answered = true
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, sentAt }))
      res.on('error', () => resolve({ status: res.statusCode, sentAt }))
    })
    req.on('finish', () => { sentAt = performance.now() })
    req.on('error', (err) => { if (!answered) resolve({ status: err.code, sentAt }) })
    req.end(body)
  })
}

// ── one run ──────────────────────────────────────────────────────────────────────────────────

// Sums each group's VmRSS every SAMPLE_MS (and the temp directory's size) until stopped; the
// peaks of the sums.
function sampler (front) {
  const peak = { total: 0, disk: 0 }
  for (const g of Object.keys(front.groups)) peak[g] = 0
  const pids = Object.fromEntries(Object.entries(front.groups).map(([g, list]) => [g, list()]))
  const tick = () => {
    let total = 0
    for (const [g, list] of Object.entries(pids)) {
      const rss = list.reduce((sum, pid) => sum + memoryOf(pid).rss, 0)
      peak[g] = Math.max(peak[g], rss)
      total += rss
    }
    peak.total = Math.max(peak.total, total)
    if (front.tempDir) peak.disk = Math.max(peak.disk, bytesHeldOpen(pids[front.diskHeldBy], front.tempDir))
  }
  tick()
  const timer = setInterval(tick, SAMPLE_MS)
  return { peak, pids, stop: () => { clearInterval(timer); tick() } }
}

const rssOf = (pids) => Object.fromEntries(Object.entries(pids).map(([g, list]) => [g, list.reduce((sum, pid) => sum + memoryOf(pid).rss, 0)]))
const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0)
const mb = (bytes) => round(bytes / MiB, 1)

async function runOne (name, count, args) {
  const front = await startFront(name, args)
  try {
    const samples = sampler(front)
    const before = rssOf(samples.pids)
    // Long enough for the whole burst to arrive while every worker is busy.
    const holdMs = 3000 + count * 15
    const renders = Array.from({ length: args.workers }, (_, i) => get(`${front.url}/?ms=${holdMs}&hold=${i}`))
    await sleep(300)
    const body = Buffer.alloc(args.mb * MiB, 'b')
    const started = performance.now()
    const answers = await Promise.all(Array.from({ length: count }, (_, i) => post(`${front.url}/?ms=${args.render}&i=${i}`, body)))
    const ms = performance.now() - started
    await Promise.all(renders)
    samples.stop()
    const done = rssOf(samples.pids)
    await sleep(args.settle)
    const after = rssOf(samples.pids)
    const statuses = {}
    for (const a of answers) statuses[a.status] = (statuses[a.status] || 0) + 1
    const lastSent = Math.max(...answers.map((a) => a.sentAt ?? 0)) - started
    const spills = front.spills ? front.spills() : null
    const hwm = sum(Object.fromEntries(Object.entries(samples.pids).map(([g, list]) => [g, list.reduce((s, pid) => s + memoryOf(pid).hwm, 0)])))
    return {
      front: name,
      count,
      mb: args.mb,
      statuses,
      ms: round(ms, 0),
      allSentMs: round(lastSent, 0),
      holdMs,
      queuedWhileBusy: lastSent < holdMs, // every body was sent before a worker freed up
      rssBeforeMb: mb(sum(before)),
      peakRssMb: mb(samples.peak.total),
      hwmMb: mb(hwm), // each process's own peak, summed (its VmHWM)
      peakByProcessMb: Object.fromEntries(Object.keys(front.groups).map((g) => [g, mb(samples.peak[g])])),
      rssDoneMb: mb(sum(done)),
      rssAfterMb: mb(sum(after)),
      afterByProcessMb: Object.fromEntries(Object.entries(after).map(([g, v]) => [g, mb(v)])),
      spilledMb: spills === null ? null : mb(spills * args.mb * MiB),
      spilledBodies: spills,
      peakDiskMb: front.tempDir ? mb(samples.peak.disk) : null
    }
  } finally {
    await front.stop()
  }
}

async function main (args) {
  const skipped = []
  let fronts = args.fronts
  if (fronts.includes('nginx-haproxy') && !(has(NGINX) && has(HAPROXY))) {
    skipped.push({ front: 'nginx-haproxy', reason: `${has(NGINX) ? HAPROXY : NGINX} not found` })
    fronts = fronts.filter((f) => f !== 'nginx-haproxy')
  }
  const rows = []
  const steps = args.counts.length * fronts.length
  let step = 0
  for (const count of args.counts) {
    for (const name of fronts) {
      progress(step++, steps, `${name} × ${count}`)
      const row = await runOne(name, count, args)
      rows.push(row)
      const answered = Object.entries(row.statuses).map(([s, n]) => `${n}×${s}`).join(' ')
      log(`  ${String(count).padStart(4)} × ${args.mb} MB  ${name.padEnd(19)} peak ${String(row.peakRssMb).padStart(7)} MB  after ${String(row.rssAfterMb).padStart(6)} MB` +
        (row.spilledMb !== null ? `  spilled ${row.spilledMb} MB (at once ${row.peakDiskMb} MB)` : '') + `  ${answered}${row.queuedWhileBusy ? '' : '  (a worker freed up before every body had arrived)'}`)
    }
  }
  progress(steps, steps, 'done')
  return { fronts, skipped, rows }
}

runPart('body-budget', { defaults, quick, main })
