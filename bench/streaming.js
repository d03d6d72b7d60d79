'use strict'

// Streamed pages: how soon the first byte of a page that streams reaches its client through each
// front, and how long a slow reader of one holds a worker.
//
//   node bench/streaming.js [--quick] [--fronts direct,pool-worker,embedded,embedded-k1,haproxy,nginx-haproxy,cluster,pm2]
//                           [--single 10] [--runs 5] [--workers 15] [--rho 0.8] [--seconds 6]
//                           [--median 30] [--sigma 0.8] [--late 300] [--shell 4] [--rest 60]
//                           [--hold 500] [--rate 100] [--seed 42] [--results DIR]
//
// The page (the bench app's `late=`): a shell of `shell` KB written as soon as its render is
// done, then the rest (`rest` KB) `late` ms later (a timer: the data the page waits for, no CPU),
// chunked, as React's renderToPipeableStream writes a page with a Suspense boundary. "First
// byte": the first byte of the answer's body, the shell, what a browser can paint first.
//
//   one client   `single` pages one after the other per run, a new connection each, render 0:
//                the time to the first byte and to the last, per front, and from a pool worker
//                reached on its own port (`pool-worker`: what a front adds to a pool's worker).
//   ρ            open-loop Poisson arrivals (bench/lib/load.js, a process of its own), renders
//                lognormal (`median`, `sigma`), then the rest `late` ms later, in two shapes:
//                `wait`, the rest's data awaited (a timer: the worker's event loop is free, and
//                the embedded balancer at its default K, Node's cluster and PM2 give it other
//                requests meanwhile; HAProxy and --worker-concurrency 1 do not); `render`, the
//                rest rendered (the event loop blocked, as in every front). ρ counts the `late`
//                ms either way, since a worker taking one request at a time is held through it.
//                First byte and last, p50 and p99, per run.
//   slow reader  one client reading a `hold` KB page (the shell, the rest `late` ms later) at
//                `rate` KB/s: how long its worker is held, as the worker reports it (from the
//                request's headers to its last byte handed to the kernel), per front with a worker
//                of its own (bench/lib/busy-fronts.js): direct, embedded, HAProxy, nginx → HAProxy.
//                Under cluster and PM2 the worker writes to the client's own socket, as direct.
//
// Fronts (bench/lib/fronts.js), each with `workers` workers: `pool start` (embedded), the same
// with --worker-concurrency 1 (embedded-k1), `pool start --balancer haproxy` with the generated
// config, nginx from the generated config in front of that same HAProxy, Node's cluster, PM2
// cluster mode; direct is one worker reached without a front (one client only), and so is a pool
// worker on its own port. Runs visit the fronts in turn, one further along each run. Loopback
// only.

const http = require('node:http')
const { forkReady, freePorts, ask, sleep } = require('./lib/procs')
const { makeSchedule, lognormalMean } = require('./lib/schedule')
const { percentile } = require('./lib/stats')
const { startFront, unavailable } = require('./lib/fronts')
const { startGeneratedNginx, has, NGINX } = require('./lib/stack')
const { startBusyFronts } = require('./lib/busy-fronts')
const { slowRead } = require('./lib/buffering')
const { runPart, progress, interleaved, round, log } = require('./lib/part')

const FRONTS = ['direct', 'pool-worker', 'embedded', 'embedded-k1', 'haproxy', 'nginx-haproxy', 'cluster', 'pm2']
const SHAPES = { wait: '', render: '&lateCpu=1' }
const defaults = { fronts: FRONTS, shapes: Object.keys(SHAPES), single: 10, runs: 5, workers: 15, rho: 0.8, seconds: 6, median: 30, sigma: 0.8, cap: 2000, late: 300, shell: 4, rest: 60, hold: 500, rate: 100, seed: 42 }
const quick = { single: 4, runs: 2, seconds: 2 }

// ---- the fronts -------------------------------------------------------------------------------

// Fronts measured under a name of their own: embedded-k1 is the embedded balancer with one
// request per worker, beside its default K.
const VARIANTS = { 'embedded-k1': { kind: 'embedded', poolArgs: ['--worker-concurrency', '1'] } }

async function startFronts (args) {
  const fronts = {}
  const skipped = []
  const wanted = (name) => args.fronts.includes(name)
  if (wanted('direct')) {
    const [port] = await freePorts(1)
    await forkReady('worker.js', { PORT: String(port) })
    fronts.direct = { url: `http://127.0.0.1:${port}`, loaded: false }
  }
  // nginx → HAProxy is nginx in front of the haproxy front's HAProxy, measured in its own turn.
  for (const name of ['embedded', 'embedded-k1', 'haproxy', 'cluster', 'pm2']) {
    if (!wanted(name) && !(name === 'haproxy' && wanted('nginx-haproxy'))) continue
    const { kind, poolArgs } = VARIANTS[name] ?? { kind: name, poolArgs: [] }
    const why = unavailable(kind)
    if (why) { skipped.push({ front: name, reason: why }); continue }
    try {
      fronts[name] = { ...await startFront(kind, { workers: args.workers, poolArgs }), loaded: true }
    } catch (err) {
      skipped.push({ front: name, reason: err.message.split('\n')[0] })
    }
  }
  if (wanted('nginx-haproxy')) {
    if (!fronts.haproxy) skipped.push({ front: 'nginx-haproxy', reason: 'no HAProxy front' })
    else if (!has(NGINX)) skipped.push({ front: 'nginx-haproxy', reason: `${NGINX} not found` })
    else {
      const [port] = await freePorts(1)
      const nginx = await startGeneratedNginx({ port, haproxySocket: fronts.haproxy.haproxy.httpSocket })
      fronts['nginx-haproxy'] = { url: nginx.url, loaded: true }
    }
  }
  if (fronts.haproxy && !wanted('haproxy')) fronts.haproxy.measured = false
  if (wanted('pool-worker')) {
    const pool = fronts.embedded ?? fronts.haproxy
    if (pool) fronts['pool-worker'] = { url: pool.workerUrl, loaded: false }
    else skipped.push({ front: 'pool-worker', reason: 'no pool front' })
  }
  return { fronts, skipped, names: FRONTS.filter((f) => fronts[f] && fronts[f].measured !== false) }
}

// ---- one client --------------------------------------------------------------------------------

// One page on a new connection: ms to the first byte of its body, and to its end.
function page (url, query) {
  const started = performance.now()
  return new Promise((resolve) => {
    let first = null
    const req = http.get(`${url}/?${query}`, { agent: false }, (res) => {
      res.once('data', () => { first = performance.now() - started })
      res.resume()
      res.on('end', () => resolve({ first, total: performance.now() - started, status: res.statusCode }))
    })
    req.setTimeout(30000, () => req.destroy(new Error('timeout')))
    req.on('error', () => resolve({ first: null, total: null, status: 0 }))
  })
}

async function singleRun (url, args) {
  const pages = []
  for (let i = 0; i < args.single; i++) pages.push(await page(url, `ms=0&late=${args.late}&shell=${args.shell}&kb=${args.rest}`))
  const ok = pages.filter((p) => p.status === 200 && p.first !== null)
  const firsts = ok.map((p) => p.first)
  const totals = ok.map((p) => p.total)
  return {
    pages: pages.length,
    errors: pages.length - ok.length,
    first: { p50: round(percentile(firsts, 50), 2), min: round(Math.min(...firsts), 2), max: round(Math.max(...firsts), 2) },
    total: { p50: round(percentile(totals, 50), 1), max: round(Math.max(...totals), 1) }
  }
}

// ---- under load ------------------------------------------------------------------------------

// The schedule's renders are lognormal; each request also holds its worker `late` ms, so the
// arrival rate for a load ρ counts both.
function loadSchedule (args, run) {
  const render = lognormalMean(args.median, args.sigma)
  const rho = args.rho * render / (render + args.late)
  return makeSchedule({ rho, workers: args.workers, durationMs: args.seconds * 1000, median: args.median, sigma: args.sigma, capMs: args.cap, seed: args.seed + run })
}

async function loadedRun (load, url, schedule, shape, args) {
  const query = `late=${args.late}&shell=${args.shell}&kb=${args.rest}${SHAPES[shape]}`
  const warm = makeSchedule({ rho: 0.3, workers: args.workers, durationMs: 500, median: args.median, sigma: args.sigma, capMs: args.cap, seed: 7 })
  await ask(load, { cmd: 'run', url, at: warm.at, ms: warm.ms, query })
  await sleep(args.late + 200)
  const r = await ask(load, { cmd: 'run', url, at: schedule.at, ms: schedule.ms, query, firstByte: true })
  const ok = r.status.map((s, i) => s === 200 && r.first[i] !== null)
  const firsts = r.first.filter((_, i) => ok[i])
  const totals = r.latency.filter((_, i) => ok[i])
  return {
    requests: r.status.length,
    errors: ok.filter((x) => !x).length,
    lag: r.lag,
    rps: round(schedule.ratePerSecond, 1),
    first: { p50: round(percentile(firsts, 50), 2), p99: round(percentile(firsts, 99), 2) },
    total: { p50: round(percentile(totals, 50), 1), p99: round(percentile(totals, 99), 1) }
  }
}

// ---- a slow reader ----------------------------------------------------------------------------

async function holdRun (front, args, run) {
  const id = `hold-${run}`
  const restKb = Math.max(0, args.hold - args.shell)
  const rate = args.rate * 1024
  const expectedMs = (args.hold * 1024 / rate) * 1000
  const client = await slowRead(`${front.url}/?ms=0&late=${args.late}&shell=${args.shell}&kb=${restKb}&id=${id}`, rate, 2 * expectedMs + 5000)
  // The worker's report arrives once its side of the connection is closed.
  for (let i = 0; i < 50 && !front.worker.busy.has(id); i++) await sleep(100)
  const busy = front.worker.busy.get(id)
  return { busyMs: busy ? round(busy.busyMs, 1) : null, finished: busy ? busy.finished : null, clientMs: round(client.ms, 0), complete: client.complete }
}

// ---- the part ---------------------------------------------------------------------------------

async function main (args) {
  for (const f of args.fronts) if (!FRONTS.includes(f)) throw new Error(`unknown front ${f} (one of ${FRONTS.join(', ')})`)
  const { fronts, skipped, names } = await startFronts(args)
  const load = await forkReady('load.js', {})
  const single = names.map((front) => ({ front, runs: [] }))
  for (const shape of args.shapes) if (!(shape in SHAPES)) throw new Error(`unknown shape ${shape} (one of ${Object.keys(SHAPES).join(', ')})`)
  const loaded = args.shapes.flatMap((shape) => names.filter((n) => fronts[n].loaded).map((front) => ({ front, shape, rho: args.rho, runs: [] })))

  // Warm the JIT and the connections of every front before anything counts.
  for (const name of names) for (let i = 0; i < 5; i++) await page(fronts[name].url, `ms=0&late=0&shell=${args.shell}&kb=${args.rest}`)

  log(`one client: ${args.shell} KB shell, ${args.rest} KB ${args.late} ms later`)
  await interleaved({
    repeats: args.runs,
    cells: names,
    label: (name) => `one client, ${name}`,
    run: async (name) => {
      const r = await singleRun(fronts[name].url, args)
      single.find((c) => c.front === name).runs.push(r)
      log(`  ${name.padEnd(14)} first byte p50 ${r.first.p50} ms (min ${r.first.min}, max ${r.first.max})  total p50 ${r.total.p50} ms  errors ${r.errors}`)
    }
  })

  log(`ρ ${args.rho}: ${args.workers} workers, renders lognormal (median ${args.median} ms), the rest ${args.late} ms later`)
  await interleaved({
    repeats: args.runs,
    cells: loaded,
    label: (c) => `ρ ${args.rho}, ${c.shape}, ${c.front}`,
    run: async (cell, r) => {
      const schedule = loadSchedule(args, r) // the same requests on every front in a run
      const got = await loadedRun(load, fronts[cell.front].url, schedule, cell.shape, args)
      cell.runs.push(got)
      log(`  ${cell.shape.padEnd(6)} ${cell.front.padEnd(14)} ${got.rps} req/s  first byte p50 ${got.first.p50} p99 ${got.first.p99} ms  total p50 ${got.total.p50} p99 ${got.total.p99} ms  send lag p99 ${got.lag?.p99} ms  errors ${got.errors}`)
      await sleep(300)
    }
  })

  for (const f of Object.values(fronts)) if (f.stop) await f.stop()

  log(`slow reader: ${args.hold} KB at ${args.rate} KB/s`)
  const busyFronts = await startBusyFronts()
  const hold = busyFronts.fronts.map((f) => ({ front: f.name, runs: [] }))
  await interleaved({
    repeats: args.runs,
    cells: busyFronts.fronts,
    label: (f) => `slow reader, ${f.name}`,
    run: async (f, r) => {
      const got = await holdRun(f, args, r)
      hold.find((c) => c.front === f.name).runs.push(got)
      log(`  ${f.name.padEnd(14)} worker held ${got.busyMs} ms, client ${got.clientMs} ms${got.complete ? '' : ' (gave up)'}`)
    }
  })
  progress(1, 1, 'done')
  return {
    fronts: names,
    skipped: [...skipped, ...busyFronts.skipped.map((s) => ({ ...s, reason: `slow reader: ${s.reason}` }))],
    page: { shellKb: args.shell, restKb: args.rest, lateMs: args.late, renderMedianMs: args.median },
    single,
    loaded,
    hold
  }
}

runPart('streaming', { defaults, quick, main })
