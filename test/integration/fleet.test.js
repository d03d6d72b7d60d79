'use strict'

// A fleet: three hosts, each a network namespace running `pool start --agent-port`, behind an
// edge HAProxy (lib/generate/edge.js) in a namespace of its own, with the load client beside it.
// Under bounded load through the edge, one host at a time is scaled, reloaded, stopped and
// brought back, cut off the network, and SIGKILLed. What must hold: a planned change (reload,
// stop, join) fails no request; an unplanned one fails at most what was running on that host;
// the edge holds the one queue (requests wait there, not at a host) and follows each host's
// agent.
//
// Without network namespaces (not root), the hosts are 127.0.0.2-4 and the partition is skipped.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { onJsonLines, FIXTURES, BIN, cleanEnv, freePorts, waitFor, poolStatus, runPool, isAlive, sleep } = require('../helpers')
const { HAPROXY, tempDir } = require('../helpers/haproxy')
const { createNetwork, stopChild } = require('../helpers/netns')
const { HaproxyClient } = require('../../lib/haproxy/client')
const { edgeConfig } = require('../../lib/generate/edge')

const APP = path.join(FIXTURES, 'fleet-app.js')
const LOAD = path.join(FIXTURES, 'fleet-load.js')
const BACKEND = 'fleet'
const AGENT_INTER = 500 // the edge config's default, also its check interval
const RENDER_MS = [10, 40]
const CONCURRENCY = 8 // above the fleet's 6 or 7 workers: the edge's queue is never empty

const net = createNetwork({ hosts: 3, t })
const dir = tempDir(t, 'pool-fleet-')
let edge, client, ports
const pools = new Map() // host name → its `pool start` child

// `pool start` on host `h`, in its namespace, with JSON logs; resolves once it logged `started`.
async function startHost (h, workers) {
  const host = net.host(h)
  const args = [BIN, 'start', APP, '-n', String(workers), '--host', host.address, '--port', String(ports.front),
    '--agent-port', String(ports.agent), '--worker-port', String(ports.worker),
    // In a namespace the host has its own 127.0.0.1; on loopback, its own address.
    '--worker-host', net.mode === 'netns' ? '127.0.0.1' : host.address,
    '--control', controlOf(host), '--stats-port', '0', '--log-format', 'json',
    '--timeout', '10s', '--graceful-timeout', '10s']
  const child = net.spawn(host, process.execPath, args, { env: cleanEnv({ FLEET_HOST: host.name }), stdio: ['ignore', 'pipe', 'pipe'] })
  child.output = '' // the last lines, for an error message
  child.requests = [] // the host balancer's access-log lines
  child.started = false
  child.stdout.on('data', (d) => { child.output = (child.output + d).slice(-6000) })
  onJsonLines(child.stdout, (rec) => {
    if (rec.event === 'request') child.requests.push(rec)
    else if (rec.event === 'started') child.started = true
  })
  child.stderr.setEncoding('utf8').on('data', (d) => { child.output = (child.output + d).slice(-6000) })
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  pools.set(host.name, child)
  await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`pool on ${host.name} exited: ${child.output}`)
    return child.started
  }, { timeout: 15000, what: `the pool on ${host.name} to start` })
  return child
}

function controlOf (host) { return path.join(dir, `${host.name}.sock`) }
function serverOf (h) { return `host${net.hosts.indexOf(net.host(h)) + 1}` }

async function edgeServers () {
  const servers = await client.servers(BACKEND)
  return Object.fromEntries(net.hosts.map((h) => [h.name, servers[serverOf(h)]]))
}

// Wait until the edge's server for `h` matches `want` ({ state, slim }); resolves with its row.
function edgeShows (h, want, { timeout = 8000 } = {}) {
  return waitFor(async () => {
    const s = (await edgeServers())[h]
    return Object.entries(want).every(([k, v]) => s[k] === v) && s
  }, { timeout, interval: 50, what: `the edge to show ${h} ${JSON.stringify(want)}` })
}

// Run the load client in the edge's namespace. `stop()` asks it to send no more; `done`
// resolves with its requests as { start, end, status, host }.
function startLoad ({ maxMs, count = 3000, timeout = 15000 }) {
  const options = { url: `http://127.0.0.1:${ports.edge}`, concurrency: CONCURRENCY, count, maxMs, timeout, ms: RENDER_MS }
  const child = net.spawn('edge', process.execPath, [LOAD, JSON.stringify(options)], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (d) => { out += d })
  child.stderr.setEncoding('utf8').on('data', (d) => { err += d })
  const done = new Promise((resolve, reject) => child.once('exit', () => {
    const line = out.split('\n').find((l) => l.includes('"event":"done"'))
    if (!line) return reject(new Error(`the load client ended without results: ${err.slice(-2000)}`))
    resolve(JSON.parse(line).requests.map(([start, end, status, host]) => ({ start, end, status, host })))
  }))
  const started = waitFor(() => out.includes('"event":"started"'), { timeout: 5000, what: 'the load client to start' })
  started.catch(() => {}) // awaited where it matters; `done` says the rest
  return { started, done, stop: () => child.kill('SIGTERM') }
}

function summary (requests) {
  const failed = requests.filter((r) => r.status !== 200)
  const byHost = {}
  for (const r of requests) if (r.status === 200) byHost[r.host] = (byHost[r.host] || 0) + 1
  return { total: requests.length, failed: failed.length, failures: failed.slice(0, 2).map((r) => `${r.status} ${String(r.host).slice(0, 60)}`), byHost }
}

t.before(async () => {
  t.comment(net.mode === 'netns'
    ? `hosts in network namespaces ${net.namespaces.join(', ')}: ${net.hosts.map((h) => `${h.name} ${h.address}`).join(', ')}`
    : `no network namespaces (${net.problem}): hosts on ${net.hosts.map((h) => h.address).join(', ')}`)
  const [front, agent, edgePort, stats, worker] = await freePorts(8)
  ports = { front, agent, edge: edgePort, stats, worker }
  await Promise.all(net.hosts.map((h) => startHost(h, 2)))
  const socket = path.join(dir, 'edge.sock')
  const cfg = edgeConfig({
    hosts: net.hosts.map((h) => `${h.address}:${front}`).join(','),
    agentPort: agent,
    workers: 2,
    agentInter: AGENT_INTER,
    checkInter: AGENT_INTER,
    timeout: 10000,
    host: '127.0.0.1',
    port: edgePort,
    statsPort: stats,
    prefix: dir,
    socket,
    log: 'none'
  })
  fs.writeFileSync(path.join(dir, 'edge.cfg'), cfg)
  edge = net.spawn('edge', HAPROXY, ['-db', '-f', path.join(dir, 'edge.cfg')], { stdio: ['ignore', 'ignore', 'pipe'] })
  edge.output = ''
  edge.stderr.setEncoding('utf8').on('data', (d) => { edge.output = (edge.output + d).slice(-4000) })
  client = new HaproxyClient({ socket, timeout: 1000 })
  await waitFor(async () => {
    if (edge.exitCode !== null) throw new Error(`the edge haproxy exited: ${edge.output}`)
    return (await client.level()) === 'admin'
  }, { timeout: 5000, what: 'the edge\'s runtime socket' })
  for (const h of net.hosts) await edgeShows(h.name, { state: 'ready', slim: 2 })
})

t.test('steady state: every request answered, spread over the hosts, the queue held at the edge', async (t) => {
  const load = startLoad({ maxMs: 3000 })
  const s = summary(await load.done)
  t.equal(s.failed, 0, `failed requests, of ${s.total} sent ${s.failures.join(', ')}`)
  for (const h of net.hosts) t.ok(s.byHost[h.name] > s.total / 6, `${h.name} served its share: ${JSON.stringify(s.byHost)}`)
  const backend = (await client.showStat(BACKEND)).find((r) => r.svname === 'BACKEND')
  // A request the edge sent to a host whose workers were all busy would wait in that host's
  // queue for the rest of a render (10 ms or more); one sent to a free worker waits ~0 ms.
  const waits = net.hosts.map((h) => Math.max(...pools.get(h.name).requests.map((r) => r.queueMs)))
  t.ok(backend.qmax > 0 && waits.every((ms) => ms < RENDER_MS[0]),
    `${CONCURRENCY} clients over 6 workers waited at the edge (qmax ${backend.qmax}), not at a host (longest wait in a host's queue: ${waits.join(', ')} ms)`)
})

t.test('a host scales up: the edge\'s limit for it follows within about an agent interval', async (t) => {
  const r = await runPool(['scale', '3', '--control', controlOf(net.host('h3'))], { timeout: 20000 })
  t.equal(r.code, 0, `pool scale 3 on h3: ${r.stderr}`)
  const scaled = Date.now()
  await edgeShows('h3', { slim: 3 }, { timeout: 3 * AGENT_INTER + 1000 })
  t.pass(`slim 2 → 3 for h3 ${Date.now() - scaled} ms after the scale returned (agent-inter ${AGENT_INTER} ms)`)
})

t.test('a host reloads under load: no failed request', async (t) => {
  const load = startLoad({ maxMs: 15000 })
  await load.started
  await sleep(300)
  const seen = new Set()
  let reloading = true
  const watch = (async () => {
    while (reloading) { seen.add((await edgeServers()).h1.slim); await sleep(100) }
  })()
  const r = await runPool(['reload', '--control', controlOf(net.host('h1'))], { timeout: 30000 })
  reloading = false
  await watch
  t.equal(r.code, 0, `pool reload on h1: ${r.stderr}`)
  await sleep(500)
  load.stop()
  const s = summary(await load.done)
  t.equal(s.failed, 0, `failed requests, of ${s.total} sent (by host ${JSON.stringify(s.byHost)}) ${s.failures.join(', ')}`)
  t.comment(`h1's slim seen during its reload: ${[...seen].join(', ')}`)
})

t.test('a host stops and comes back under load: no failed request', async (t) => {
  const load = startLoad({ maxMs: 20000 })
  await load.started
  await sleep(500)
  const h2 = pools.get('h2')
  h2.kill('SIGTERM')
  const { code } = await h2.exited
  t.equal(code, 0, 'the pool on h2 stopped cleanly')
  await waitFor(async () => ['drain', 'down'].includes((await edgeServers()).h2.state), { timeout: 3000, what: 'the edge to take h2 out' })
  await startHost('h2', 2)
  await edgeShows('h2', { state: 'ready', slim: 2 })
  const joined = Date.now()
  await sleep(1000)
  load.stop()
  const requests = await load.done
  const s = summary(requests)
  t.equal(s.failed, 0, `failed requests across the stop and the join, of ${s.total} sent ${s.failures.join(', ')}`)
  t.ok(requests.some((r) => r.start > joined && r.host === 'h2'), 'h2 serves again once back')
})

t.test('a host is cut off the network: at most its running requests fail, the others serve the rest', async (t) => {
  if (net.skipPartition) return t.skip(net.skipPartition)
  const load = startLoad({ maxMs: 12000 })
  await load.started
  await sleep(500)
  const cutAt = Date.now()
  net.partition('h3')
  t.teardown(() => { try { net.heal('h3') } catch {} })
  await edgeShows('h3', { state: 'down' }, { timeout: 5000 })
  const downAfter = Date.now() - cutAt
  await sleep(1500)
  const healAt = Date.now()
  net.heal('h3')
  await edgeShows('h3', { state: 'ready' }, { timeout: 8000 })
  load.stop()
  const requests = await load.done
  const s = summary(requests)
  t.ok(s.failed <= 3, `failed ${s.failed} ≤ h3's 3 workers (${s.total} sent) ${s.failures.join(', ')}`)
  const meanwhile = requests.filter((r) => r.start > cutAt + downAfter && r.end < healAt)
  t.ok(meanwhile.length > 20 && meanwhile.every((r) => r.status === 200 && r.host !== 'h3'),
    `while h3 was cut off and DOWN (${downAfter} ms after the cut), h1 and h2 answered all ${meanwhile.length} requests`)
})

t.test('a host\'s supervisor is SIGKILLed: at most its running requests fail, its workers go too', async (t) => {
  const { workers } = await poolStatus(['--control', controlOf(net.host('h2'))])
  const pids = workers.map((w) => w.pid).filter(Boolean)
  const load = startLoad({ maxMs: 12000 })
  await load.started
  await sleep(500)
  const h2 = pools.get('h2')
  const killedAt = Date.now()
  h2.kill('SIGKILL')
  await h2.exited
  await edgeShows('h2', { state: 'down' }, { timeout: 5000 })
  const downAfter = Date.now() - killedAt
  const stotAtDown = (await edgeServers()).h2.stot
  await waitFor(() => pids.length === 2 && pids.every((pid) => !isAlive(pid)), { timeout: 5000, what: 'h2\'s 2 workers to exit' })
  t.pass(`h2's ${pids.length} workers exited by themselves (their supervisor's IPC channel closed)`)
  await sleep(1500)
  load.stop()
  const s = summary(await load.done)
  t.ok(s.failed <= 2, `failed ${s.failed} ≤ h2's 2 workers (${s.total} sent) ${s.failures.join(', ')}`)
  t.equal((await edgeServers()).h2.stot, stotAtDown, `the edge sent h2 nothing after marking it DOWN (${downAfter} ms after the kill)`)
})

t.test('teardown leaves no namespace behind', async (t) => {
  await stopChild(edge)
  await Promise.all([...pools.values()].map((c) => stopChild(c, { grace: 12000 })))
  await net.destroy()
  t.same(net.leftovers(), [], 'ip netns list shows none of this run\'s namespaces')
})
