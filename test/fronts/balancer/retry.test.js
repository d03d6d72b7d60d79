'use strict'

// The embedded balancer when workers fail: redispatch of refused connections, one retry of an
// idempotent request whose worker died (served before the requests queued behind it, within the
// queue deadline it got on arrival), no replay of anything else, a worker killed under load, the
// 504 of --read-timeout and of --max-request-time.

const t = require('tap')
const { request, waitFor, freePorts, sleep } = require('../../helpers')
const { setup, snapshot, release } = require('../../helpers/balancer')

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
  t.match((await request(`${balancer.statsBase}/metrics`)).body, /pool_failures_total\{reason="worker_refused"\} 3/,
    'first try + 2 redispatches')
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

// Two workers: worker1 takes /crash-once?park=x (tag x) and dies holding it when the test
// releases it; worker2 is held by a parked request (tag hold) until the test releases it. As the
// supervisor does, the balancer hears of worker1's exit.
async function crashWhileBusy (t, options) {
  const { workers, balancer, seen } = await setup(t, 2, options)
  const [w1, w2] = workers
  w1.child.once('exit', () => balancer.workerGone(snapshot(w1)))
  const x = request(`${balancer.base}/crash-once?park=x&tag=x`)
  await waitFor(() => balancer.status().inFlight === 1, { interval: 2, what: 'x on worker1' })
  const hold = request(`${balancer.base}/sleep?park=hold&tag=hold`)
  await waitFor(() => balancer.status().inFlight === 2, { interval: 2, what: 'the hold on worker2' })
  const crash = async () => {
    for (const w of workers) release(w, 'x') // worker1 dies; on worker2, x will not wait
    await waitFor(() => balancer.logs.some((l) => l.event === 'balancer-redispatch'),
      { interval: 2, what: 'x redispatched' })
  }
  const tagsOn = (w) => seen().filter((l) => l.pid === w.pid)
    .map((l) => new URL(l.url, 'http://x').searchParams.get('tag'))
  return { balancer, w2, x, hold, crash, freeWorker2: () => release(w2, 'hold'), tagsOn }
}

// (While the queue stands, too: dispatcher.test.js, on a simulated clock.)
t.test('a redispatched request is served before the requests that queued behind it', async (t) => {
  const { balancer, w2, x, hold, crash, freeWorker2, tagsOn } = await crashWhileBusy(t, { queueTimeout: 60000 })
  const queued = []
  for (const tag of ['a', 'b', 'c']) {
    queued.push(request(`${balancer.base}/sleep?tag=${tag}`))
    await waitFor(() => balancer.status().queue === queued.length, { interval: 2, what: `${tag} queued` })
  }
  await crash()
  freeWorker2()
  t.same([(await x).status, (await hold).status, ...(await Promise.all(queued)).map((r) => r.status)],
    [200, 200, 200, 200, 200])
  t.same(tagsOn(w2), ['hold', 'x', 'a', 'b', 'c'], 'x ahead of all three')
})

t.test('a redispatched request keeps the queue deadline it got on arrival', async (t) => {
  const QUEUE_TIMEOUT = 2000
  const run = async ({ beforeCrash }) => {
    const { balancer, w2, x, hold, crash, freeWorker2, tagsOn } = await crashWhileBusy(t,
      { queueTimeout: QUEUE_TIMEOUT })
    let answered = false
    x.then(() => { answered = true })
    await beforeCrash()
    await crash() // x must now wait for worker2
    // Half its queue timeout to be turned away (at once, if its deadline has passed) while
    // worker2 is still held; then worker2 comes free, and x is served if it is still queued.
    await waitFor(() => answered, { timeout: QUEUE_TIMEOUT / 2 }).catch(() => {})
    freeWorker2()
    const answer = await x
    t.equal((await hold).status, 200)
    const line = await waitFor(() => balancer.logs.find((l) => l.event === 'request' && l.url.includes('tag=x')),
      { what: 'x\'s access-log line' })
    return { answer, line, onWorker2: tagsOn(w2) }
  }
  // x spends longer than the queue timeout on worker1 (never queued): measured from its arrival,
  // its deadline has passed when it is redispatched, so it is turned away rather than waiting.
  const late = await run({ beforeCrash: () => sleep(QUEUE_TIMEOUT + 200) })
  t.equal(late.answer.status, 503, 'past its deadline: 503')
  t.match(late.answer.body, /waited in the queue/)
  t.equal(late.line.reason, 'queue_timeout')
  t.same(late.onWorker2, ['hold'], 'x never reached worker2')
  // The same at once: within its deadline, x waits for worker2 and is served.
  const early = await run({ beforeCrash: async () => {} })
  t.equal(early.answer.status, 200, 'within its deadline: served')
  t.same(early.onWorker2, ['hold', 'x'])
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

t.test('--read-timeout: a worker silent too long before its head yields 504, that request alone', async (t) => {
  const { balancer } = await setup(t, 1, { readTimeout: 200 })
  const r = await request(`${balancer.base}/sleep?ms=1500`)
  t.equal(r.status, 504)
  t.match(r.body, /read timeout/)
  t.equal((await request(`${balancer.base}/echo`)).status, 200, 'the worker serves on')
})

t.test('--max-request-time: a request past it ends, whatever it sends', async (t) => {
  const { balancer } = await setup(t, 1, { maxRequestTime: 300, readTimeout: 0 })
  const r = await request(`${balancer.base}/sleep?ms=1500`)
  t.equal(r.status, 504)
  t.match(r.body, /request time limit/)
})
