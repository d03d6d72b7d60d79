'use strict'

// Benchmark of a fleet, side by side: hosts × workers behind an edge HAProxy, against the ideal.
//
//   node bench/fleet.js [--duration 15] [--rounds 3] [--rho 0.55,0.8] [--hosts 3] [--per-host 5]
//                       [--median 30] [--sigma 0.8] [--cap 2000] [--seed 42]
//
// Each host is a network namespace running `pool start --agent-port` (its embedded balancer in
// front of `per-host` workers); the edges and the load client share an edge namespace
// (test/helpers/netns.js; without namespaces, loopback addresses). Side by side, over the same
// hosts and workers:
//
//   agent   `pool config edge` as generated: leastconn, each host's maxconn set by its agent to
//           its ready workers, so requests wait at the edge, in one queue for the whole fleet
//   rr      the same config without agent-check and maxconn, `balance roundrobin`: each host
//           gets a third of the requests and queues them itself, in front of its own workers
//   ideal   one FIFO queue over all hosts × per-host workers, zero overhead, computed from the
//           very arrival and service times each run sent (bench/lib/ideal.js)
//   split   what several edges would cost at best: the same arrivals dealt at random to `hosts`
//           edges, each an ideal FIFO queue over its share of every host's workers (a third of
//           each host's, with 3 hosts), computed from the agent edge's runs
//
// It also reports each edge's CPU time per request (HAProxy's utime + stime from /proc), and
// the latency each path adds to a 0 ms request (sequential, a new connection each; median):
// straight to one host's pool, and through each edge. Through the agent edge a request holds
// its host slot for its render plus that much, which the ideal does not pay. And how many
// health checks failed during the runs (a starved host missing its checks is taken out).
//
// The workload is bench/balancer.js's: open-loop Poisson arrivals at utilisation ρ of all the
// workers, lognormal service times (a render blocking its worker with Atomics.wait), a new
// connection per request; each ρ's `duration` is cut into `rounds` runs that visit the edges in
// turn, so a change in the machine's background load falls on both alike.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { makeSchedule, lognormalMean, rng } = require('./lib/schedule')
const { idealLatencies } = require('./lib/ideal')
const { ask, sleep, loadavg } = require('./lib/procs')
const { percentile, median } = require('./lib/stats')
const { createNetwork } = require('../test/helpers/netns')
const { freePorts, waitFor, cleanEnv } = require('../test/helpers')
const { edgeConfig } = require('../lib/config/edge')
const { HaproxyClient } = require('../lib/haproxy/client')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'pool.js')
const APP = path.join(ROOT, 'test', 'fixtures', 'fleet-app.js')
const LOAD = path.join(__dirname, 'lib', 'load.js')
const HAPROXY = process.env.HAPROXY || '/usr/sbin/haproxy'
const EDGES = ['agent', 'rr']

function parseArgs (argv) {
  const args = { duration: 15, rounds: 3, rho: [0.55, 0.8], hosts: 3, perHost: 5, median: 30, sigma: 0.8, cap: 2000, seed: 42 }
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '').replace(/-(\w)/g, (_, c) => c.toUpperCase())
    const value = argv[i + 1]
    if (key === 'rho') args.rho = value.split(',').map(Number)
    else if (key in args) args[key] = Number(value)
    else throw new Error(`unknown option ${argv[i]}`)
  }
  return args
}

const TICK_MS = 1000 / 100 // USER_HZ is 100 on Linux

// CPU time (user + system) a process used so far, in ms.
function cpuMs (pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS
}

// The latencies if the arrivals were dealt at random among `edges` edges, each a FIFO queue over
// workers / edges workers of its own: the best several edges with a fixed share each can do.
function splitLatencies (arrivals, services, workers, edges, seed) {
  const rand = rng(seed)
  const groups = Array.from({ length: edges }, () => ({ at: [], ms: [] }))
  arrivals.forEach((at, i) => {
    const g = groups[Math.floor(rand() * edges)]
    g.at.push(at)
    g.ms.push(services[i])
  })
  return groups.flatMap((g) => Array.from(idealLatencies(g.at, g.ms, workers / edges)))
}

// The rr edge: the agent edge's config without what makes it one queue.
function roundRobin (cfg) {
  return cfg
    .replace(/^(\s*)balance leastconn$/m, '$1balance roundrobin')
    .replace(/^(\s*default-server) maxconn \d+ (.*?) agent-check agent-port \d+ agent-inter \S+$/m, '$1 $2')
}

// One host's pool, in its namespace; quiet (warn) so that logging costs it nothing.
function startHost (net, host, args, ports, dir) {
  return net.spawn(host, process.execPath, [BIN, 'start', APP, '-n', String(args.perHost),
    '--host', host.address, '--port', String(ports.front), '--agent-port', String(ports.agent),
    '--worker-port', String(ports.worker), '--worker-host', net.mode === 'netns' ? '127.0.0.1' : host.address,
    '--control', path.join(dir, `${host.name}.sock`), '--stats-port', '0', '--queue-timeout', '60s',
    '--log-format', 'json', '--log-level', 'warn'], { env: cleanEnv({ FLEET_HOST: host.name }), stdio: ['ignore', 'inherit', 'inherit'] })
}

async function startEdge (net, name, cfg, dir) {
  const file = path.join(dir, `${name}.cfg`)
  fs.writeFileSync(file, cfg)
  const child = net.spawn('edge', HAPROXY, ['-db', '-q', '-f', file], { stdio: ['ignore', 'inherit', 'inherit'] })
  const client = new HaproxyClient({ socket: /^\s*stats socket (\S+)/m.exec(cfg)[1], timeout: 1000 })
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`edge ${name} exited (${child.exitCode})`)
    return (await client.level()) === 'admin'
  }, { timeout: 5000, what: `edge ${name}'s runtime socket` })
  return { client, pid: child.pid } // `ip netns exec` execs: the child is HAProxy itself
}

// Every host UP at every edge, and the agent edge's limit at `perHost` for each.
async function waitForFleet (clients, args) {
  await waitFor(async () => {
    for (const [name, client] of Object.entries(clients)) {
      const servers = Object.values(await client.servers('fleet'))
      if (servers.length !== args.hosts || !servers.every((s) => s.state === 'ready')) return false
      if (name === 'agent' && !servers.every((s) => s.slim === args.perHost)) return false
    }
    return true
  }, { timeout: 30000, interval: 200, what: 'every host UP at both edges' })
}

// bench/lib/load.js in the edge's namespace; IPC passes through `ip netns exec`, which execs.
function startLoad (net) {
  const child = net.spawn('edge', process.execPath, [LOAD], { env: cleanEnv(), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the load client did not start')), 10000)
    child.once('message', (m) => { clearTimeout(t); if (m.ready) resolve(child) })
    child.once('exit', (code) => { clearTimeout(t); reject(new Error(`the load client exited (${code})`)) })
  })
}

async function measure (args, urls, pids, load) {
  const workers = args.hosts * args.perHost
  const shape = { workers, median: args.median, sigma: args.sigma, capMs: args.cap }
  const rows = []
  for (const [k, rho] of args.rho.entries()) {
    const pooled = Object.fromEntries(EDGES.map((e) => [e, { latency: [], ideal: [], errors: 0, cpu: 0 }]))
    const split = []
    let rate = 0
    for (let round = 0; round < args.rounds; round++) {
      const schedule = makeSchedule({ ...shape, rho, durationMs: (args.duration * 1000) / args.rounds, seed: args.seed + 100 * k + round })
      rate = schedule.ratePerSecond
      for (const edge of EDGES) {
        const warm = makeSchedule({ ...shape, rho, durationMs: 500, seed: 7 })
        await ask(load, { cmd: 'run', url: urls[edge], at: warm.at, ms: warm.ms })
        await sleep(300)
        const cpuBefore = cpuMs(pids[edge])
        const r = await ask(load, { cmd: 'run', url: urls[edge], at: schedule.at, ms: schedule.ms })
        const p = pooled[edge]
        p.cpu += cpuMs(pids[edge]) - cpuBefore
        if (edge === 'agent') split.push(...splitLatencies(r.sent, schedule.ms, workers, args.hosts, args.seed + round))
        p.latency.push(...r.latency)
        p.ideal.push(...idealLatencies(r.sent, schedule.ms, workers))
        p.errors += r.status.filter((s) => s !== 200).length
        await sleep(500)
      }
    }
    for (const edge of EDGES) {
      const p = pooled[edge]
      const row = { rho, edge, requests: p.latency.length, errors: p.errors, rps: rate, cpuUsPerRequest: (p.cpu * 1000) / p.latency.length }
      for (const q of [50, 90, 99]) {
        row[`p${q}`] = percentile(p.latency, q)
        row[`ideal${q}`] = percentile(p.ideal, q)
        row[`ratio${q}`] = row[`p${q}`] / row[`ideal${q}`]
      }
      rows.push(row)
      if (edge === 'agent') {
        const ideal = Object.fromEntries([50, 90, 99].map((q) => [q, row[`ideal${q}`]]))
        const splitRow = { rho, edge: `split ${args.hosts}`, requests: split.length, errors: 0, rps: rate }
        for (const q of [50, 90, 99]) Object.assign(splitRow, { [`p${q}`]: percentile(split, q), [`ideal${q}`]: ideal[q], [`ratio${q}`]: percentile(split, q) / ideal[q] })
        rows.push(splitRow)
      }
      console.log(`  ρ=${rho} ${edge.padEnd(5)} p50 ${row.p50.toFixed(1)} ms (ideal ${row.ideal50.toFixed(1)})  p99 ${row.p99.toFixed(1)} ms (ideal ${row.ideal99.toFixed(1)})  errors ${row.errors}`)
    }
  }
  return rows
}

// How often each edge saw a host fail a check or go DOWN during the runs: on a starved machine a
// host's balancer can miss a check's 500 ms, and a host taken out for a second shows in the tail.
async function healthFlaps (clients) {
  const out = {}
  for (const [name, client] of Object.entries(clients)) {
    const servers = Object.values(await client.servers('fleet'))
    const sum = (field) => servers.reduce((n, s) => n + (s[field] || 0), 0)
    out[name] = { chkfail: sum('chkfail'), chkdown: sum('chkdown'), econ: sum('econ'), wretr: sum('wretr') }
  }
  return out
}

// Median latency of sequential 0 ms requests on each path, after a warm-up.
async function addedLatency (urls, load, count = 300) {
  const out = {}
  for (const [name, url] of Object.entries(urls)) {
    await ask(load, { cmd: 'sequential', url, count: 50 })
    out[name] = median((await ask(load, { cmd: 'sequential', url, count })).latency)
  }
  return out
}

const report = []
function out (line) {
  report.push(line)
  console.log(line)
}

function print (args, rows, added, flaps, mode) {
  const mean = lognormalMean(args.median, args.sigma)
  out(`\n## A fleet behind an edge HAProxy: ${args.hosts} hosts × ${args.perHost} workers (${mode}), service time lognormal (median ${args.median} ms, σ ${args.sigma}, mean ${mean.toFixed(1)} ms, cap ${args.cap} ms), Poisson arrivals, ${args.duration} s per edge and ρ (${args.rounds} interleaved rounds), a new connection per request\n`)
  out('agent: `pool config edge` (leastconn, maxconn per host from its agent: one queue at the edge); rr: the same without agent and maxconn, `balance roundrobin` (a queue per host); ideal: one FIFO queue over all the workers, from the same arrivals and service times.\n')
  out(`split ${args.hosts}: computed, not run: the agent runs' arrivals dealt at random to ${args.hosts} edges, each an ideal queue over ${args.hosts * args.perHost / args.hosts} workers (its share of every host), zero overhead. Edge CPU: HAProxy's user + system time per request.\n`)
  out('| ρ | edge | req/s | p50 ms (ideal) | p90 ms (ideal) | p99 ms (ideal) | p50 / ideal | p90 / ideal | p99 / ideal | errors | edge CPU µs/req |')
  out('|---|---|---|---|---|---|---|---|---|---|---|')
  for (const r of rows) {
    const cell = (p) => `${r[`p${p}`].toFixed(1)} (${r[`ideal${p}`].toFixed(1)})`
    const cpu = r.cpuUsPerRequest === undefined ? '-' : r.cpuUsPerRequest.toFixed(0)
    out(`| ${r.rho} | ${r.edge} | ${r.rps.toFixed(0)} | ${cell(50)} | ${cell(90)} | ${cell(99)} | ${r.ratio50.toFixed(3)} | ${r.ratio90.toFixed(3)} | ${r.ratio99.toFixed(3)} | ${r.errors} | ${cpu} |`)
  }
  out(`\nDuring the runs: ${Object.entries(flaps).map(([e, f]) => `${e}: ${f.chkfail} failed health checks (${f.chkdown} hosts taken out), ${f.econ} failed connections to a host, ${f.wretr} retries`).join('; ')}.`)
  out('\n## Latency a path adds (0 ms render, sequential, a new connection each; median)\n')
  out('| path | median ms |')
  out('|---|---|')
  for (const [name, ms] of Object.entries(added)) out(`| ${name} | ${ms.toFixed(3)} |`)
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const started = Date.now()
  const loadAtStart = loadavg()
  console.log(`bench: ${JSON.stringify(args)}; ${os.cpus().length} CPUs, load average ${loadAtStart}`)
  const net = createNetwork({ hosts: args.hosts })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-fleet-'))
  const cleanup = async () => {
    await net.destroy()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => cleanup().then(() => process.exit(130)))
  try {
    console.log(net.mode === 'netns' ? `hosts in network namespaces: ${net.hosts.map((h) => `${h.name} ${h.address}`).join(', ')}` : `no network namespaces (${net.problem}): hosts on loopback`)
    const [front, agent, agentEdge, rrEdge, agentStats, rrStats, worker] = await freePorts(7 + args.perHost)
    const ports = { front, agent, worker }
    for (const host of net.hosts) startHost(net, host, args, ports, dir)
    const common = { hosts: net.hosts.map((h) => `${h.address}:${front}`).join(','), agentPort: agent, workers: args.perHost, host: '127.0.0.1', log: 'none', prefix: dir, queueTimeout: 60000 }
    const agentCfg = edgeConfig({ ...common, port: agentEdge, statsPort: agentStats, socket: path.join(dir, 'agent.sock'), pidFile: path.join(dir, 'agent.pid') })
    const rrCfg = roundRobin(edgeConfig({ ...common, port: rrEdge, statsPort: rrStats, socket: path.join(dir, 'rr.sock'), pidFile: path.join(dir, 'rr.pid') }))
    const rrLines = rrCfg.split('\n').filter((l) => !/^\s*#/.test(l)).join('\n')
    if (/agent-check|maxconn \d|leastconn/.test(rrLines.split('\nbackend ')[1].split('\nfrontend ')[0])) throw new Error('the rr edge still has agent-check, maxconn or leastconn')
    const edges = { agent: await startEdge(net, 'agent', agentCfg, dir), rr: await startEdge(net, 'rr', rrCfg, dir) }
    const clients = { agent: edges.agent.client, rr: edges.rr.client }
    const pids = { agent: edges.agent.pid, rr: edges.rr.pid }
    await waitForFleet(clients, args)
    const load = await startLoad(net)
    const urls = { agent: `http://127.0.0.1:${agentEdge}`, rr: `http://127.0.0.1:${rrEdge}` }
    const before = await healthFlaps(clients)
    const rows = await measure(args, urls, pids, load)
    const after = await healthFlaps(clients)
    const flaps = Object.fromEntries(EDGES.map((e) => [e, Object.fromEntries(Object.keys(after[e]).map((k) => [k, after[e][k] - before[e][k]]))]))
    const added = await addedLatency({ 'one host\'s pool (its embedded balancer)': `http://${net.hosts[0].address}:${front}`, 'edge, agent': urls.agent, 'edge, rr': urls.rr }, load)
    await cleanup()
    print(args, rows, added, flaps, net.mode === 'netns' ? 'each host a network namespace' : 'hosts on loopback addresses')
    out(`\nMade by: \`node bench/fleet.js${process.argv.slice(2).map((a) => ' ' + a).join('')}\` in ${((Date.now() - started) / 1000).toFixed(0)} s on ${os.cpus().length} CPUs (${os.cpus()[0].model}), load average ${loadAtStart} at the start and ${loadavg()} at the end (other work on the machine shows in the numbers).`)
    const results = path.join(__dirname, 'results')
    fs.mkdirSync(results, { recursive: true })
    fs.writeFileSync(path.join(results, 'fleet.md'), report.join('\n').trim() + '\n')
    fs.writeFileSync(path.join(results, 'fleet.json'), JSON.stringify({ args, mode: net.mode, rows, addedLatencyMs: added, healthChecks: flaps }, null, 2) + '\n')
    console.log(`\n(written to ${path.relative(process.cwd(), path.join(results, 'fleet.md'))} and fleet.json)`)
  } catch (err) {
    await cleanup()
    throw err
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
