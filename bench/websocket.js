'use strict'

// WebSockets per front: how many tunnels each holds idle and what memory each costs the serving
// processes, how long an echo takes against the same app reached directly, how many messages a
// second one client core gets through, what an HTTP page's p99 becomes beside a thousand
// sockets that echo, and what a reload with a thousand tunnels open does.
//
//   node bench/websocket.js [--quick] [--fronts direct,relay,embedded,cluster,haproxy,nginx-haproxy]
//                           [--scales 1000,10000] [--activeAt 1000] [--workers 2] [--openRate 1000]
//                           [--settle 2] [--quiet 15] [--rate 1000] [--window 10] [--renders 200] [--renderMs 20]
//                           [--renderClients 2] [--tpSockets 50] [--tpDepth 32] [--tpBytes 64]
//                           [--tpSeconds 5] [--graceful 10] [--reloadClients 2] [--reloadPageMs 2]
//                           [--runs 1] [--nofile 65536] [--fit 1] [--bin bin/pool.js] [--results DIR]
//
// The app (bench/lib/ws-app.js): a `ws` server on /echo that sends every message back as it came;
// GET /render?ms= blocks the event loop (Atomics.wait) for `ms`. The clients
// (bench/lib/ws-client.js): a process of their own (one event loop, so one client core), a
// connection per socket, the sockets opened at `openRate` a second. For each scale and front:
//   held idle    sockets opened of those asked (a refused handshake by its status, a failure by
//                its kind); VmRSS and Pss of every serving process (the front's roots and all
//                their descendants, bench/lib/process-tree.js: the pool's supervisor, workers and
//                reaper; HAProxy; nginx's master and workers; cluster's primary and workers; the
//                one process) `settle` s after the last opened, nothing sent, against the same
//                front idle (after a warm-up, before any socket); and again `quiet` s later, once
//                the heaps have given back the young generation the opening burst grew
// and at `activeAt` sockets, on those sockets, in this order:
//   echo         `rate` messages a second spread evenly over the open sockets (each in turn: at
//                1,000 over 1,000, one a second each) for `window` s: every round trip, from the
//                client's send to its echo, on the client's clock
//   HTTP beside  `renders` requests of /render?ms=`renderMs` from `renderClients` keep-alive
//                clients, alone (before the sockets) and beside the same echo (after the window)
//   throughput   `tpSockets` sockets, each keeping `tpDepth` messages of `tpBytes` in flight, for
//                `tpSeconds` s: the echoes per second one client core gets, and the CPU of the
//                serving processes meanwhile
//   reload       (the pool's fronts) `pool reload` with the sockets open and nothing sent, the
//                pool at --graceful-timeout `graceful` s, while `reloadClients` clients GET
//                /render?ms=`reloadPageMs` one after the other (from 0.5 s before until 0.5 s
//                after, 100,000 at most): the requests that failed, how long the reload took,
//                and the close codes the clients saw, with when (from the reload's start) they
//                came, waited for up to `graceful` + 15 s. Node's cluster has no drain bound: its
//                rolling restart (a worker's disconnect()) waits until every socket of the worker
//                closes, so it is not reloaded here
// Then the client closes every socket left (1000) and the front is stopped.
// Fronts, each with `workers` workers (the pool with its defaults and its access log on):
// direct (the app as one plain process, no front: the baseline), relay (that process behind a
// minimal TCP relay, bench/lib/tcp-relay.js: the floor of one extra hop), `pool start` (embedded),
// Node's cluster (round-robin: fine for WebSockets, which need no stickiness unless Socket.IO
// starts with long-polling), `pool start --balancer haproxy` with the generated config, and
// nginx from the generated config in front of that HAProxy (both route `Upgrade: websocket` to
// the streams backend, with `timeout tunnel`, once the generated configs do; until then what
// they do is what is measured). A front that fails is reported as failed, and the run goes on.
// Every front is started afresh for each scale, so its idle memory is its own.
//
// Limits: like bench/streams.js, the part first tries to raise its RLIMIT_NOFILE to `nofile`.
// A relay holds two descriptors per tunnel in one process; where the limit is below what the
// largest scale needs, with --fit 1 that scale is replaced by the largest round one that fits
// (at 20,000 descriptors: 9,000 for the issue's 10,000), and the result says so. It checks that
// the ephemeral port range has a port for every connection it opens. Loopback only.

const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { runPart, progress, round, log } = require('./lib/part')
const { forkReady, freePorts, spawnTracked, waitForPort, stop, sleep } = require('./lib/procs')
const { startFront, unavailable } = require('./lib/fronts')
const { startGeneratedNginx, has, NGINX } = require('./lib/stack')
const { closedLoop } = require('./lib/closed-loop')
const { tree, treeMemory } = require('./lib/process-tree')
const { BIN, ROOT } = require('./lib/pool-process')
const { openFilesLimit, raiseOpenFiles, ephemeralPorts, descriptorsNeeded, SPARE_FDS } = require('./lib/limits')

const APP = path.join(__dirname, 'lib', 'ws-app.js')
const RELAY = path.join(__dirname, 'lib', 'tcp-relay.js')
const FRONTS = ['direct', 'relay', 'embedded', 'cluster', 'haproxy', 'nginx-haproxy']
const POOL_FRONTS = ['embedded', 'haproxy', 'nginx-haproxy']
const defaults = {
  fronts: FRONTS,
  scales: [1000, 10000],
  activeAt: 1000,
  workers: 2,
  openRate: 1000,
  settle: 2,
  quiet: 15,
  rate: 1000,
  window: 10,
  renders: 200,
  renderMs: 20,
  renderClients: 2,
  tpSockets: 50,
  tpDepth: 32,
  tpBytes: 64,
  tpSeconds: 5,
  graceful: 10,
  reloadClients: 2,
  reloadPageMs: 2,
  runs: 1,
  nofile: 65536,
  fit: 1,
  bin: BIN
}
const quick = { scales: [1000], quiet: 5, window: 4, renders: 80, tpSeconds: 2, graceful: 3 }

const RENDER_BUDGET_S = 10 // a render phase sends no request past this
const TP_MAX_MESSAGES = 5e6 // a throughput step sends no more than this
const RELOAD_REQUESTS = 100000 // the GETs beside a reload: at most this many...
const RELOAD_LOAD_MAX_S = 90 // ...and none past this
const CLOSE_ALL_MS = 10000 // sockets the client closed that have not closed after this are destroyed
const STEP_SLACK_MS = 30000 // a client's answer that takes this much past its step's own bound is given up on

// ---- the fronts -------------------------------------------------------------------------------

// { url, roots() → [pid] (the front's processes come from these), reload() (the pool's), stop() }.
async function startWsFront (name, args) {
  if (name === 'direct') {
    const [port] = await freePorts(1)
    const child = spawnTracked(process.execPath, [APP], { env: { ...process.env, PORT: String(port) } })
    await waitForPort(port)
    return { url: `http://127.0.0.1:${port}`, roots: () => [child.pid], reload: null, stop: () => stop(child) }
  }
  if (name === 'relay') {
    const [port, appPort] = await freePorts(2)
    const app = spawnTracked(process.execPath, [APP], { env: { ...process.env, PORT: String(appPort) } })
    const relay = spawnTracked(process.execPath, [RELAY, String(port), String(appPort)])
    await Promise.all([waitForPort(appPort), waitForPort(port)])
    return {
      url: `http://127.0.0.1:${port}`,
      roots: () => [app.pid, relay.pid],
      reload: null,
      async stop () { await stop(relay); await stop(app) }
    }
  }
  const kind = name === 'nginx-haproxy' ? 'haproxy' : name
  const pool = POOL_FRONTS.includes(name) ? { poolArgs: ['--graceful-timeout', `${args.graceful}s`], bin: args.bin } : {}
  const front = await startFront(kind, { workers: args.workers, app: APP, accessLog: true, ...pool })
  const rootsOf = async () => {
    if (front.pool) return [front.pool.child.pid, ...(front.haproxy ? [front.haproxy.child.pid] : [])]
    return (await front.processes()).front
  }
  const reload = front.pool ? () => front.reload() : null
  if (name !== 'nginx-haproxy') return { url: front.url, roots: rootsOf, reload, stop: () => front.stop() }
  try {
    const [port] = await freePorts(1)
    const nginx = await startGeneratedNginx({ port, haproxySocket: front.haproxy.httpSocket })
    return {
      url: nginx.url,
      roots: async () => [...await rootsOf(), nginx.child.pid],
      reload,
      async stop () { await stop(nginx.child); await front.stop() }
    }
  } catch (err) {
    await front.stop()
    throw err
  }
}

// ---- the client -------------------------------------------------------------------------------

// The client's answer to `message`; rejects if it says nothing within `ms` or exits.
function askWithin (client, message, ms) {
  return new Promise((resolve, reject) => {
    const done = (fn, x) => { clearTimeout(timer); client.off('message', onMessage); client.off('exit', onExit); fn(x) }
    const onMessage = (m) => done(resolve, m.result)
    const onExit = (code) => done(reject, new Error(`the client exited (${code}) during ${message.cmd}`))
    const timer = setTimeout(() => done(reject, new Error(`the client did not answer ${message.cmd} within ${ms} ms`)), ms)
    client.on('message', onMessage)
    client.once('exit', onExit)
    client.send(message)
  })
}

// Sockets and pages through the front before anything counts (JIT, connections): the sockets at
// the rate the cells open theirs, as a front's first burst of handshakes is slower than the next.
const WARM_SOCKETS = 200
function get (url) {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
      res.on('error', () => resolve(0))
    })
    req.setTimeout(10000, () => req.destroy())
    req.on('error', () => resolve(0))
  })
}

async function warm (client, url, openRate) {
  const rampMs = Math.round(WARM_SOCKETS / openRate * 1000)
  await askWithin(client, { cmd: 'open', url, n: WARM_SOCKETS, rampMs }, rampMs + 60000)
  await askWithin(client, { cmd: 'echoStart', rate: 200 }, 5000)
  await sleep(500)
  await askWithin(client, { cmd: 'echoStop', graceMs: 1000 }, 5000)
  await askWithin(client, { cmd: 'closeAll', timeoutMs: 5000 }, 10000)
  for (let i = 0; i < 20; i++) await get(`${url}/render?ms=0`)
}

// ---- the serving processes' CPU ---------------------------------------------------------------

const TICK_S = 0.01 // USER_HZ: 100 on Linux

// pid → utime + stime (ticks) of every process in the tree of `roots`.
function cpuTicks (roots) {
  const m = new Map()
  for (const pid of tree(roots)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      m.set(pid, Number(f[11]) + Number(f[12]))
    } catch {}
  }
  return m
}

// Cores the processes alive at both readings used between them.
function coresBetween (before, after, seconds) {
  let ticks = 0
  for (const [pid, t] of after) if (before.has(pid)) ticks += t - before.get(pid)
  return seconds > 0 ? round(ticks * TICK_S / seconds, 3) : null
}

// ---- one cell ---------------------------------------------------------------------------------

async function renders (url, args) {
  const load = { connections: args.renderClients, durationS: RENDER_BUDGET_S, requests: args.renders, timeoutS: 5 }
  const { summary } = await closedLoop({ url, ...load, path: '/render', query: `ms=${args.renderMs}` })
  const { requests, ok, failed, failedByKind } = summary
  const [p50, p99, max] = [summary.p50, summary.p99, summary.max].map((x) => round(x, 2))
  return { requests, ok, failed, failedByKind, p50, p99, max }
}

// `pool reload` with the sockets open; GETs one after the other beside it; then the sockets'
// closes, each with its code and when it came.
async function reloadStep (front, client, args) {
  await askWithin(client, { cmd: 'mark' }, 5000)
  let over = false
  const loading = closedLoop({
    url: front.url,
    connections: args.reloadClients,
    durationS: RELOAD_LOAD_MAX_S,
    requests: RELOAD_REQUESTS,
    timeoutS: 5,
    path: '/render',
    query: `ms=${args.reloadPageMs}`,
    until: () => over
  })
  const t0 = performance.now()
  await sleep(500)
  const reloaded = await front.reload()
  await sleep(500)
  over = true
  const { summary } = await loading
  const loadS = round((performance.now() - t0) / 1000, 2)
  const closeWait = args.graceful * 1000 + 15000
  const closes = await askWithin(client, { cmd: 'closes', timeoutMs: closeWait }, closeWait + STEP_SLACK_MS)
  const { requests, ok, failed, failedByKind } = summary
  return {
    ms: reloaded.ms,
    code: reloaded.code,
    gracefulS: args.graceful,
    http: { requests, ok, failed, failedByKind, seconds: loadS, p50: round(summary.p50, 2), p99: round(summary.p99, 2) },
    closes
  }
}

const kb = (m) => ({ rssKb: m.rssKb, pssKb: m.pssKb, processes: m.processes })

async function runCell (name, scale, args) {
  const active = scale === args.activeAt
  const rampMs = Math.round(scale / args.openRate * 1000)
  const steps = {}
  const failed = {} // step → why, for a step that failed without ending the cell
  const timed = async (key, fn) => {
    const t0 = performance.now()
    try { return await fn() } finally { steps[key] = round((performance.now() - t0) / 1000, 2) }
  }
  // A step after the sockets are open: its failure is recorded, and the cell goes on.
  const step = async (key, fn) => {
    try { return await timed(key, fn) } catch (err) {
      failed[key] = err.message.split('\n')[0]
      return null
    }
  }
  let front = null
  let client = null
  try {
    front = await timed('startS', () => startWsFront(name, args))
    client = await forkReady('ws-client.js', {})
    await timed('warmS', () => warm(client, front.url, args.openRate))
    await sleep(1000)
    const idle = treeMemory(await front.roots())
    const renderAlone = active ? await timed('renderAloneS', () => renders(front.url, args)) : null
    const openBound = rampMs + 60000
    const opened = await timed('openS', () => askWithin(client, { cmd: 'open', url: front.url, n: scale, rampMs }, openBound))
    await sleep(args.settle * 1000)
    const held = treeMemory(await front.roots())
    await sleep(args.quiet * 1000)
    const quiet = treeMemory(await front.roots())
    const r = { rampMs, steps, failed, opened, memory: { idle: kb(idle), held: kb(held), quiet: kb(quiet) } }
    if (active) {
      r.echo = await step('echoS', async () => {
        await askWithin(client, { cmd: 'echoStart', rate: args.rate }, 5000)
        await sleep(args.window * 1000)
        return askWithin(client, { cmd: 'echoStop', graceMs: 1000 }, 1000 + STEP_SLACK_MS)
      })
      r.render = { alone: renderAlone, beside: null, echo: null }
      await step('renderBesideS', async () => {
        await askWithin(client, { cmd: 'echoStart', rate: args.rate }, 5000)
        try {
          r.render.beside = await renders(front.url, args)
        } finally {
          r.render.echo = await askWithin(client, { cmd: 'echoStop', graceMs: 1000 }, 1000 + STEP_SLACK_MS)
        }
      })
      r.throughput = await step('throughputS', async () => {
        const roots = await front.roots()
        const before = cpuTicks(roots)
        const ms = args.tpSeconds * 1000
        const message = { cmd: 'throughput', sockets: args.tpSockets, depth: args.tpDepth, bytes: args.tpBytes, ms, max: TP_MAX_MESSAGES }
        const t0 = performance.now()
        const tp = await askWithin(client, message, ms + 2000 + STEP_SLACK_MS)
        // Read at once: the CPU of the window and of the last echoes, no more.
        const serverCores = tp.sockets ? coresBetween(before, cpuTicks(roots), (performance.now() - t0) / 1000) : null
        return { ...tp, serverCores }
      })
      if (front.reload) r.reload = await step('reloadS', () => reloadStep(front, client, args))
    }
    r.end = await step('closeAllS', () => askWithin(client, { cmd: 'closeAll', timeoutMs: CLOSE_ALL_MS }, CLOSE_ALL_MS + STEP_SLACK_MS))
    return r
  } finally {
    if (client) { client.kill('SIGKILL'); await client.exited }
    if (front) await front.stop()
  }
}

function describe (name, scale, r) {
  const o = r.opened
  const perTunnel = (key) => (o.opened ? ((r.memory.held[key] - r.memory.idle[key]) / o.opened).toFixed(1) : '–')
  const fails = Object.keys(o.failed).length ? ` (${JSON.stringify(o.failed)})` : ''
  const parts = [`  ${name.padEnd(14)} opened ${o.opened}/${o.asked}${fails}; handshake p50 ${o.handshakeMs.p50} ms;` +
    ` over idle ${perTunnel('rssKb')} KB RSS, ${perTunnel('pssKb')} KB Pss per tunnel`]
  if (r.echo) parts.push(`echo p50 ${r.echo.p50} p99 ${r.echo.p99} ms (${r.echo.received}/${r.echo.sent}, client loop p99 ${r.echo.loopDelayP99})`)
  if (r.render?.beside) parts.push(`page p99 ${r.render.alone.p99} alone, ${r.render.beside.p99} beside`)
  if (r.throughput) parts.push(`${r.throughput.perSecond} msg/s (client ${r.throughput.clientCpu}, serving ${r.throughput.serverCores} cores)`)
  if (r.reload) {
    const x = r.reload
    parts.push(`reload ${x.ms} ms (code ${x.code}, graceful ${x.gracefulS} s), ${x.http.failed}/${x.http.requests} GETs failed` +
      `${x.http.failed ? ` ${JSON.stringify(x.http.failedByKind)}` : ''}, closes ${JSON.stringify(x.closes.codes)}` +
      ` from ${x.closes.afterMarkMs.first} to ${x.closes.afterMarkMs.last} ms, ${x.closes.open} still open`)
  }
  for (const [k, why] of Object.entries(r.failed)) parts.push(`${k} failed: ${why}`)
  return parts.join('; ')
}

// ---- the part ---------------------------------------------------------------------------------

async function main (args) {
  for (const f of args.fronts) {
    if (!FRONTS.includes(f)) throw new Error(`unknown front ${f} (one of ${FRONTS.join(', ')})`)
  }
  const notRaised = raiseOpenFiles(args.nofile)
  const nofile = openFilesLimit().soft
  // A relay holds two descriptors per tunnel (and some spare; the warm-up's are closed by then): a scale past
  // what the limit allows is replaced by the largest round one that fits.
  let scales = [...args.scales].sort((a, b) => a - b)
  let fitted = null
  const fits = (n) => descriptorsNeeded('embedded', n, args.workers) <= nofile
  if (args.fit && !fits(scales[scales.length - 1])) {
    const largest = Math.floor((nofile - SPARE_FDS - 1000) / 2 / 1000) * 1000
    const over = scales.filter((s) => !fits(s))
    if (largest > 0) {
      fitted = { asked: over, sockets: largest }
      scales = [...new Set([...scales.filter(fits), largest])].sort((a, b) => a - b)
    }
  }
  const top = scales[scales.length - 1]
  // The client's connection and the front's to its worker, each from the range, plus some spare.
  const ports = ephemeralPorts()
  const needed = 2 * top + 1000
  if (ports.free < needed) {
    console.error(`websocket: ${ports.free} ephemeral ports free in ${ports.lo}-${ports.hi} (${ports.used} in use), ` +
      `${needed} needed for ${top} sockets`)
    process.exit(2)
  }
  const skipped = []
  const names = []
  for (const name of args.fronts) {
    const nginx = () => unavailable('haproxy') ?? (has(NGINX) ? null : `${NGINX} not found`)
    const why = name === 'direct' || name === 'relay' ? null : name === 'nginx-haproxy' ? nginx() : unavailable(name)
    if (why) skipped.push({ front: name, reason: why })
    else names.push(name)
  }
  const why = fitted
    ? `: a relay needs ${descriptorsNeeded('embedded', fitted.asked[0], args.workers)} for ${fitted.asked[0]}, ` +
      `so ${fitted.sockets} are measured instead of ${fitted.asked.join(', ')}`
    : ''
  log(`${names.join(', ')}; ${args.workers} workers each; ${scales.join(', ')} sockets; ` +
    `${ports.free} ephemeral ports free; RLIMIT_NOFILE ${nofile}` +
    (notRaised ? ` (not raised to ${args.nofile}: ${notRaised})` : '') + why)
  const cells = scales.flatMap((scale) => names.map((front) => (
    { front, scale, descriptors: descriptorsNeeded(front, scale, args.workers), runs: [] })))
  const total = args.runs * cells.length
  let done = 0
  for (let run = 0; run < args.runs; run++) {
    for (const scale of scales) {
      log(`${scale} sockets${scale === args.activeAt ? ' (echo, pages beside, throughput, reload)' : ' held idle'}, run ${run + 1}/${args.runs}`)
      const row = cells.filter((c) => c.scale === scale)
      for (let k = 0; k < row.length; k++) {
        const cell = row[(k + run) % row.length]
        progress(done++, total, `${scale} sockets, ${cell.front}, run ${run + 1}/${args.runs}`)
        try {
          const r = await runCell(cell.front, scale, args)
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
    limits: { nofile, nofileWanted: args.nofile, notRaised, fitted: fitted?.sockets ?? null, fittedFor: fitted?.asked ?? null, ports },
    app: 'bench/lib/ws-app.js',
    bin: path.relative(ROOT, args.bin) || args.bin,
    cells: cells.filter((c) => c.runs.length)
  }
}

runPart('websocket', { defaults, quick, main })
