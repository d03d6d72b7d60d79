'use strict'

// One render on the CPU per worker, not one request (--worker-concurrency, issue 29): closed-loop
// clients (5, 13, 20) and open-loop arrivals (Poisson, ρ 0.5 and 0.8) against pages that await
// 200 ms of data, CPU-bound renders (Atomics.wait: a render without burning a core) and the mix
// (15 ms of CPU, 200 ms of data, 15 ms of CPU), served by the pool with -n = cores at K=1 (one
// request per worker) and at K=16 (admitted by CPU), by Node's cluster on as many workers, and
// by one plain process; pages awaiting data also by a plain Node relay (the minimal balancer at
// K requests per worker, dealt in turn: on such pages as good a rule as any, so it adds a
// relay's hop and nothing else). ρ is the load on today's rule: arrivals per
// second = ρ × workers ÷ the time a request holds its worker at K=1 (200, 30 and 230 ms), a new
// connection each. Each cell: answered req/s, p50 and p99, and the memory (RSS) of the serving
// processes, front included; the ratios the issue's targets read: K against a plain process for
// awaited data, K's p99 against K=1's for CPU-bound renders, the mix against either rule alone
// (the report sets the relay's and one process's p99 beside K's). Each server is warmed (a
// second of each of its pages) before its cells are measured.
//
//   node bench/concurrency.js [--quick] [--durationS 6] [--openS 8] [--repeats 3]
//                             [--clients 5,13,20] [--rhos 0.5,0.8] [--k 16]

const os = require('node:os')
const { runPart, progress, round, log } = require('./lib/part')
const { startFront } = require('./lib/fronts')
const { forkReady, freePorts, ask } = require('./lib/procs')
const { closedLoop } = require('./lib/closed-loop')
const { rssMb } = require('./lib/usage')
const { median, percentile } = require('./lib/stats')
const { makeSchedule } = require('./lib/schedule')

// `ms`: CPU before the data, `rest`: the rest of the query; `holdMs`: how long it holds a worker.
const PAGES = {
  data: { ms: 0, rest: 'wait=200', holdMs: 200, about: 'awaits 200 ms of data' },
  cpu: { ms: 30, rest: '', holdMs: 30, about: 'renders 30 ms on the CPU' },
  mix: { ms: 15, rest: 'wait=200&after=15', holdMs: 230, about: '15 ms CPU, 200 ms data, 15 ms CPU' }
}
const queryOf = ({ ms, rest }) => `ms=${ms}${rest ? `&${rest}` : ''}`

const RELAY = 'Node relay'

// The ways of serving compared, each started once per repeat and given every load on its
// `pages` (all when absent).
function servers (k) {
  return [
    { name: 'pool K=1', start: (workers) => startFront('embedded', { workers, poolArgs: ['--worker-concurrency', '1', '--no-overload-control'] }) },
    { name: `pool K=${k}`, start: (workers) => startFront('embedded', { workers, poolArgs: ['--worker-concurrency', String(k), '--no-overload-control'] }) },
    { name: 'cluster', start: (workers) => startFront('cluster', { workers }) },
    { name: 'plain', start: startPlain },
    { name: RELAY, start: (workers) => startFront('minimal', { workers, cap: k }), pages: ['data'] }
  ]
}

async function startPlain () {
  const [port] = await freePorts(1)
  const child = await forkReady('worker.js', { PORT: String(port) })
  return {
    url: `http://127.0.0.1:${port}`,
    processes: () => ({ front: [], workers: [child.pid] }),
    async stop () { child.kill('SIGKILL'); await child.exited }
  }
}

async function memoryOf (server) {
  const { front, workers } = await server.processes()
  return [...front, ...workers].reduce((sum, pid) => sum + (rssMb(pid) || 0), 0)
}

runPart('concurrency', {
  defaults: { durationS: 6, openS: 8, repeats: 3, clients: [5, 13, 20], rhos: [0.5, 0.8], k: 16, workers: 0, seed: 29 },
  quick: { durationS: 3, openS: 4, repeats: 1 },
  async main (args) {
    const workers = args.workers || (os.availableParallelism ? os.availableParallelism() : os.cpus().length)
    const list = servers(args.k)
    const loads = [...args.clients.map((clients) => ({ clients })), ...args.rhos.map((rho) => ({ rho }))]
    const cells = []
    const total = args.repeats * loads.length * list.reduce((sum, s) => sum + (s.pages ?? Object.keys(PAGES)).length, 0)
    let done = 0
    log(`-n ${workers} (cores), K=1 against K=${args.k}, cluster, one plain process and (pages awaiting data) a plain Node relay; ${args.durationS} s a closed-loop cell, ${args.openS} s an open-loop one, ${args.repeats} repeat(s)`)
    const generator = await forkReady('load.js', {})
    try {
      for (let r = 0; r < args.repeats; r++) {
        for (let i = 0; i < list.length; i++) {
          const s = list[(i + r) % list.length]
          const server = await s.start(workers)
          try {
            const pages = Object.entries(PAGES).filter(([name]) => !s.pages || s.pages.includes(name))
            for (const [, page] of pages) await closedLoop({ url: server.url, connections: 4, durationS: 1, query: queryOf(page) })
            for (const [name, page] of pages) {
              for (const load of loads) {
                progress(done++, total, `${s.name}, ${name}, ${load.clients ? `${load.clients} clients` : `ρ ${load.rho}`}`)
                const summary = load.clients
                  ? (await closedLoop({ url: server.url, connections: load.clients, durationS: args.durationS, query: queryOf(page) })).summary
                  : await openLoop(generator, server.url, page, load.rho, workers, args, r)
                cells.push({ server: s.name, page: name, ...load, repeat: r, rssMb: round(await memoryOf(server), 1), ...pick(summary) })
              }
            }
          } finally {
            await server.stop()
          }
        }
      }
    } finally {
      generator.kill()
    }
    progress(total, total, 'done')
    const table = summarize(cells, list.map((s) => s.name), args)
    for (const line of table.lines) log(line)
    return { workers, k: args.k, pages: PAGES, cells, summary: table.rows, targets: table.targets }
  }
})

function pick ({ ok, failed, rps, offered, p50, p99 }) {
  return { ok, failed, rps: round(rps, 1), ...(offered ? { offered: round(offered, 1) } : {}), p50: round(p50, 1), p99: round(p99, 1) }
}

// Poisson arrivals at ρ of today's rule's capacity, the same seeded schedule for every server; a
// new connection each (the load generator, a process of its own, bench/lib/load.js).
async function openLoop (generator, url, page, rho, workers, args, repeat) {
  // The bench's Poisson schedule at ρ of `workers` servers holding each request `holdMs`.
  const { at, ratePerSecond } = makeSchedule({ rho, workers, durationMs: args.openS * 1000, median: page.holdMs, sigma: 0, capMs: page.holdMs, seed: args.seed + repeat })
  const r = await ask(generator, { cmd: 'run', url, at, ms: at.map(() => page.ms), query: page.rest })
  const ok = r.latency.filter((_, i) => r.status[i] === 200)
  const ends = r.sent.map((s, i) => s + r.latency[i])
  return {
    ok: ok.length,
    failed: r.status.length - ok.length,
    offered: ratePerSecond,
    rps: ok.length / (Math.max(...ends, args.openS * 1000) / 1000),
    p50: percentile(ok, 50),
    p99: percentile(ok, 99)
  }
}

// The median of the repeats of each cell, its lines, and the issue's targets read from them, for
// each load (`clients` closed-loop clients, or open loop at `rho`).
function summarize (cells, names, args) {
  const loads = [...args.clients.map((clients) => ({ clients })), ...args.rhos.map((rho) => ({ rho }))]
  const sameLoad = (a, b) => a.clients === b.clients && a.rho === b.rho
  const label = (load) => load.clients ? `${load.clients} clients` : `ρ ${load.rho}`
  const rows = []
  const lines = ['page  load        server        req/s    p50 ms   p99 ms   RSS MB  failed']
  const of = (server, page, load) => rows.find((x) => x.server === server && x.page === page && sameLoad(x, load))
  for (const page of Object.keys(PAGES)) {
    for (const load of loads) {
      for (const server of names) {
        const runs = cells.filter((c) => c.server === server && c.page === page && sameLoad(c, load))
        if (runs.length === 0) continue // a server measured on some pages only
        const row = { server, page, ...load }
        for (const key of ['rps', 'p50', 'p99', 'rssMb', 'failed']) row[key] = median(runs.map((c) => c[key]))
        if (load.rho) row.offered = runs[0]?.offered
        rows.push(row)
        lines.push(`${page.padEnd(5)} ${label(load).padEnd(11)} ${server.padEnd(12)} ${fmt(row.rps, 8)} ${fmt(row.p50, 8)} ${fmt(row.p99, 8)} ${fmt(row.rssMb, 8)} ${fmt(row.failed, 7)}`)
      }
    }
  }
  const kName = `pool K=${args.k}`
  const targets = loads.map((load) => {
    const at = (server, page) => of(server, page, load)
    const ratio = (a, b) => round(a / b, 3)
    return {
      ...load,
      dataRpsVsPlain: ratio(at(kName, 'data').rps, at('plain', 'data').rps), // ≥ 0.9
      dataP99VsCluster: ratio(at(kName, 'data').p99, at('cluster', 'data').p99), // ≤ 1
      cpuP99VsK1: ratio(at(kName, 'cpu').p99, at('pool K=1', 'cpu').p99), // ≤ 1.02
      mixRpsVsK1: ratio(at(kName, 'mix').rps, at('pool K=1', 'mix').rps),
      mixP99VsK1: ratio(at(kName, 'mix').p99, at('pool K=1', 'mix').p99),
      mixP99VsCluster: ratio(at(kName, 'mix').p99, at('cluster', 'mix').p99)
    }
  })
  lines.push('', `targets (${kName}): data req/s ÷ plain ≥ 0.9, data p99 ÷ cluster ≤ 1, CPU p99 ÷ K=1 ≤ 1.02, the mix no worse than K=1`)
  for (const t of targets) {
    lines.push(`  ${label(t)}: data ${t.dataRpsVsPlain}× plain's req/s, p99 ${t.dataP99VsCluster}× cluster's; CPU p99 ${t.cpuP99VsK1}× K=1's; mix req/s ${t.mixRpsVsK1}×, p99 ${t.mixP99VsK1}× K=1's`)
  }
  return { rows, lines, targets }
}

function fmt (x, width) {
  return (x === null || x === undefined || Number.isNaN(x) ? '–' : String(round(x, 1))).padStart(width)
}
