'use strict'

// One render on the CPU per worker, not one request (--worker-concurrency, issue 29): closed-loop
// clients (5, 13, 20) against pages that await 200 ms of data, CPU-bound renders (Atomics.wait:
// a render without burning a core) and the mix (15 ms of CPU, 200 ms of data, 15 ms of CPU),
// served by the pool with -n = cores at K=1 (one request per worker) and at K=4 (admitted by
// CPU), by Node's cluster on as many workers, and by one plain process. Each cell: answered
// req/s, p50 and p99, and the memory (RSS) of the serving processes, front included; the
// ratios the issue's targets read: K=4 against a plain process for awaited data, K=4's p99
// against K=1's for CPU-bound renders, the mix against either rule alone.
//
//   node bench/concurrency.js [--quick] [--durationS 10] [--repeats 3] [--clients 5,13,20] [--k 4]

const os = require('node:os')
const { runPart, progress, round, log } = require('./lib/part')
const { startFront } = require('./lib/fronts')
const { forkReady, freePorts } = require('./lib/procs')
const { closedLoop } = require('./lib/closed-loop')
const { rssMb } = require('./lib/usage')
const { median } = require('./lib/stats')

const PAGES = {
  data: { query: 'wait=200', about: 'awaits 200 ms of data' },
  cpu: { query: 'ms=30', about: 'renders 30 ms on the CPU' },
  mix: { query: 'ms=15&wait=200&after=15', about: '15 ms CPU, 200 ms data, 15 ms CPU' }
}

// The ways of serving compared, each started once per repeat and given every page and load.
function servers (k) {
  return [
    { name: 'pool K=1', start: (workers) => startFront('embedded', { workers, poolArgs: ['--worker-concurrency', '1', '--no-overload-control'] }) },
    { name: `pool K=${k}`, start: (workers) => startFront('embedded', { workers, poolArgs: ['--worker-concurrency', String(k), '--no-overload-control'] }) },
    { name: 'cluster', start: (workers) => startFront('cluster', { workers }) },
    { name: 'plain', start: startPlain }
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
  defaults: { durationS: 10, repeats: 3, clients: [5, 13, 20], k: 4, workers: 0 },
  quick: { durationS: 3, repeats: 1 },
  async main (args) {
    const workers = args.workers || (os.availableParallelism ? os.availableParallelism() : os.cpus().length)
    const list = servers(args.k)
    const cells = []
    const total = args.repeats * list.length * Object.keys(PAGES).length * args.clients.length
    let done = 0
    log(`-n ${workers} (cores), K=1 against K=${args.k}, cluster and one plain process; ${args.durationS} s a cell, ${args.repeats} repeat(s)`)
    for (let r = 0; r < args.repeats; r++) {
      for (let i = 0; i < list.length; i++) {
        const s = list[(i + r) % list.length]
        const server = await s.start(workers)
        try {
          for (const [page, { query }] of Object.entries(PAGES)) {
            for (const clients of args.clients) {
              progress(done++, total, `${s.name}, ${page}, ${clients} clients`)
              const run = await closedLoop({ url: server.url, connections: clients, durationS: args.durationS, query })
              cells.push({ server: s.name, page, clients, repeat: r, rssMb: round(await memoryOf(server), 1), ...pick(run.summary) })
            }
          }
        } finally {
          await server.stop()
        }
      }
    }
    progress(total, total, 'done')
    const table = summarize(cells, list.map((s) => s.name), args)
    for (const line of table.lines) log(line)
    return { workers, k: args.k, pages: PAGES, cells, summary: table.rows, targets: table.targets }
  }
})

function pick ({ ok, failed, rps, p50, p99 }) {
  return { ok, failed, rps: round(rps, 1), p50: round(p50, 1), p99: round(p99, 1) }
}

// The median of the repeats of each cell, its lines, and the targets read from them.
function summarize (cells, names, args) {
  const rows = []
  const lines = ['page  clients  server        req/s    p50 ms   p99 ms   RSS MB  failed']
  const of = (server, page, clients) => rows.find((x) => x.server === server && x.page === page && x.clients === clients)
  for (const page of Object.keys(PAGES)) {
    for (const clients of args.clients) {
      for (const server of names) {
        const runs = cells.filter((c) => c.server === server && c.page === page && c.clients === clients)
        const row = { server, page, clients }
        for (const key of ['rps', 'p50', 'p99', 'rssMb', 'failed']) row[key] = median(runs.map((c) => c[key]))
        rows.push(row)
        lines.push(`${page.padEnd(5)} ${String(clients).padStart(7)}  ${server.padEnd(12)} ${fmt(row.rps, 8)} ${fmt(row.p50, 8)} ${fmt(row.p99, 8)} ${fmt(row.rssMb, 8)} ${fmt(row.failed, 7)}`)
      }
    }
  }
  const kName = `pool K=${args.k}`
  const targets = args.clients.map((clients) => {
    const data = of(kName, 'data', clients)
    const plainData = of('plain', 'data', clients)
    const clusterData = of('cluster', 'data', clients)
    const cpuK = of(kName, 'cpu', clients)
    const cpu1 = of('pool K=1', 'cpu', clients)
    const mixK = of(kName, 'mix', clients)
    const mix1 = of('pool K=1', 'mix', clients)
    return {
      clients,
      dataRpsVsPlain: round(data.rps / plainData.rps, 3), // ≥ 0.9
      dataP99VsCluster: round(data.p99 / clusterData.p99, 3), // ≤ 1
      cpuP99VsK1: round(cpuK.p99 / cpu1.p99, 3), // ≤ 1.02
      mixRpsVsK1: round(mixK.rps / mix1.rps, 3),
      mixP99VsK1: round(mixK.p99 / mix1.p99, 3)
    }
  })
  lines.push('', `targets (${kName}): data req/s ÷ plain ≥ 0.9, data p99 ÷ cluster ≤ 1, CPU p99 ÷ K=1 ≤ 1.02`)
  for (const t of targets) lines.push(`  ${t.clients} clients: data ${t.dataRpsVsPlain}× plain's req/s, p99 ${t.dataP99VsCluster}× cluster's; CPU p99 ${t.cpuP99VsK1}× K=1's; mix req/s ${t.mixRpsVsK1}×, p99 ${t.mixP99VsK1}× K=1's`)
  return { rows, lines, targets }
}

function fmt (x, width) {
  return (x === null || x === undefined || Number.isNaN(x) ? '–' : String(round(x, 1))).padStart(width)
}
