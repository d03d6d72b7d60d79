'use strict'

// Long-lived streams (server-sent events, AI token streams) per front: how many are served to
// their end, what memory each costs the serving processes, how late its tokens arrive against
// the same app reached directly, how soon a client's hang-up reaches the app, and what a
// CPU-bound page's p99 becomes beside them.
//
//   node bench/streams.js [--quick] [--fronts direct,embedded,haproxy,nginx-haproxy,cluster,pm2]
//                         [--scales 100,1000,10000] [--every 100,100,1000] [--workers 2]
//                         [--window 10] [--settle 2] [--openRate 1000] [--hangups 50]
//                         [--renders 200] [--renderMs 20] [--renderClients 4] [--renderAt 1000]
//                         [--runs 1] [--nofile 65536] [--fit 1] [--results DIR]
//
// The app (bench/lib/streams-app.js): GET /stream writes a token at once and then one every
// `every` ms (the scale's entry of --every: 10 a second at 100 and 1,000 streams, 1 a second at
// 10,000, so 10,000 tokens a second at the two larger scales), each stamped with the sender's
// CLOCK_MONOTONIC; GET /render blocks the event loop (Atomics.wait) for `renderMs`.
// The clients (bench/lib/streams-client.js): a process of their own, a connection per stream,
// `Accept: text/event-stream`, the streams opened at `openRate` a second (over at least one
// token interval, so their tokens are spread), then for each scale and front:
//   served       streams that got every token and their end; cut (closed before their end),
//                non-200 answers (503...), failures before a head, by kind. The streams stay
//                open through every step below; then the bench ends them all at once (a file
//                the app looks for), as the app's own end, and waits up to 30 s for them
//   memory       VmRSS and Pss of every serving process (the front's roots and all their
//                descendants, bench/lib/process-tree.js: the pool's supervisor, workers and
//                reaper; HAProxy; nginx's master and workers; cluster's primary and workers;
//                PM2's daemon and workers; the one process) midway through the token window,
//                against the same front idle (after a warm-up, before any stream)
//   token delay  from the app's write to the client's read, every token received over `window`
//                s once all streams are open and `settle` s have passed: p50, p99, p99.9
//   hang-up      `hangups` more streams, one at a time, each hung up 50 ms after its first token
//                (between two tokens: nothing is written meanwhile); from the client's hang-up
//                to the app's res 'close', as the app records it in a file per process
//   render p99   `renders` requests of /render?ms=`renderMs` from `renderClients` clients, alone
//                (before the streams) and beside `renderAt` streams (after the hang-ups)
// Fronts, each with `workers` workers (the pool with its defaults, access log on): direct (the
// app as one plain process, no front: the baseline), `pool start` (embedded), `pool start
// --balancer haproxy` with the generated config (streams go to its pool_streams backend),
// nginx from the generated config in front of that HAProxy, Node's cluster, PM2 cluster mode.
// Every front is started afresh for each scale, so its idle memory is its own.
//
// Limits: 10,000 streams need more descriptors than a default `ulimit -n`, so the part first
// raises its own RLIMIT_NOFILE (soft and hard) to `nofile` with `prlimit --pid` (util-linux;
// needs CAP_SYS_RESOURCE to raise the hard limit): every process it starts inherits it, with no
// change to how the shared helpers start them. Where that fails it goes on with the limit it
// has, and says so: a relay (the embedded balancer, HAProxy, an nginx worker) holds two
// descriptors per stream in one process, so a scale past half the limit shows what each front
// does at its limit, and with --fit 1 the largest round scale that fits is measured as well (at
// 20,000 descriptors: 9,000). It also checks that the ephemeral port range
// (ip_local_port_range) has a port free for every connection it opens (client to front and
// front to worker), and ends with one line if not. Loopback only.

const fs = require('node:fs')
const os = require('node:os')
const http = require('node:http')
const path = require('node:path')
const { runPart, progress, round, log } = require('./lib/part')
const { forkReady, freePorts, spawnTracked, waitForPort, stop, ask, sleep } = require('./lib/procs')
const { startFront, unavailable } = require('./lib/fronts')
const { startGeneratedNginx, has, NGINX } = require('./lib/stack')
const { closedLoop } = require('./lib/closed-loop')
const { treeMemory } = require('./lib/process-tree')
const { openFilesLimit, raiseOpenFiles, ephemeralPorts, descriptorsNeeded, SPARE_FDS } = require('./lib/limits')

const APP = path.join(__dirname, 'lib', 'streams-app.js')
const FRONTS = ['direct', 'embedded', 'haproxy', 'nginx-haproxy', 'cluster', 'pm2']
const defaults = {
  fronts: FRONTS,
  scales: [100, 1000, 10000],
  every: [100, 100, 1000],
  workers: 2,
  window: 10,
  settle: 2,
  openRate: 1000,
  hangups: 50,
  renders: 200,
  renderMs: 20,
  renderClients: 4,
  renderAt: 1000,
  runs: 1,
  nofile: 65536,
  fit: 1
}
const quick = { scales: [100, 1000], every: [100, 100], window: 4, hangups: 20, renders: 100 }

const HANGUP_BUDGET_MS = 10000 // the hang-ups of one cell stop sampling past this
const RENDER_BUDGET_S = 10 // a render phase sends no request past this
const STREAM_MAX_MS = 300000 // a stream not ended by the bench ends by itself after this
const END_TIMEOUT_MS = 30000 // streams not ended this long after the end are counted unfinished

// ---- the fronts -------------------------------------------------------------------------------

// { url, roots() → [pid] (the front's processes come from these), stop() }.
async function startStreamsFront (name, args) {
  if (name === 'direct') {
    const [port] = await freePorts(1)
    const child = spawnTracked(process.execPath, [APP], { env: { ...process.env, PORT: String(port) } })
    await waitForPort(port)
    return { url: `http://127.0.0.1:${port}`, roots: () => [child.pid], stop: () => stop(child) }
  }
  const kind = name === 'nginx-haproxy' ? 'haproxy' : name
  const front = await startFront(kind, { workers: args.workers, app: APP, accessLog: true })
  const rootsOf = async () => {
    if (front.pool) return [front.pool.child.pid, ...(front.haproxy ? [front.haproxy.child.pid] : [])]
    return (await front.processes()).front
  }
  if (name !== 'nginx-haproxy') return { url: front.url, roots: rootsOf, stop: () => front.stop() }
  try {
    const [port] = await freePorts(1)
    const nginx = await startGeneratedNginx({ port, haproxySocket: front.haproxy.httpSocket })
    return {
      url: nginx.url,
      roots: async () => [...await rootsOf(), nginx.child.pid],
      async stop () { await stop(nginx.child); await front.stop() }
    }
  } catch (err) {
    await front.stop()
    throw err
  }
}

// A few short streams and pages through the front before anything counts (JIT, connections).
function get (url, headers = {}) {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, headers }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
      res.on('error', () => resolve(0))
    })
    req.setTimeout(10000, () => req.destroy())
    req.on('error', () => resolve(0))
  })
}

async function warm (url) {
  const sse = { accept: 'text/event-stream' }
  await Promise.all(Array.from({ length: 20 }, (_, i) => get(`${url}/stream?ms=300&every=50&id=warm-${i}`, sse)))
  for (let i = 0; i < 20; i++) await get(`${url}/render?ms=0`)
}

// ---- one cell ---------------------------------------------------------------------------------

async function renders (url, args) {
  const load = { connections: args.renderClients, durationS: RENDER_BUDGET_S, requests: args.renders, timeoutS: 5 }
  const { summary } = await closedLoop({ url, ...load, path: '/render', query: `ms=${args.renderMs}` })
  const { requests, ok, failed, failedByKind } = summary
  const [p50, p99, max] = [summary.p50, summary.p99, summary.max].map((x) => round(x, 2))
  return { requests, ok, failed, failedByKind, p50, p99, max }
}

const kb = (m) => ({ rssKb: m.rssKb, pssKb: m.pssKb, processes: m.processes })

async function runCell (name, scale, every, args, run) {
  const closes = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-closes-'))
  // Every process a front starts inherits this: the app's file of closes goes there.
  process.env.STREAMS_CLOSES = closes
  const withRenders = scale === args.renderAt
  const rampMs = Math.max(every, Math.round(scale / args.openRate * 1000))
  const prefix = `${name}-${scale}-${run}`
  const steps = {}
  const timed = async (key, fn) => {
    const t0 = performance.now()
    try { return await fn() } finally { steps[key] = round((performance.now() - t0) / 1000, 2) }
  }
  let front = null
  let client = null
  try {
    front = await timed('startS', () => startStreamsFront(name, args))
    await warm(front.url)
    await sleep(1000)
    const idle = treeMemory(await front.roots())
    const renderAlone = withRenders ? await timed('renderAloneS', () => renders(front.url, args)) : null
    client = await forkReady('streams-client.js', {})
    const url = front.url
    const opening = { cmd: 'open', url, n: scale, every, ms: STREAM_MAX_MS, rampMs, prefix }
    const opened = await timed('openS', () => ask(client, opening))
    await sleep(args.settle * 1000)
    const windowDone = ask(client, { cmd: 'window', ms: args.window * 1000 })
    await sleep(args.window * 500)
    const open = treeMemory(await front.roots())
    const tokens = await windowDone
    const hangup = await timed('hangupS', () => ask(client, {
      cmd: 'hangup', url, count: args.hangups, every, ms: STREAM_MAX_MS, prefix, closes, budgetMs: HANGUP_BUDGET_MS
    }))
    const renderBeside = withRenders ? await timed('renderBesideS', () => renders(front.url, args)) : null
    // Every stream ends now, as the app's own end: served means it got here.
    fs.writeFileSync(path.join(closes, 'end'), '')
    const outcome = await timed('endS', () => ask(client, { cmd: 'finish', timeoutMs: END_TIMEOUT_MS }))
    const render = withRenders ? { alone: renderAlone, beside: renderBeside } : null
    return { every, rampMs, steps, opened, tokens, memory: { idle: kb(idle), open: kb(open) }, hangup, render, outcome }
  } finally {
    if (client) { client.kill('SIGKILL'); await client.exited }
    if (front) await front.stop()
    fs.rmSync(closes, { recursive: true, force: true })
  }
}

const q = (values, p) => {
  const s = values.filter((v) => v !== null).sort((a, b) => a - b)
  return s.length ? s[Math.min(s.length - 1, Math.ceil(p / 100 * s.length) - 1)] : null
}

function describe (name, scale, r) {
  const o = r.outcome
  const perStream = (r.memory.open.rssKb / scale).toFixed(1)
  const over = ((r.memory.open.rssKb - r.memory.idle.rssKb) / scale).toFixed(1)
  const lost = r.hangup.delays.filter((d) => d === null).length
  const other = { ...o.statuses, ...o.errors }
  const failed = Object.keys(other).length ? ` (${JSON.stringify(other)})` : ''
  const hang = (p) => round(q(r.hangup.delays, p), 2)
  return `  ${name.padEnd(14)} served ${o.complete}/${scale}, cut ${o.cut}, 503 ${o.statuses[503] ?? 0}${failed}` +
    `${o.unfinished ? `, unfinished ${o.unfinished}` : ''}; head p50 ${r.opened.headMs.p50} ms;` +
    ` RSS ${perStream} KB/stream (${over} over idle); token p50 ${r.tokens.p50} p99 ${r.tokens.p99} ms` +
    ` (${r.tokens.tokens} tokens, ${r.tokens.open} open,` +
    ` client loop p99 ${r.tokens.loopDelayP99}); hang-up p50 ${hang(50)} p99 ${hang(99)} ms` +
    `${lost ? ` (${lost} not seen within 3 s)` : ''}` +
    `${r.render ? `; render p99 ${r.render.alone.p99} alone, ${r.render.beside.p99} beside` : ''}`
}

// ---- the part ---------------------------------------------------------------------------------

async function main (args) {
  for (const f of args.fronts) {
    if (!FRONTS.includes(f)) throw new Error(`unknown front ${f} (one of ${FRONTS.join(', ')})`)
  }
  if (args.every.length !== args.scales.length) {
    throw new Error(`--every needs one interval per scale (${args.scales.length})`)
  }
  const notRaised = raiseOpenFiles(args.nofile)
  const nofile = openFilesLimit().soft
  const scales = args.scales.map((streams, i) => ({ streams, every: args.every[i] }))
  const top = scales.reduce((a, b) => (b.streams > a.streams ? b : a))
  // A limit below what a relay needs for the largest scale: that scale is still run (what each
  // front does at its limit), and the largest round scale that fits too, at the same token rate.
  let fitted = null
  if (args.fit && descriptorsNeeded('embedded', top.streams + 1, args.workers) > nofile) {
    const streams = Math.floor((nofile - SPARE_FDS - 1000) / 2 / 1000) * 1000
    if (streams > 0 && !scales.some((x) => x.streams === streams)) {
      fitted = { streams, every: top.every }
      scales.push(fitted)
      scales.sort((x, y) => x.streams - y.streams)
    }
  }
  // The client's connection and the front's to its worker, each from the range, plus some spare.
  const ports = ephemeralPorts()
  const needed = 2 * (top.streams + args.hangups) + 1000
  if (ports.free < needed) {
    console.error(`streams: ${ports.free} ephemeral ports free in ${ports.lo}-${ports.hi} (${ports.used} in use), ` +
      `${needed} needed for ${top.streams} streams`)
    process.exit(2)
  }
  const skipped = []
  const names = []
  for (const name of args.fronts) {
    const nginx = () => unavailable('haproxy') ?? (has(NGINX) ? null : `${NGINX} not found`)
    const why = name === 'direct' ? null : name === 'nginx-haproxy' ? nginx() : unavailable(name)
    if (why) skipped.push({ front: name, reason: why })
    else names.push(name)
  }
  const listed = scales.map((x) => `${x.streams} streams (a token every ${x.every} ms)`).join(', ')
  log(`${names.join(', ')}; ${args.workers} workers each; ${listed}; ` +
    `${ports.free} ephemeral ports free; RLIMIT_NOFILE ${nofile}` +
    (notRaised ? ` (not raised to ${args.nofile}: ${notRaised})` : '') +
    (fitted ? `: a relay needs ${descriptorsNeeded('embedded', top.streams, args.workers)} for ${top.streams}` : '') +
    (fitted ? `, so ${fitted.streams} streams are measured as well` : ''))
  const cells = scales.flatMap(({ streams, every }) => names.map((front) => (
    { front, scale: streams, every, descriptors: descriptorsNeeded(front, streams + 1, args.workers), runs: [] })))
  const total = args.runs * cells.length
  let done = 0
  for (let run = 0; run < args.runs; run++) {
    for (const { streams: scale, every } of scales) {
      log(`${scale} streams, a token every ${every} ms, run ${run + 1}/${args.runs}`)
      const row = cells.filter((c) => c.scale === scale)
      for (let k = 0; k < row.length; k++) {
        const cell = row[(k + run) % row.length]
        progress(done++, total, `${scale} streams, ${cell.front}, run ${run + 1}/${args.runs}`)
        if (cell.descriptors > nofile) {
          log(`  ${cell.front.padEnd(14)} needs about ${cell.descriptors} descriptors in one process (limit ${nofile})`)
        }
        try {
          const r = await runCell(cell.front, scale, every, args, run)
          cell.runs.push(r)
          log(describe(cell.front, scale, r))
        } catch (err) {
          const reason = err.message.split('\n')[0]
          skipped.push({ front: cell.front, scale, run, reason })
          log(`  ${cell.front.padEnd(14)} not measured: ${reason}`)
        }
        await sleep(1000)
      }
    }
  }
  progress(total, total, 'done')
  return {
    fronts: names,
    skipped,
    limits: { nofile, nofileWanted: args.nofile, notRaised, fitted: fitted?.streams ?? null, ports },
    app: 'bench/lib/streams-app.js',
    cells: cells.filter((c) => c.runs.length)
  }
}

runPart('streams', { defaults, quick, main })
