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
const path = require('node:path')
const { runPool, isAlive, sleep, poolStatus, waitFor, stopChild } = require('../helpers')
const { createFleet, summary } = require('../helpers/fleet')
const { edgeConfig } = require('../../lib/generate/edge')

const AGENT_INTER = 500 // the edge config's default, also its check interval
const RENDER_MS = [10, 40]
const CONCURRENCY = 8 // above the fleet's 6 or 7 workers: the edge's queue is never empty
const BACKEND = 'fleet'

let fleet, net, client, pools
const startHost = (h, workers) => fleet.startHost(h, { workers })
const controlOf = (h) => fleet.controlOf(h)
const edgeServers = () => fleet.edgeServers(BACKEND)
const edgeShows = (h, want, options) => fleet.edgeShows(h, want, options)
const startLoad = (options) => fleet.startLoad({ concurrency: CONCURRENCY, ms: RENDER_MS, ...options })

t.before(async () => {
  fleet = await createFleet(t, { hosts: 3 })
  net = fleet.net
  pools = fleet.pools
  t.comment(net.mode === 'netns'
    ? `hosts in network namespaces ${net.namespaces.join(', ')}: ` +
      net.hosts.map((h) => `${h.name} ${h.address}`).join(', ')
    : `no network namespaces (${net.problem}): hosts on ${net.hosts.map((h) => h.address).join(', ')}`)
  const { front, agent, edge: edgePort, stats } = fleet.ports
  await Promise.all(net.hosts.map((h) => startHost(h, 2)))
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
    prefix: fleet.dir,
    socket: path.join(fleet.dir, 'edge.sock'),
    log: 'none'
  })
  client = (await fleet.startEdge(cfg)).client
  for (const h of net.hosts) await edgeShows(h.name, { state: 'ready', slim: 2 })
})

t.test('steady state: every request answered, spread over the hosts, the queue held at the edge', async (t) => {
  const load = startLoad({ maxMs: 3000 })
  const s = summary(await load.done)
  t.equal(s.failed, 0, `failed requests, of ${s.total} sent ${s.failures.join(', ')}`)
  for (const h of net.hosts) {
    t.ok(s.byHost[h.name] > s.total / 6, `${h.name} served its share: ${JSON.stringify(s.byHost)}`)
  }
  const backend = (await client.showStat(BACKEND)).find((r) => r.svname === 'BACKEND')
  // A request the edge sent to a host whose workers were all busy would wait in that host's
  // queue for the rest of a render (10 ms or more); one sent to a free worker waits ~0 ms.
  const longest = net.hosts.map((h) => pools.get(h.name).requests.reduce((a, r) => (r.queueMs > a.queueMs ? r : a)))
  const waits = longest.map((r) => r.queueMs)
  t.ok(backend.qmax > 0 && waits.every((ms) => ms < RENDER_MS[0]),
    `${CONCURRENCY} clients over 6 workers waited at the edge (qmax ${backend.qmax}), not at a host ` +
      `(longest wait in a host's queue: ${waits.join(', ')} ms)`,
    {
      longest,
      around: longest.map((r, i) => aroundOf(pools.get(net.hosts[i].name).requests, r)),
      servers: (await client.showStat(BACKEND)).map((r) => `${r.svname} smax ${r.smax} slim ${r.slim}`)
    })
})

// The host's requests that overlapped `r` (its wait and service), as "start..end worker url q
// attempts", in ms from r's arrival: which ones held the host's workers meanwhile.
function aroundOf (requests, r) {
  const from = r.time - r.ms
  return requests.filter((o) => o.time > from - 50 && o.time - o.ms < r.time)
    .map((o) => `${(o.time - o.ms - from).toFixed(1)}..${(o.time - from).toFixed(1)} ${o.worker} ${o.url} ` +
      `q${o.queueMs} a${o.attempts}${o.reason ? ` ${o.reason}` : ''}`)
}

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
  await sleep(300) // the load under way
  const seen = new Set()
  let reloading = true
  const watch = (async () => {
    while (reloading) { seen.add((await edgeServers()).h1.slim); await sleep(100) } // sampled every 100 ms
  })()
  const r = await runPool(['reload', '--control', controlOf(net.host('h1'))], { timeout: 30000 })
  reloading = false
  await watch
  t.equal(r.code, 0, `pool reload on h1: ${r.stderr}`)
  await sleep(500) // the load goes on past the reload
  load.stop()
  const s = summary(await load.done)
  t.equal(s.failed, 0,
    `failed requests, of ${s.total} sent (by host ${JSON.stringify(s.byHost)}) ${s.failures.join(', ')}`)
  t.comment(`h1's slim seen during its reload: ${[...seen].join(', ')}`)
})

t.test('a host stops and comes back under load: no failed request', async (t) => {
  const load = startLoad({ maxMs: 20000 })
  await load.started
  await sleep(500) // the load under way
  const h2 = pools.get('h2')
  const before = (await edgeServers()).h2
  h2.kill('SIGTERM')
  const { code } = await h2.exited
  t.equal(code, 0, 'the pool on h2 stopped cleanly')
  const after = (await edgeServers()).h2
  t.same([after.econ - before.econ, after.wretr - before.wretr], [0, 0],
    'h2 refused the edge no connection while it stopped (the edge heard the stop first): no retry needed')
  await waitFor(async () => ['drain', 'down'].includes((await edgeServers()).h2.state),
    { timeout: 3000, what: 'the edge to take h2 out' })
  await startHost('h2', 2)
  await edgeShows('h2', { state: 'ready', slim: 2 })
  const joined = Date.now()
  await sleep(1000) // the load goes on past the join
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
  await sleep(500) // the load under way
  const cutAt = Date.now()
  net.partition('h3')
  t.teardown(() => { try { net.heal('h3') } catch {} })
  await edgeShows('h3', { state: 'down' }, { timeout: 5000 })
  const downAfter = Date.now() - cutAt
  await sleep(1500) // h3 stays cut off a while
  const healAt = Date.now()
  net.heal('h3')
  await edgeShows('h3', { state: 'ready' }, { timeout: 8000 })
  load.stop()
  const requests = await load.done
  const s = summary(requests)
  t.ok(s.failed <= 3, `failed ${s.failed} ≤ h3's 3 workers (${s.total} sent) ${s.failures.join(', ')}`)
  const meanwhile = requests.filter((r) => r.start > cutAt + downAfter && r.end < healAt)
  t.ok(meanwhile.length > 20 && meanwhile.every((r) => r.status === 200 && r.host !== 'h3'),
    `while h3 was cut off and DOWN (${downAfter} ms after the cut), ` +
      `h1 and h2 answered all ${meanwhile.length} requests`)
})

t.test('a host\'s supervisor is SIGKILLed: at most its running requests fail, its workers go too', async (t) => {
  const { workers } = await poolStatus(['--control', controlOf(net.host('h2'))])
  const pids = workers.map((w) => w.pid).filter(Boolean)
  const load = startLoad({ maxMs: 12000 })
  await load.started
  await sleep(500) // the load under way
  const { ms: downAfter } = await fleet.killHost('h2', { timeout: 5000 })
  const stotAtDown = (await edgeServers()).h2.stot
  await waitFor(() => pids.length === 2 && pids.every((pid) => !isAlive(pid)),
    { timeout: 5000, what: 'h2\'s 2 workers to exit' })
  t.pass(`h2's ${pids.length} workers exited by themselves (their supervisor's IPC channel closed)`)
  await sleep(1500) // the load goes on past the kill
  load.stop()
  const s = summary(await load.done)
  t.ok(s.failed <= 2, `failed ${s.failed} ≤ h2's 2 workers (${s.total} sent) ${s.failures.join(', ')}`)
  t.equal((await edgeServers()).h2.stot, stotAtDown,
    `the edge sent h2 nothing after marking it DOWN (${downAfter} ms after the kill)`)
})

t.test('teardown leaves no namespace behind', async (t) => {
  await stopChild(fleet.edge)
  await Promise.all([...pools.values()].map((c) => stopChild(c, { grace: 12000 })))
  await net.destroy()
  t.same(net.leftovers(), [], 'ip netns list shows none of this run\'s namespaces')
})
