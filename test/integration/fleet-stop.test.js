'use strict'

// A host that stops in a fleet refuses nothing the edge still sends it. Two hosts (network
// namespaces, each `pool start --agent-port`, 2 workers) behind an edge HAProxy written the way
// an operator would write one, not the generated config: leastconn, agent-check every 300 ms,
// `option redispatch`, `retries 3`, a /ping health check every second, and nothing that would
// forgive a refused connection (no `observe layer4`, no `retry-on`, no `redispatch 1`). Under 8
// clients, one host is stopped with SIGTERM, several times: every request must be answered, and
// the stopping host must never refuse a connection, because its listener stays open and its
// workers serve until the edge has heard the stop from the agent (`drain`), and only then closes.

const t = require('tap')
const { createFleet, summary } = require('../helpers/fleet')
const { sleep } = require('../helpers')

const ROUNDS = 3
const AGENT_INTER = 300

// haproxy.cfg as an operator writes it for two hosts: the agent sets each host's maxconn and
// says drain on stop, the health check takes out a host that is gone.
function operatorEdge (fleet) {
  const { edge, agent } = fleet.ports
  return `global
    stats socket ${fleet.dir}/edge.sock mode 600 level admin
    maxconn 2000

defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    timeout queue 10s
    timeout check 1s

frontend www
    bind 127.0.0.1:${edge}
    default_backend fleet

backend fleet
    balance leastconn
    option redispatch
    retries 3
    option httpchk GET /ping
    default-server check inter 1s agent-check agent-port ${agent} agent-inter ${AGENT_INTER}ms
${fleet.net.hosts.map((h) => `    server ${h.name} ${fleet.frontOf(h)}`).join('\n')}
`
}

t.test('a host stops under load behind an operator\'s edge: nothing refused, nothing failed', async (t) => {
  const fleet = await createFleet(t, { hosts: 2 })
  t.comment(`${fleet.mode}: ${fleet.net.hosts.map((h) => `${h.name} ${h.address}`).join(', ')}`)
  await Promise.all(fleet.net.hosts.map((h) => fleet.startHost(h, { workers: 2 })))
  await fleet.startEdge(operatorEdge(fleet))
  for (const h of ['h1', 'h2']) await fleet.edgeShows(h, { state: 'ready', slim: 2 })

  for (let round = 1; round <= ROUNDS; round++) {
    const load = fleet.startLoad({ maxMs: 20000, ms: [5, 25] })
    await load.started
    await sleep(500) // the load under way
    const before = (await fleet.edgeServers()).h2
    const stopped = fleet.pool('h2')
    const signalled = Date.now()
    stopped.kill('SIGTERM')
    const { code } = await stopped.exited
    const closed = stopped.logs.find((l) => l.event === 'balancer-closed')
    t.equal(code, 0, `round ${round}: the pool on h2 stopped cleanly`)
    await sleep(300) // the load goes on past the stop
    load.stop()
    const s = summary(await load.done)
    const after = (await fleet.edgeServers()).h2
    t.equal(s.failed, 0,
      `round ${round}: failed requests, of ${s.total} sent (${JSON.stringify(s.byHost)}) ${s.failures.join(', ')}`)
    t.equal(after.econ - before.econ, 0,
      `round ${round}: the edge met no refused connection on h2 ` +
        `(its listener closed ${closed ? `${closed.why}, ` : ''}after the edge knew; ` +
        `exit ${Date.now() - signalled} ms after SIGTERM)`)
    t.equal(after.wretr - before.wretr, 0, `round ${round}: the edge retried nothing on h2`)
    await fleet.startHost('h2', { workers: 2 })
    await fleet.edgeShows('h2', { state: 'ready', slim: 2 }, { timeout: 10000 })
  }
})
