'use strict'

// Benchmark of a fleet, side by side: hosts × workers behind an edge HAProxy, against the ideal.
//
//   node bench/fleet.js [--quick] [--runs 4] [--seconds 3] [--rho 0.55,0.8] [--hosts 3] [--perHost 5]
//                       [--median 30] [--sigma 0.8] [--cap 2000] [--seed 42] [--results DIR]
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
// Discovery (`--dns-rounds`, after the rest): a third edge made by `pool config edge --discover`,
// dnsmasq beside it answering for the hosts (test/helpers/dns.js). Each round, under open-loop load
// at ρ 0.5 of the hosts in DNS, the last host's record is added (how long until the edge sends it
// its first request: `joinMs`), then the host leaves as Kubernetes takes out a pod: its record
// removed and its pool SIGTERMed at once (the requests that failed meanwhile: `failed`).
//
// The workload is bench/balancer.js's: open-loop Poisson arrivals at utilisation ρ of all the
// workers, lognormal service times (a render blocking its worker with Atomics.wait), a new
// connection per request; each ρ has `runs` runs of `seconds`, each one schedule sent to both
// edges in turn, so a change in the machine's background load falls on both alike. The report
// shows the median of the runs with a bootstrap 95% interval; a run whose load generator fell
// behind its schedule (its send lag) is set aside.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { makeSchedule, lognormalMean, rng } = require('./lib/schedule')
const { idealLatencies } = require('./lib/ideal')
const { ask, sleep, onStopAll } = require('./lib/procs')
const { percentile, median } = require('./lib/stats')
const { runPart, progress, round, log } = require('./lib/part')
const { poolConfig, HaproxyClient } = require('./lib/internals')
const { createNetwork } = require('../test/helpers/netns')
const { DnsServer, dnsProblem } = require('../test/helpers/dns')
const { freePorts, waitFor, cleanEnv } = require('../test/helpers')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'pool.js')
const APP = path.join(ROOT, 'test', 'fixtures', 'fleet-app.js')
const LOAD = path.join(__dirname, 'lib', 'load.js')
const HAPROXY = process.env.HAPROXY || '/usr/sbin/haproxy'
const EDGES = ['agent', 'rr']

const defaults = { runs: 4, seconds: 3, rho: [0.55, 0.8], hosts: 3, perHost: 5, median: 30, sigma: 0.8, cap: 2000, seed: 42, dnsRounds: 5, resolveInter: 500 }
const quick = { runs: 2, seconds: 2, rho: [0.8], dnsRounds: 2 }
const DNS_NAME = 'pool.fleet.bench'

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

const percentiles = (latency, ideal) => Object.fromEntries([50, 90, 99].flatMap((q) => [[`p${q}`, round(percentile(latency, q), 3)], [`ideal${q}`, round(percentile(ideal, q), 3)]]))

// Every ρ, `runs` times: one schedule sent to each edge in turn. Cells: { rho, edge, runs };
// the `split` cell is the model (computed from the agent edge's runs, not run).
async function measure (args, urls, pids, load) {
  const workers = args.hosts * args.perHost
  const shape = { workers, median: args.median, sigma: args.sigma, capMs: args.cap }
  const split = `split ${args.hosts}`
  const cells = args.rho.flatMap((rho) => [...EDGES, split].map((edge) => ({ rho, edge, model: edge === split, runs: [] })))
  const cell = (rho, edge) => cells.find((c) => c.rho === rho && c.edge === edge)
  const total = args.runs * args.rho.length * EDGES.length
  let done = 0
  for (let run = 0; run < args.runs; run++) {
    for (const [k, rho] of args.rho.entries()) {
      const schedule = makeSchedule({ ...shape, rho, durationMs: args.seconds * 1000, seed: args.seed + 100 * k + run })
      for (let j = 0; j < EDGES.length; j++) {
        const edge = EDGES[(j + run) % EDGES.length]
        progress(done++, total, `ρ ${rho} ${edge}, run ${run + 1}/${args.runs}`)
        const warm = makeSchedule({ ...shape, rho, durationMs: 500, seed: 7 })
        await ask(load, { cmd: 'run', url: urls[edge], at: warm.at, ms: warm.ms })
        await sleep(300)
        const cpuBefore = cpuMs(pids[edge])
        const r = await ask(load, { cmd: 'run', url: urls[edge], at: schedule.at, ms: schedule.ms })
        const cpu = cpuMs(pids[edge]) - cpuBefore
        const ideal = Array.from(idealLatencies(r.sent, schedule.ms, workers))
        const ok = r.status.map((x) => x === 200)
        const latency = r.latency.filter((_, i) => ok[i])
        const result = { requests: r.status.length, errors: ok.filter((x) => !x).length, rps: round(schedule.ratePerSecond, 1), cpuUsPerRequest: round((cpu * 1000) / r.status.length, 0), lag: r.lag, ...percentiles(latency, ideal) }
        cell(rho, edge).runs.push(result)
        if (edge === 'agent') {
          // The model: the same arrivals dealt at random to `hosts` edges, each an ideal queue.
          const dealt = splitLatencies(r.sent, schedule.ms, workers, args.hosts, args.seed + run)
          cell(rho, split).runs.push({ requests: dealt.length, errors: 0, rps: result.rps, lag: r.lag, ...percentiles(dealt, ideal) })
        }
        log(`  ρ=${rho} ${edge.padEnd(5)} p50 ${result.p50.toFixed(1)} ms (ideal ${result.ideal50.toFixed(1)})  p99 ${result.p99.toFixed(1)} ms (ideal ${result.ideal99.toFixed(1)})  send lag p99 ${r.lag?.p99} ms  errors ${result.errors}`)
        await sleep(500)
      }
    }
  }
  progress(total, total, 'done')
  return cells
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

// dnsmasq and an edge that finds the hosts by DNS (all but the last, at first), then the rounds.
async function discoveryEdge ({ net, args, dir, ports, hosts, load, agentClient }) {
  const [dnsPort, port, stats] = await freePorts(3)
  const dns = new DnsServer({ net, dir, port: dnsPort })
  await dns.start()
  await dns.set(DNS_NAME, net.hosts.slice(0, -1).map((h) => h.address))
  const cfg = poolConfig('edge', ['--discover', `${DNS_NAME}:${ports.front}`, '--nameservers', dns.nameserver, '--resolve-inter', `${args.resolveInter}ms`,
    '--max-hosts', args.hosts + 1, '--agent-port', ports.agent, '-n', args.perHost, '--host', '127.0.0.1', '--log', 'none', '--prefix', dir,
    '--queue-timeout', '60s', '--port', port, '--stats-port', stats, '--socket', path.join(dir, 'dns.sock'), '--pid-file', path.join(dir, 'dns.pid')])
  const { client } = await startEdge(net, 'dns', cfg, dir)
  const found = async () => Object.values(await client.servers('fleet')).filter((s) => s.state === 'ready' && s.slim === args.perHost)
  await waitFor(async () => (await found()).length === args.hosts - 1, { timeout: 30000, interval: 200, what: 'the DNS edge to find its hosts' })
    .catch(async (err) => { throw new Error(`${err.message}; its servers: ${JSON.stringify(Object.values(await client.servers('fleet')).map((s) => [s.addr, s.status]))}`) })
  // The agent edge lists every host: the last one is back once it is ready there.
  const restart = async (host) => {
    hosts.set(host.name, startHost(net, host, args, ports, dir))
    await waitFor(async () => {
      const s = (await agentClient.servers('fleet'))[`host${args.hosts}`]
      return s?.state === 'ready' && s.slim === args.perHost
    }, { timeout: 30000, interval: 100, what: `${host.name} to serve again` })
  }
  return discovery({ net, args, dns, client, url: `http://127.0.0.1:${port}`, load, hosts, restart })
}

// Under load through the DNS edge, each round: the last host's record appears (joinMs: until the
// edge has sent it a request), then it leaves, its record removed and its pool SIGTERMed at once
// (failed: the requests of the round that got anything but 200). `hosts`: host name → its
// `pool start` child; `restart(host)` starts it again and resolves once it serves.
async function discovery ({ net, args, dns, client, url, load, hosts, restart }) {
  const workers = (args.hosts - 1) * args.perHost
  const shape = { workers, median: args.median, sigma: args.sigma, capMs: args.cap }
  const last = net.hosts.at(-1)
  const others = net.hosts.slice(0, -1).map((h) => h.address)
  const stotOf = async () => Object.values(await client.servers('fleet')).find((s) => s.addr?.startsWith(`${last.address}:`))?.stot ?? 0
  const rows = []
  for (let k = 0; k < args.dnsRounds; k++) {
    progress(k, args.dnsRounds, `discovery, round ${k + 1}/${args.dnsRounds}`)
    const schedule = makeSchedule({ ...shape, rho: 0.5, durationMs: 6000, seed: args.seed + 1000 + k })
    const running = ask(load, { cmd: 'run', url, at: schedule.at, ms: schedule.ms })
    await sleep(1000)
    const before = await stotOf()
    const added = performance.now()
    await dns.set(DNS_NAME, [...others, last.address])
    let joinMs = null
    while (performance.now() - added < 4000) {
      if (await stotOf() > before) { joinMs = performance.now() - added; break }
      await sleep(10)
    }
    await sleep(Math.max(0, 3000 - (performance.now() - added)))
    const gone = new Promise((resolve) => hosts.get(last.name).once('exit', resolve))
    await dns.set(DNS_NAME, others)
    hosts.get(last.name).kill('SIGTERM')
    const r = await running
    const row = { joinMs: joinMs === null ? null : round(joinMs, 0), requests: r.status.length, failed: r.status.filter((x) => x !== 200).length, lag: r.lag }
    rows.push(row)
    log(`  discovery round ${k + 1}: joined after ${joinMs === null ? 'more than 4 s' : `${row.joinMs} ms`}; left: ${row.failed} of ${row.requests} failed`)
    await gone
    await restart(last)
  }
  progress(args.dnsRounds, args.dnsRounds, 'discovery done')
  return { resolveInterMs: args.resolveInter, rho: 0.5, rounds: rows }
}

async function main (args) {
  log(`  ${os.cpus().length} CPUs; workload: lognormal (median ${args.median} ms, σ ${args.sigma}, mean ${lognormalMean(args.median, args.sigma).toFixed(1)} ms)`)
  const net = createNetwork({ hosts: args.hosts })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-fleet-'))
  let cleaned = null
  const cleanup = () => (cleaned ??= (async () => {
    await net.destroy()
    fs.rmSync(dir, { recursive: true, force: true })
  })())
  onStopAll(cleanup)
  try {
    log(net.mode === 'netns' ? `  hosts in network namespaces: ${net.hosts.map((h) => `${h.name} ${h.address}`).join(', ')}` : `  no network namespaces (${net.problem}): hosts on loopback`)
    const [front, agent, agentEdge, rrEdge, agentStats, rrStats, worker] = await freePorts(7 + args.perHost)
    const ports = { front, agent, worker }
    const hosts = new Map(net.hosts.map((host) => [host.name, startHost(net, host, args, ports, dir)]))
    const common = ['--hosts', net.hosts.map((h) => `${h.address}:${front}`).join(','), '--agent-port', agent, '-n', args.perHost, '--host', '127.0.0.1', '--log', 'none', '--prefix', dir, '--queue-timeout', '60s']
    const edge = (name, port, stats) => poolConfig('edge', [...common, '--port', port, '--stats-port', stats, '--socket', path.join(dir, `${name}.sock`), '--pid-file', path.join(dir, `${name}.pid`)])
    const agentCfg = edge('agent', agentEdge, agentStats)
    const rrCfg = roundRobin(edge('rr', rrEdge, rrStats))
    const rrLines = rrCfg.split('\n').filter((l) => !/^\s*#/.test(l)).join('\n')
    if (/agent-check|maxconn \d|leastconn/.test(rrLines.split('\nbackend ')[1].split('\nfrontend ')[0])) throw new Error('the rr edge still has agent-check, maxconn or leastconn')
    const edges = { agent: await startEdge(net, 'agent', agentCfg, dir), rr: await startEdge(net, 'rr', rrCfg, dir) }
    const clients = { agent: edges.agent.client, rr: edges.rr.client }
    const pids = { agent: edges.agent.pid, rr: edges.rr.pid }
    await waitForFleet(clients, args)
    const load = await startLoad(net)
    const urls = { agent: `http://127.0.0.1:${agentEdge}`, rr: `http://127.0.0.1:${rrEdge}` }
    const before = await healthFlaps(clients)
    const cells = await measure(args, urls, pids, load)
    const after = await healthFlaps(clients)
    const flaps = Object.fromEntries(EDGES.map((e) => [e, Object.fromEntries(Object.keys(after[e]).map((k) => [k, after[e][k] - before[e][k]]))]))
    const added = await addedLatency({ 'one host\'s pool (its embedded balancer)': `http://${net.hosts[0].address}:${front}`, 'edge, agent': urls.agent, 'edge, rr': urls.rr }, load)
    const discoverySkipped = args.dnsRounds > 0 ? dnsProblem() : 'not asked (--dnsRounds 0)'
    if (discoverySkipped) log(`  discovery skipped: ${discoverySkipped}`)
    const found = discoverySkipped ? null : await discoveryEdge({ net, args, dir, ports, hosts, load, agentClient: clients.agent })
    await cleanup()
    return { mode: net.mode, cells, addedLatencyMs: added, healthChecks: flaps, discovery: found, discoverySkipped }
  } catch (err) {
    await cleanup()
    throw err
  }
}

runPart('fleet', { defaults, quick, main })
