'use strict'

// The embedded balancer when workers fail: redispatch of refused connections, one retry of an
// idempotent request whose worker died, no replay of anything else, a worker killed under load,
// the 504 of --proxy-timeout.

const t = require('tap')
const { request, waitFor, freePorts } = require('./helpers')
const { setup, snapshot } = require('./helpers/balancer')

// A worker the balancer believes in, whose port nobody listens on.
async function deadWorker (slot) {
  const [port] = await freePorts(1)
  return { slot, name: `worker${slot}`, pid: 100000 + slot, host: '127.0.0.1', port, state: 'ready' }
}

t.test('a refused connection is redispatched to another worker, whatever the method', async (t) => {
  const { workers, balancer, seen } = await setup(t, 1, {}, { ready: false })
  balancer.workerReady(await deadWorker(1)) // slot 1 comes first under `balance first`
  balancer.workerReady(snapshot(Object.assign(workers[0], { slot: 2, name: 'worker2' })))
  const r = await request(`${balancer.base}/echo`, { method: 'POST', body: 'once' })
  t.equal(r.status, 200)
  t.equal(JSON.parse(r.body).port, workers[0].port, 'served by the live worker')
  t.equal(seen().length, 1, 'and only once')
  const m = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(m, /pool_redispatches_total\{reason="refused"\} 1/)
  t.match(m, /pool_failures_total\{reason="worker_refused"\} 1/)
})

t.test('when every worker refuses, 502 after --retries redispatches', async (t) => {
  const { balancer } = await setup(t, 0, { retries: 2 })
  balancer.workerReady(await deadWorker(1))
  balancer.workerReady(await deadWorker(2))
  const r = await request(`${balancer.base}/sleep`)
  t.equal(r.status, 502)
  t.match(r.body, /no worker accepted the connection/)
  t.match((await request(`${balancer.statsBase}/metrics`)).body, /pool_failures_total\{reason="worker_refused"\} 3/, 'first try + 2 redispatches')
})

t.test('an idempotent request survives one worker dying with it', async (t) => {
  const { balancer, seen } = await setup(t, 2)
  const r = await request(`${balancer.base}/crash-once`)
  t.equal(r.status, 200)
  const tries = seen().filter((l) => l.url === '/crash-once')
  t.equal(tries.length, 2, 'tried twice')
  t.not(tries[0].pid, tries[1].pid, 'on two different workers')
  t.match((await request(`${balancer.statsBase}/metrics`)).body, /pool_redispatches_total\{reason="died"\} 1/)
})

t.test('a GET that kills every worker it reaches is tried twice, then 502; the pool lives on', async (t) => {
  const { balancer, seen } = await setup(t, 3)
  const r = await request(`${balancer.base}/crash`)
  t.equal(r.status, 502)
  t.match(r.body, /so did the one it was retried on/)
  t.equal(seen().filter((l) => l.url === '/crash').length, 2, 'not a third time')
  t.equal((await request(`${balancer.base}/sleep?after`)).status, 200, 'the third worker still serves')
})

t.test('a POST whose worker dies gets 502 and is never replayed', async (t) => {
  const { balancer, seen } = await setup(t, 2)
  const r = await request(`${balancer.base}/crash`, { method: 'POST', body: 'charge the card' })
  t.equal(r.status, 502)
  t.match(r.body, /never replayed/)
  await request(`${balancer.base}/sleep?after`) // the other worker is alive and idle
  t.equal(seen().filter((l) => l.url === '/crash').length, 1, 'sent once only')
})

t.test('a worker SIGKILLed under load: no request fails', async (t) => {
  const { workers, balancer } = await setup(t, 3)
  const victim = workers[0]
  victim.child.once('exit', () => balancer.workerGone(snapshot(victim))) // as the supervisor does
  const requests = Array.from({ length: 30 }, (_, i) => request(`${balancer.base}/sleep?ms=60&i=${i}`))
  await waitFor(() => balancer.status().queue > 10, { what: 'a queue to build' })
  victim.child.kill('SIGKILL')
  const statuses = (await Promise.all(requests)).map((r) => r.status)
  t.same(statuses, Array(30).fill(200))
  t.equal(balancer.status().workers.find((w) => w.slot === 1).state, 'dead')
})

t.test('--proxy-timeout: a worker silent too long yields 504', async (t) => {
  const { balancer } = await setup(t, 1, { proxyTimeout: 200 })
  const r = await request(`${balancer.base}/sleep?ms=1500`)
  t.equal(r.status, 504)
  t.match(r.body, /proxy-timeout/)
})
