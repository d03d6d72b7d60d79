'use strict'

// Clients that read nothing (issue 38, row 1): what they cost the clients that read. Each shape
// starts a pool of the bench app (`pool start`, its defaults unless the shape says otherwise),
// measures the good clients alone, opens the non-readers (each asks for a large response and
// never reads a byte of it), waits for them to fill what they can, and measures the good clients
// again beside them; the ratio of the two is the figure, with the workers killed meanwhile.
//
//   node bench/non-readers.js [--quick] [--shapes 40,80,200,4@16m,4@k1] [--workers 4]
//                             [--bigKb 8192] [--pageKb 500] [--goodClients 2] [--window 3]
//                             [--settle 2] [--bin bin/pool.js] [--results DIR]
//
// A shape is N (non-readers, at the defaults), N@SIZE (with --response-budget SIZE) or N@k1
// (with --worker-concurrency 1). The good clients fetch pages of `pageKb` one after the other,
// `goodClients` at a time, for `window` s. `--bin` runs another checkout's `pool` (the code before
// a change, side by side). Loopback only; every process is stopped at the end.

const net = require('node:net')
const http = require('node:http')
const path = require('node:path')
const { runPart, progress, round, log, sleep } = require('./lib/part')
const { startPoolProcess, BIN } = require('./lib/pool-process')
const { freePorts } = require('./lib/procs')

const defaults = { shapes: ['40', '80', '200', '4@16m', '4@k1'], workers: 4, bigKb: 8192, pageKb: 500, goodClients: 2, window: 3, settle: 2, bin: BIN }
const quick = { shapes: ['40', '4@16m'], window: 2, settle: 1 }

function parseShape (shape) {
  const [n, variant] = String(shape).split('@')
  const flags = variant === undefined ? [] : variant === 'k1' ? ['--worker-concurrency', '1'] : ['--response-budget', variant]
  return { name: String(shape), clients: Number(n), flags }
}

// One page; resolves true when it came whole within 10 s.
function page (port, kb) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: `/?kb=${kb}`, agent: false }, (res) => {
      let n = 0
      res.on('data', (d) => { n += d.length })
      res.on('end', () => resolve(res.statusCode === 200 && n === kb * 1024))
      res.on('error', () => resolve(false))
    })
    req.setTimeout(10000, () => req.destroy())
    req.on('error', () => resolve(false))
  })
}

// Pages served whole over `ms`, `clients` at a time, each after the other.
async function pagesIn (port, { kb, clients, ms }) {
  const until = performance.now() + ms
  let served = 0
  let failed = 0
  await Promise.all(Array.from({ length: clients }, async () => {
    while (performance.now() < until) {
      if (await page(port, kb)) served++
      else failed++
    }
  }))
  return { served, failed, perSecond: round(served / (ms / 1000), 1) }
}

function nonReaders (port, n, kb) {
  return Array.from({ length: n }, (_, i) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(`GET /?kb=${kb}&reader=none${i} HTTP/1.1\r\nHost: bench\r\n\r\n`))
    socket.pause()
    socket.on('error', () => {})
    return socket
  })
}

async function measure (shape, args) {
  const ports = await freePorts(args.workers + 1)
  const killed = []
  const pool = startPoolProcess(['-n', String(args.workers), '--port', String(ports[0]), '--worker-port', String(ports[1]), '--access-log', 'false', ...shape.flags], {
    bin: args.bin,
    onLine: (line) => { if (line.event === 'hung' || (line.event === 'exit' && line.reason !== 'stop')) killed.push(line.event) }
  })
  try {
    await pool.started
    const good = { kb: args.pageKb, clients: args.goodClients, ms: args.window * 1000 }
    await pagesIn(ports[0], { ...good, ms: 500 }) // warm-up
    const alone = await pagesIn(ports[0], good)
    const sockets = nonReaders(ports[0], shape.clients, args.bigKb)
    await sleep(args.settle * 1000)
    const beside = await pagesIn(ports[0], good)
    const connected = sockets.filter((s) => !s.destroyed).length
    for (const s of sockets) s.destroy()
    return { shape: shape.name, clients: shape.clients, flags: shape.flags, alone, beside, ratio: alone.served > 0 ? round(beside.served / alone.served, 2) : null, killed: killed.length, stillConnected: connected }
  } finally {
    await pool.stop()
  }
}

async function main (args) {
  const rows = []
  const shapes = args.shapes.map(parseShape)
  for (let i = 0; i < shapes.length; i++) {
    progress(i, shapes.length, shapes[i].name)
    const row = await measure(shapes[i], args)
    rows.push(row)
    log(`  ${row.shape.padEnd(6)} alone ${row.alone.perSecond} pages/s, beside ${row.clients} non-readers ${row.beside.perSecond} (${row.ratio}×, ${row.beside.failed} failed); workers killed ${row.killed}`)
  }
  progress(shapes.length, shapes.length, 'done')
  return { bin: path.relative(path.join(__dirname, '..'), args.bin) || args.bin, rows }
}

runPart('non-readers', { defaults, quick, main })
