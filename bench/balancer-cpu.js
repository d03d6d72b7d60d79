'use strict'

// The embedded balancer's own CPU per request, one checkout against another, in turns: each
// round starts a fresh process per side that runs the balancer of that checkout's lib/ (its
// defaults: overload control, budgets, metrics) in front of two plain Node workers answering at
// once, and sends it `requests` keep-alive GETs from autocannon in a child of its own, after a
// warm-up. What counts is that process's CPU (user + system) over the requests: the balancer
// alone, neither the workers nor the load.
//
//   node bench/balancer-cpu.js --a DIR --b DIR [--rounds 5] [--requests 30000] [--connections 8]
//
// DIR: a checkout (its lib/ is required; node_modules may be a link to this one's). Prints each
// round and the median µs per request of each side, and b ÷ a.

const path = require('node:path')
const { execFileSync, spawn, fork } = require('node:child_process')

const WORKER = 'require("node:http").createServer((req, res) => { req.resume(); ' +
  'res.writeHead(200, { "content-length": 3 }); res.end("ok\\n") })' +
  '.listen(0, "127.0.0.1", function () { process.stdout.write(this.address().port + "\\n") })'
const WARM = 3000

function args () {
  const a = { rounds: 5, requests: 30000, connections: 8 }
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1]
  if (!a.a || !a.b) {
    console.error('balancer-cpu: --a DIR and --b DIR are required (two checkouts)')
    process.exit(2)
  }
  return { ...a, rounds: Number(a.rounds), requests: Number(a.requests), connections: Number(a.connections) }
}

// One side's round, in this process: `node bench/balancer-cpu.js --side DIR --requests N`.
async function side (root, requests, connections) {
  const workers = await Promise.all([0, 1].map(async () => {
    const child = spawn(process.execPath, ['-e', WORKER], { stdio: ['ignore', 'pipe', 'inherit'] })
    const port = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(Number(String(d)))))
    return { child, port }
  }))
  const { freePorts } = require('./lib/procs')
  const [port] = await freePorts(1)
  const { createBalancer } = require(path.join(path.resolve(root), 'lib', 'fronts', 'balancer'))
  const logger = Object.fromEntries(['trace', 'debug', 'info', 'warn', 'error', 'fatal'].map((l) => [l, () => {}]))
  const balancer = createBalancer({ port }, { logger })
  await balancer.start()
  workers.forEach(({ child, port }, i) => balancer.workerReady(
    { slot: i + 1, name: `worker${i + 1}`, pid: child.pid, host: '127.0.0.1', port, state: 'ready' }))
  const load = (amount) => new Promise((resolve, reject) => {
    const c = fork(__filename, ['--load', `http://127.0.0.1:${port}/`, String(amount), String(connections)])
    c.once('message', resolve)
    c.once('exit', (code) => code && reject(new Error(`the load exited ${code}`)))
  })
  try {
    await load(WARM)
    const before = process.cpuUsage()
    const r = await load(requests)
    const cpu = process.cpuUsage(before)
    return { usPerRequest: (cpu.user + cpu.system) / r.requests, requests: r.requests, errors: r.errors }
  } finally {
    await balancer.stop()
    for (const { child } of workers) child.kill()
  }
}

function load (url, amount, connections) {
  const autocannon = require('autocannon')
  autocannon({ url, connections, amount }, (err, r) => {
    if (err) throw err
    process.send({ requests: r.requests.total, errors: r.errors + r.non2xx }, () => process.exit(0))
  })
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]

async function main () {
  const argv = process.argv.slice(2)
  if (argv[0] === '--load') return load(argv[1], Number(argv[2]), Number(argv[3]))
  if (argv[0] === '--side') {
    const r = await side(argv[1], Number(argv[3]), Number(argv[5]))
    return console.log(JSON.stringify(r))
  }
  const o = args()
  const us = { a: [], b: [] }
  for (let round = 1; round <= o.rounds; round++) {
    // Which side goes first alternates, so that a trend of the machine's load favours neither.
    for (const key of round % 2 ? ['a', 'b'] : ['b', 'a']) {
      const out = execFileSync(process.execPath,
        [__filename, '--side', o[key], '--requests', String(o.requests), '--connections', String(o.connections)],
        { encoding: 'utf8', timeout: 300000 })
      const r = JSON.parse(out.trim().split('\n').pop())
      us[key].push(r.usPerRequest)
      console.log(`round ${round} ${key} (${o[key]}): ${r.usPerRequest.toFixed(1)} µs per request, ` +
        `${r.requests} requests, ${r.errors} errors`)
    }
  }
  const a = median(us.a)
  const b = median(us.b)
  console.log(`median: a ${a.toFixed(1)} µs, b ${b.toFixed(1)} µs per request; b ÷ a = ${(b / a).toFixed(2)}`)
}

main().catch((err) => { console.error(err); process.exit(1) })
