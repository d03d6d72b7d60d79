'use strict'

// HAProxy restarted or gone while the pool runs, and a graceful stop of the pool: the pool
// re-asserts what HAProxy forgot, keeps its workers serving when HAProxy is away, and drains
// each server (DRAIN, wait, MAINT) without cutting a running request.

const t = require('tap')
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const net = require('node:net')
const { request, sleep, waitFor, isAlive, poolStatus, freePorts } = require('../../helpers')
const { onPlatforms } = require('../../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool, statuses, pidsBySlot, allUp } = require('../../helpers/haproxy-pool')

const labStatus = (lab) => poolStatus(['--control', path.join(lab.dir, 'control.sock')])

onPlatforms(t, 'HAProxy restarted: the pool re-asserts every server within a few seconds', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2 })
  const pool = await startHaproxyPool(t, lab, { workers: 2 })
  await waitFor(allUp(lab.client), { timeout: 3000, what: 'both servers UP' })
  const pids = pidsBySlot(pool)

  const restartedAt = performance.now()
  const fresh = await lab.restartHaproxy() // it starts with every server disabled (MAINT)
  await waitFor(allUp(lab.client), { timeout: 8000, interval: 50, what: 'servers UP again' })
  const seconds = (performance.now() - restartedAt) / 1000
  t.comment(`servers UP again ${seconds.toFixed(1)} s after the restart (check interval 2 s)`)
  t.ok(seconds < 6, `re-asserted within ${seconds.toFixed(1)} s`)
  t.same(pidsBySlot(pool), pids, 'without any pool action: no worker was replaced')
  t.equal((await request(lab.url + '/')).status, 200, 'HAProxy serves again')

  const reassert = await pool.waitLog((l) => l.event === 'haproxy-reassert')
  t.same(reassert.servers.map((s) => [s.server, s.seen, s.wanted]),
    [['worker1', 'maint', 'ready'], ['worker2', 'maint', 'ready']],
    'HAProxy had forgotten both; the log names what was re-asserted')
  t.ok(pool.logs.some((l) => (l.event === 'haproxy-restarted' && l.toPid === fresh.pid) ||
    l.event === 'haproxy-reachable'), 'the restart was noticed and logged')

  const front = await waitFor(async () => {
    const s = (await labStatus(lab)).front
    return s.haproxyPid === fresh.pid && s.servers.worker1.seen === 'ready' && s
  }, {
    timeout: 10000,
    what: 'status of the new HAProxy'
  })
  t.match(front,
    {
      type: 'haproxy',
      backend: 'pool',
      socket: lab.socket,
      reachable: true,
      queue: 0,
      servers: {
        worker1: { wanted: 'ready', seen: 'ready', up: true, sessions: 0 },
        worker2: { wanted: 'ready', seen: 'ready' }
      }
    }, 'pool status shows wanted and seen states, and HAProxy\'s queue')
})

onPlatforms(t, 'HAProxy gone after start: workers keep serving, a warning, ' +
  'then re-assert when it is back', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2 })
  const pool = await startHaproxyPool(t, lab, { workers: 2 })
  await waitFor(allUp(lab.client), { timeout: 3000, what: 'both servers UP' })
  const pids = pidsBySlot(pool)

  // Kill it just after a periodic check, not during one: a check cut mid-answer fails with a
  // reset, not the refused connection this test is about.
  const lastCheck = (await labStatus(lab)).front.checkedAt
  await waitFor(async () => (await labStatus(lab)).front.checkedAt !== lastCheck,
    { timeout: 8000, interval: 100, what: 'the next HAProxy check' })
  lab.haproxy.child.kill('SIGKILL') // no clean exit: its socket file stays, refusing connections
  await lab.haproxy.child.exited
  const warning = await pool.waitLog((l) => l.event === 'haproxy-unreachable', 5000)
  t.equal(warning.level, 40, 'logged as a warning')
  t.ok(warning.msg.includes(lab.socket) && /nothing listens/.test(warning.msg), `the reason is in it: ${warning.msg}`)

  await sleep(2500) // a few retries
  t.equal(pool.exitCode, null, 'the pool is still running')
  for (const [slot, pid] of Object.entries(pids)) {
    t.ok(isAlive(pid), `worker ${slot} is alive`)
    const r = await request(`http://127.0.0.1:${lab.workerPort + Number(slot) - 1}/`)
    t.equal(JSON.parse(r.body).pid, pid, `worker ${slot} answers on its port`)
  }
  t.equal(pool.logs.filter((l) => l.event === 'haproxy-unreachable' && l.level === 40).length, 1,
    'one warning, not one per retry')
  t.equal((await labStatus(lab)).front.reachable, false, 'pool status says HAProxy is unreachable')

  await lab.restartHaproxy()
  // Retries back off up to 5 s, so the return can take that long to be noticed.
  await waitFor(allUp(lab.client), { timeout: 12000, interval: 50, what: 'servers UP again' })
  t.ok(await pool.waitLog((l) => l.event === 'haproxy-reachable'), 'its return is logged')
  t.same(pidsBySlot(pool), pids, 'the same workers serve through the new HAProxy')
  t.equal((await request(lab.url + '/')).status, 200)
})

onPlatforms(t, 'graceful stop: DRAIN, the running request completes, then MAINT', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2 })
  const pool = await startHaproxyPool(t, lab, { workers: 2, args: ['--log-level', 'debug'] })
  await waitFor(allUp(lab.client), { timeout: 3000, what: 'both servers UP' })

  const inFlight = request(lab.url + '/block?ms=1200', { timeout: 10000 })
  await waitFor(async () => (await lab.client.servers('pool')).worker1.scur === 1,
    { timeout: 2000, interval: 5, what: 'the request on worker1' })

  // Record every status worker1 goes through until the pool has exited. The first sample is
  // taken before the SIGTERM, so the UP before the stop is always on record.
  const seen = []
  const sample = async () => {
    const s = await lab.client.servers('pool')
    const row = `${s.worker1.status}/${s.worker2.status}`
    if (seen.at(-1) !== row) seen.push(row)
  }
  await sample()
  let polling = true
  const poller = (async () => {
    while (polling) {
      await sample()
      await sleep(3) // sampled about every 3 ms
    }
  })()
  pool.kill('SIGTERM')
  const response = await inFlight
  const exit = await pool.exited
  polling = false
  await poller
  const worker1 = seen.map((r) => r.split('/')[0]).filter((s, i, a) => s !== a[i - 1])
  t.comment(`worker1/worker2 statuses during the stop: ${seen.join(' → ')}`)
  t.same(worker1, ['UP', 'DRAIN', 'MAINT'], 'worker1: DRAIN while its request ran, then MAINT')
  t.equal(response.status, 200, 'the request in flight at the stop completed')
  t.same(await statuses(lab.client), { worker1: 'MAINT', worker2: 'MAINT' }, 'every server ends MAINT')
  t.equal(exit.code, 0, 'a clean stop')
  const order = pool.logs.filter((l) => ['haproxy-drained', 'haproxy-maint'].includes(l.event) && l.slot === 1)
    .map((l) => l.event)
  t.same(order, ['haproxy-drained', 'haproxy-maint'], 'drained before it was stopped')
  const at = (event) => pool.logs.findIndex((l) => l.event === event && l.slot === 1)
  t.ok(at('haproxy-maint') < at('exit'),
    'MAINT before its worker stopped: no health check could see its port closed while it was DRAIN')
})

// In a fleet, an edge asks the host's agent how it is: on a stop, the servers stay READY until
// the edge has had --stop-announce to hear `drain`, and what the edge still sends meanwhile is
// served, where DRAIN would leave it queued in this HAProxy with no server to take it.
onPlatforms(t, 'graceful stop, watched by an edge\'s agent: READY and serving for --stop-announce (2 s), ' +
  'then DRAIN', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2 })
  const [agentPort] = await freePorts(1)
  const pool = await startHaproxyPool(t, lab,
    { workers: 2, args: ['--agent-port', String(agentPort), '--agent-host', '127.0.0.1'] })
  await waitFor(allUp(lab.client), { timeout: 3000, what: 'both servers UP' })
  const ask = () => new Promise((resolve, reject) => {
    let line = ''
    net.connect(agentPort, '127.0.0.1').setEncoding('utf8').on('data', (d) => { line += d }).on('end',
      () => resolve(line.trim())).on('error', reject)
  })
  t.match(await ask(), /^up ready maxconn:2/, 'an edge asks the agent')
  const stoppedAt = performance.now()
  pool.kill('SIGTERM')
  await pool.waitLog((l) => l.event === 'stopping')
  t.match(await ask(), /^drain/, 'the agent says drain at once')
  const during = await Promise.all([1, 2, 3].map(() => request(lab.url + '/', { timeout: 5000 })))
  t.same(during.map((r) => r.status), [200, 200, 200], 'what the edge still sends is served')
  t.same(await statuses(lab.client), { worker1: 'UP', worker2: 'UP' }, 'the servers are still READY')
  await waitFor(async () => Object.values(await statuses(lab.client)).every((s) => s !== 'UP'),
    { timeout: 5000, interval: 20, what: 'the servers to drain' })
  const ms = performance.now() - stoppedAt
  t.ok(ms >= 1900, `drained once the announcement was over (${Math.round(ms)} ms after SIGTERM, --stop-announce 2 s)`)
  t.ok(pool.logs.some((l) => l.event === 'haproxy-stop-announced'), 'and said so')
  t.equal((await pool.exited).code, 0, 'a clean stop')
})
