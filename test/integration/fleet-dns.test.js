'use strict'

// A fleet whose edge finds its hosts by DNS (`pool config edge --discover`): three hosts in
// network namespaces, each running `pool start --agent-port`, a real DNS server (dnsmasq) beside
// the edge, and records the test changes under a bounded load. What must hold: a host whose
// record appears takes requests within a few resolve intervals; a host that leaves (its pool
// stopped gracefully, its record removed) costs no request; a host whose record stays while its
// pool is gone is taken out by its health check; with DNS unreachable, the hosts last found keep
// serving; SRV records (name and port per host) work as A records do. The whole file runs once
// per platform (Debian 12's HAProxy, Debian 13's), each with a fleet of its own.

const t = require('tap')
const path = require('node:path')
const { createFleet, summary } = require('../helpers/fleet')
const { onPlatforms } = require('../helpers/haproxy')
const { DnsServer, dnsProblem } = require('../helpers/dns')
const { freePorts, sleep, waitFor } = require('../helpers')
const { edgeConfig } = require('../../lib/generate/edge')

const NAME = 'pool.fleet.test'
const RESOLVE_INTER = 500
const problem = dnsProblem() ?? (process.getuid?.() === 0 ? null : 'not root: the hosts need network namespaces')
if (problem) {
  t.skip(`DNS discovery: ${problem}`)
} else {
  onPlatforms(t, 'DNS discovery', async (t, platform) => run(t, platform)) // resolved: its subtests end it
}

function run (t, platform) {
  let fleet, dns
  const addressOf = (h) => fleet.host(h).address

  function edgeFor (fleet, { discover, port, statsPort, name, dnsHold }) {
    return edgeConfig({
      discover,
      nameservers: dns.nameserver,
      maxHosts: 4,
      resolveInter: RESOLVE_INTER,
      agentPort: fleet.ports.agent,
      workers: 2,
      agentInter: 300,
      checkInter: 500,
      timeout: 10000,
      host: '127.0.0.1',
      port,
      statsPort,
      prefix: fleet.dir,
      socket: path.join(fleet.dir, `${name}.sock`),
      log: 'none',
      dnsHold
    })
  }

  t.before(async () => {
    fleet = await createFleet(t, { hosts: 3, platform })
    const [dnsPort] = await freePorts(1)
    dns = new DnsServer({ net: fleet.net, dir: fleet.dir, port: dnsPort })
    await dns.start()
    await dns.set(NAME, [addressOf('h1'), addressOf('h2')])
    t.comment(`${fleet.mode}: ${fleet.net.hosts.map((h) => `${h.name} ${h.address}`).join(', ')}; ` +
      `dnsmasq on ${dns.nameserver}`)
    await Promise.all(fleet.net.hosts.map((h) => fleet.startHost(h, { workers: 2 })))
    await fleet.startEdge(edgeFor(fleet,
      { discover: `${NAME}:${fleet.ports.front}`, port: fleet.ports.edge, statsPort: fleet.ports.stats, name: 'edge' }))
    for (const h of ['h1', 'h2']) await fleet.edgeShows(h, { state: 'ready', slim: 2 }, { timeout: 15000 })
    t.notOk((await fleet.edgeServers()).h3, 'h3 has no record yet: the edge does not know it')
  })

  t.test('a host whose record appears takes requests within a few resolve intervals, nothing failing', async (t) => {
    const load = fleet.startLoad({ maxMs: 20000 })
    await load.started
    await sleep(500) // the load under way
    const added = Date.now()
    await dns.set(NAME, [addressOf('h1'), addressOf('h2'), addressOf('h3')])
    await fleet.edgeShows('h3', { state: 'ready', slim: 2 }, { timeout: 15000 })
    await waitFor(async () => (await fleet.edgeServers()).h3.stot > 0,
      { timeout: 5000, what: 'the edge to send h3 a request' })
    await sleep(500) // the load goes on with h3 in
    load.stop()
    const requests = await load.done
    const s = summary(requests)
    const first = requests.filter((r) => r.host === 'h3' && r.status === 200).reduce((min, r) => Math.min(min, r.start),
      Infinity)
    t.equal(s.failed, 0, `failed requests, of ${s.total} (${JSON.stringify(s.byHost)}) ${s.failures.join(', ')}`)
    t.ok(first < Infinity,
      `h3 served its first request ${first - added} ms after its record appeared (resolve every ${RESOLVE_INTER} ms, ` +
        'then 2 good /ping checks every 500 ms)')
  })

  t.test('a host that leaves (pool stopped gracefully, record removed) costs no request', async (t) => {
    const load = fleet.startLoad({ maxMs: 20000 })
    await load.started
    await sleep(500) // the load under way
    const h2 = fleet.pool('h2')
    // As Kubernetes does for a pod that terminates: its endpoint goes and its pool hears SIGTERM.
    await dns.set(NAME, [addressOf('h1'), addressOf('h3')])
    h2.kill('SIGTERM')
    const { code } = await h2.exited
    t.equal(code, 0, 'the pool on h2 stopped cleanly')
    await waitFor(async () => {
      const row = (await fleet.edgeServers()).h2
      return !row || row.state === 'maint'
    }, { timeout: 5000, what: 'the edge to drop h2' })
    await sleep(500) // the load goes on without h2
    load.stop()
    const s = summary(await load.done)
    t.equal(s.failed, 0, `failed requests, of ${s.total} (${JSON.stringify(s.byHost)}) ${s.failures.join(', ')}`)
  })

  t.test('a host whose record stays while its pool is gone is taken out by its health check', async (t) => {
    const load = fleet.startLoad({ maxMs: 20000 })
    await load.started
    await sleep(500) // the load under way
    const { row: down, ms: downAfter } = await fleet.killHost('h3')
    await sleep(1000) // the load goes on with h3 down
    const after = (await fleet.edgeServers()).h3
    load.stop()
    const s = summary(await load.done)
    t.ok(s.failed <= 2,
      `failed ${s.failed} ≤ h3's 2 workers' running requests (${s.total} sent) ${s.failures.join(', ')}`)
    t.equal(after.stot, down.stot,
      `its record still there, h3 was DOWN ${downAfter} ms after its pool was killed (its checks: ` +
        'the first refused connection, or /ping), and was sent nothing since')
  })

  t.test('DNS unreachable: the hosts last found keep serving for --dns-hold', async (t) => {
    // A second edge beside the first, the same but for a hold of 2 s: it shows what the hold does.
    const [edgePort, statsPort] = await freePorts(2)
    const short = await fleet.startEdge(edgeFor(fleet,
      { discover: `${NAME}:${fleet.ports.front}`, port: edgePort, statsPort, name: 'short', dnsHold: 2000 }),
    { name: 'short' })
    await waitFor(async () => (await short.client.servers('fleet')).host1?.state === 'ready',
      { timeout: 15000, what: 'the second edge to find h1' })
    const load = fleet.startLoad({ maxMs: 20000 })
    await load.started
    await dns.stop()
    const stopped = Date.now()
    // Well past the short hold and 3 unanswered queries 1 s apart.
    await sleep(6000)
    const h1 = (await fleet.edgeServers()).h1
    const shortH1 = Object.values(await short.client.servers('fleet')).find((s) => s.addr === fleet.frontOf('h1'))
    load.stop()
    const requests = await load.done
    const s = summary(requests)
    t.equal(s.failed, 0, `failed requests, of ${s.total} ${s.failures.join(', ')}`)
    t.equal(h1.state, 'ready', 'h1 is still in rotation 6 s after DNS went silent (--dns-hold 1h)')
    t.ok(requests.some((r) => r.start > stopped + 5000 && r.host === 'h1' && r.status === 200),
      'and still served by it')
    t.not(shortH1?.state, 'ready',
      `with --dns-hold 2s the other edge took h1 out (${shortH1 ? shortH1.status : 'no server'})`)
    await dns.start()
  })

  t.test('SRV records: each host found with its own port', async (t) => {
    // h1 is the one host left running; a second pool on it, on another port, makes two.
    const [port2, edgePort, statsPort] = await freePorts(3)
    await dns.set('h1.fleet.test', [addressOf('h1')])
    await dns.setSrv([['_pool._tcp.fleet.test', 'h1.fleet.test', fleet.ports.front],
      ['_pool._tcp.fleet.test', 'h1.fleet.test', port2]])
    const cfg = edgeFor(fleet, { discover: '_pool._tcp.fleet.test', port: edgePort, statsPort, name: 'srv' })
    t.match(cfg, /server-template host 1-4 _pool\._tcp\.fleet\.test resolvers fleet_dns/,
      'the template names the SRV record, no port')
    const { client } = await fleet.startEdge(cfg, { name: 'srv' })
    await waitFor(async () => {
      const rows = Object.values(await client.servers('fleet')).filter((s) => s.state === 'ready')
      return rows.length === 1 && rows[0].addr === `${addressOf('h1')}:${fleet.ports.front}`
    },
    { timeout: 15000, what: 'the SRV edge to find h1 on its port, and only there (nothing listens on the other port)' })
    const rows = Object.values(await client.servers('fleet'))
    t.ok(rows.some((s) => s.addr === `${addressOf('h1')}:${port2}`),
      `both records became servers: ${rows.map((s) => `${s.addr} ${s.state}`).join(', ')}`)
  })
}
