'use strict'

// The embedded balancer under overload: a standing queue served newest first, requests that
// waited too long in it turned away at once (--overload-control, on by default, its limits scaled
// with the pool's pace unless given), and priority classes
// (--priority-header, --priority-routes). Real worker processes (test/fixtures/balancer-worker.js);
// every assertion is on counts and order, none on speed. One worker held by a long request
// makes a queue that stands for as long as the test needs.

const t = require('tap')
const { request, waitFor, sleep } = require('../../helpers')
const { setup, release } = require('../../helpers/balancer')
const { createBalancer } = require('../../../lib/fronts/balancer')
const { NORMAL } = require('../../../lib/fronts/balancer/priority')
const { OverloadLimits, RenderTime } = require('../../../lib/fronts/balancer/overload')

// Long enough for every queueing step of a test to happen while the worker is held, even on a
// slow, loaded machine.
const HOLD_MS = 2000

// Hold the only worker (with `hold`, a path), then queue `paths` one by one (each waits until it
// is in the queue). `between(i)` may run before path i is sent. Resolves { hold, queued:
// [response promises] }.
async function holdAndQueue (balancer, paths, { between, hold: holdPath = `/sleep?ms=${HOLD_MS}&hold` } = {}) {
  const hold = request(`${balancer.base}${holdPath}`)
  await waitFor(() => balancer.status().inFlight === 1, { interval: 2, what: 'the hold on the worker' })
  const queued = []
  for (const [i, p] of paths.entries()) {
    if (between) await between(i)
    const before = balancer.status().queue
    const { headers = {} } = typeof p === 'object' ? p : {}
    const path = typeof p === 'object' ? p.path : p
    queued.push(request(`${balancer.base}${path}`, { headers }))
    await waitFor(() => balancer.status().queue > before, { interval: 2, what: `${path} queued` })
  }
  return { hold, queued }
}

// The worker's log: the order in which requests reached it (tag=... in their URLs).
const servedTags = (seen) => seen().map((r) => new URL(r.url, 'http://x').searchParams.get('tag')).filter(Boolean)

const requestLines = (balancer) => balancer.logs.filter((l) => l.event === 'request')

t.test('options: overload control on by default, its durations scaled unless given, the priority rules checked', async (t) => {
  const b = createBalancer({})
  t.equal(b.options.overloadControl, true, 'on by default')
  t.same(b.options.overload, { interval: undefined, target: undefined, maxWait: undefined }, 'every duration scaled with the pool\'s pace')
  t.equal(createBalancer({ overloadControl: false }).options.overload, null, 'off when asked')
  t.equal(b.options.priorityOf({ url: '/x', headers: { 'x-priority': 'high' }, socket: {} }), 1, 'every request is normal without rules')
  const given = createBalancer({ overloadMaxWait: 50 })
  t.same(given.options.overload, { interval: undefined, target: undefined, maxWait: 50 }, 'a duration given is kept')
  for (const bad of [
    { priorityRoutes: 'health=high' },
    { priorityRoutes: '/health=urgent' },
    { priorityRoutes: '/a=high,/a=low' },
    { priorityRoutes: ',' },
    { priorityHeader: 'X Priority' },
    { overloadInterval: 0 },
    { overloadMaxWait: 0 },
    { overloadControl: 'yes' }
  ]) {
    t.throws(() => createBalancer(bad), { code: 'POOL_E_BAD_OPTION' }, JSON.stringify(bad))
  }
})

t.test('a standing queue is served newest first with overload control, oldest first without', async (t) => {
  const order = async (options) => {
    const { balancer, seen } = await setup(t, 1, { queueTimeout: 60000, ...options })
    const old = ['o1', 'o2', 'o3', 'o4'].map((tag) => `/sleep?tag=${tag}`)
    const { hold, queued } = await holdAndQueue(balancer, old)
    // The queue stands once nothing has left it for an interval; then two fresh arrivals.
    if (options.overloadControl) await waitFor(() => balancer.dispatcher.standingClasses().includes('normal'), { interval: 5, what: 'the queue standing' })
    else await sleep(150)
    queued.push(request(`${balancer.base}/sleep?tag=f1`))
    await waitFor(() => balancer.status().queue === 5, { interval: 2, what: 'f1 queued' })
    queued.push(request(`${balancer.base}/sleep?tag=f2`))
    await waitFor(() => balancer.status().queue === 6, { interval: 2, what: 'f2 queued' })
    await hold
    const statuses = (await Promise.all(queued)).map((r) => r.status)
    t.same(statuses, Array(6).fill(200), 'nothing turned away (the limit on waiting is far off)')
    t.notOk(balancer.dispatcher.stuck(), 'invariant: nothing waits while a worker is free')
    return servedTags(seen)
  }
  t.same(await order({ overloadControl: true, overloadInterval: 100, overloadTarget: 100, overloadMaxWait: 60000 }), ['f2', 'f1', 'o4', 'o3', 'o2', 'o1'],
    'overload control: the fresh requests, whose clients still wait, go first')
  t.same(await order({ overloadControl: false }), ['o1', 'o2', 'o3', 'o4', 'f1', 'f2'], 'without it: arrival order')
})

t.test('requests that waited too long in a standing queue get 503 at once, never reach a worker, and are counted and logged; the last round is left alone', async (t) => {
  const { balancer, seen } = await setup(t, 1, { queueTimeout: 60000, overloadControl: true, overloadInterval: 100, overloadTarget: 100, overloadMaxWait: 600 })
  const { hold, queued } = await holdAndQueue(balancer, ['/sleep?tag=a', '/sleep?tag=b', '/sleep?tag=c'])
  let holdDone = false
  hold.then(() => { holdDone = true })
  const shed = await Promise.all(queued.slice(0, 2))
  t.notOk(holdDone, 'turned away while the worker was still busy, not when it came free')
  for (const r of shed) {
    t.equal(r.status, 503)
    t.equal(r.headers['retry-after'], '1', 'Retry-After')
    t.match(r.body, /overloaded/)
  }
  // c, alone in the queue of a one-worker pool, is served in the next round whatever happens:
  // turning it away would shorten nobody's wait.
  t.equal((await hold).status, 200)
  t.equal((await queued[2]).status, 200, 'the request one round of the workers serves is kept')
  t.same(servedTags(seen), ['c'], 'no worker rendered a turned-away request')
  const m = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(m, /pool_failures_total\{reason="queue_shed"\} 2/)
  const lines = requestLines(balancer).filter((l) => l.reason === 'queue_shed')
  t.equal(lines.length, 2, 'one access-log line each, with the reason')
  t.ok(lines.every((l) => l.status === 503 && l.attempts === 0))
  t.same(balancer.dispatcher.overload.map((o) => o.stands), [0, 1, 0], 'the normal class began to stand once')
})

t.test('a standing queue recovers once the load drops: oldest first again, and nothing turned away', async (t) => {
  // The interval is long next to the wait of the last step (whose queue must not stand), the
  // maximum wait short next to it (that queue would be shed if it still stood).
  const o = { interval: 2000, target: 100, maxWait: 600 }
  const { balancer, workers: [worker], seen } = await setup(t, 1, { queueTimeout: 60000, overloadControl: true, overloadInterval: o.interval, overloadTarget: o.target, overloadMaxWait: o.maxWait })
  const control = balancer.dispatcher.overload[NORMAL]

  // Overload: nothing leaves the queue for an interval. It stands, and sheds who waited too long.
  const first = await holdAndQueue(balancer, ['/sleep?tag=o1', '/sleep?tag=o2', '/sleep?tag=o3'], { hold: '/sleep?park=1&tag=hold1' })
  await waitFor(() => control.standing, { interval: 5, what: 'the queue standing' })
  t.same((await Promise.all(first.queued.slice(0, 2))).map((r) => r.status), [503, 503], 'the two that waited past the maximum wait are turned away')
  t.equal(balancer.status().queue, 1, 'o3 is kept: one round of the worker serves it')
  // Fresh arrivals while it stands are served newest first; the first one puts o3, which has
  // waited too long, beyond one round, and it is turned away.
  const o3 = balancer.dispatcher.queue.classes[NORMAL].head.item
  await waitFor(() => performance.now() - o3.queuedAt > o.maxWait, { interval: 5, what: 'o3 waiting too long' })
  const fresh = [request(`${balancer.base}/sleep?tag=n1`)]
  t.equal((await first.queued[2]).status, 503, 'o3 is turned away once n1 queues behind it')
  for (const tag of ['n2', 'n3']) {
    fresh.push(request(`${balancer.base}/sleep?tag=${tag}`))
    await waitFor(() => balancer.status().queue === fresh.length, { interval: 2, what: `${tag} queued` })
  }
  release(worker, '1')
  t.same([(await first.hold).status, ...(await Promise.all(fresh)).map((r) => r.status)], [200, 200, 200, 200])
  t.same(servedTags(seen), ['hold1', 'n3', 'n2', 'n1'], 'while it stood: newest first')

  // The load drops: the queue is empty for longer than an interval. Then a queue forms again,
  // shorter than an interval, each request in it waiting past the maximum wait.
  await sleep(o.interval + 200)
  const again = await holdAndQueue(balancer, ['/sleep?tag=r1', '/sleep?tag=r2', '/sleep?tag=r3'], { hold: '/sleep?park=2&tag=hold2' })
  await sleep(o.maxWait + 200)
  t.notOk(control.standing, 'the queue no longer stands')
  release(worker, '2')
  t.same([(await again.hold).status, ...(await Promise.all(again.queued)).map((r) => r.status)], [200, 200, 200, 200], 'nothing is turned away any more')
  t.same(servedTags(seen).slice(4), ['hold2', 'r1', 'r2', 'r3'], 'oldest first again')
  const r1 = await waitFor(() => requestLines(balancer).find((l) => l.url === '/sleep?tag=r1'), { what: 'r1\'s access-log line' })
  t.ok(r1.queueMs > o.maxWait, `r1 waited ${Math.round(r1.queueMs)} ms, past the maximum wait, and was served`)
  t.same(balancer.dispatcher.overload.map((c) => c.stands), [0, 1, 0], 'the queue stood once, not again')
  t.equal(requestLines(balancer).filter((l) => l.reason === 'queue_shed').length, 3, 'only the three were shed')
})

t.test('normal load: overload control at its defaults never finds the queue standing', async (t) => {
  const { balancer } = await setup(t, 3, {})
  const statuses = []
  // Bursts of four 10 ms requests on three workers: a queue forms and drains within a render.
  for (let round = 0; round < 15; round++) {
    const rs = await Promise.all(Array.from({ length: 4 }, (_, i) => request(`${balancer.base}/sleep?ms=10&r=${round}&i=${i}`)))
    statuses.push(...rs.map((r) => r.status))
  }
  t.same(statuses, Array(60).fill(200))
  t.same(balancer.dispatcher.overload.map((o) => o.stands), [0, 0, 0], 'no class ever stood')
  t.equal(requestLines(balancer).filter((l) => l.reason).length, 0, 'nothing turned away')
})

t.test('the limits left unset scale with the pace (typical render ÷ places), never below their floors', async (t) => {
  const limits = (pace, given = {}) => new OverloadLimits(given, () => pace).current()
  t.same(limits(2), { interval: 400, target: 100, maxWait: 200 }, '15 workers, 30 ms renders: the floors')
  t.same(limits(100), { interval: 10000, target: 5000, maxWait: 10000 }, '3 workers, 300 ms renders: 100, 50 and 100 paces')
  t.same(limits(100, { target: 300 }), { interval: 10000, target: 300, maxWait: 10000 }, 'a duration given is kept as given')
  t.same(limits(Infinity), { interval: Infinity, target: Infinity, maxWait: Infinity }, 'pace unknown: the scaled limits judge nothing')
  const renders = new RenderTime()
  t.equal(renders.ms, null, 'no render seen yet')
  for (let i = 0; i < 200; i++) renders.add(30)
  renders.add(5000)
  t.ok(renders.ms > 30 && renders.ms < 40, `a render of 5 s among renders of 30 ms moves the typical render little (${renders.ms.toFixed(1)} ms)`)
})

t.test('slow renders: at the defaults, a queue a few renders long is normal operation, not overload', async (t) => {
  // One worker rendering 300 ms. Fixed limits of a few hundred ms would find this queue standing
  // and turn its requests away; at this pace nothing here is near the scaled limits.
  const { balancer } = await setup(t, 1, {})
  for (let i = 0; i < 3; i++) t.equal((await request(`${balancer.base}/sleep?ms=300&warm=${i}`)).status, 200, 'the pace is learnt')
  const { hold, queued } = await holdAndQueue(balancer, ['/sleep?ms=300&tag=q1', '/sleep?ms=300&tag=q2', '/sleep?ms=300&tag=q3', '/sleep?ms=300&tag=q4'], { hold: '/sleep?ms=300&tag=hold' })
  const statuses = [(await hold).status, ...(await Promise.all(queued)).map((r) => r.status)]
  t.same(statuses, Array(5).fill(200), 'all served, the last after waiting four renders')
  t.same(balancer.dispatcher.overload.map((o) => o.stands), [0, 0, 0], 'the queue never stood')
  const { maxWait } = balancer.dispatcher.limits.current()
  t.ok(maxWait > 4 * 300, `the maximum wait scaled with the renders (${Math.round(maxWait)} ms)`)
})

t.test('priority classes: a higher class overtakes a queue of lower ones; the header is believed from trusted peers only', async (t) => {
  const rules = { queueTimeout: 60000, priorityRoutes: '/health=high,/report/=low', priorityHeader: 'X-Priority' }
  const paths = [
    '/report/x?tag=low1',
    '/report/x?tag=low2',
    '/page?tag=normal1',
    '/health?tag=high1',
    { path: '/report/x?tag=asked-high', headers: { 'X-Priority': 'high' } },
    { path: '/page?tag=asked-low', headers: { 'X-Priority': 'LOW' } }
  ]
  const order = async (options) => {
    const { balancer, seen } = await setup(t, 1, options)
    const { hold, queued } = await holdAndQueue(balancer, paths)
    await hold
    t.same((await Promise.all(queued)).map((r) => r.status), Array(paths.length).fill(200))
    return servedTags(seen)
  }
  t.same(await order(rules), ['high1', 'asked-high', 'normal1', 'low1', 'low2', 'asked-low'], 'from a trusted peer: the header wins over the route')
  t.same(await order({ ...rules, trustProxy: 'none' }), ['high1', 'normal1', 'asked-low', 'low1', 'low2', 'asked-high'], 'from anyone else: the header is ignored')
})

t.test('a full queue gives a higher-class request the place of the lower-class one served last', async (t) => {
  const { balancer, seen } = await setup(t, 1, { queueTimeout: 60000, maxQueue: 2, priorityRoutes: '/health=high,/report/=low' })
  const { hold, queued } = await holdAndQueue(balancer, ['/report/x?tag=low1', '/report/x?tag=low2'])
  const high = request(`${balancer.base}/health?tag=high1`)
  const evicted = await queued[1]
  t.equal(evicted.status, 503, 'the newest low-class request gave way')
  t.match(evicted.body, /queue is full/)
  await waitFor(() => balancer.status().queue === 2, { interval: 2, what: 'the high-class request queued' })
  const lowFull = await request(`${balancer.base}/report/x?tag=low3`)
  t.equal(lowFull.status, 503, 'a low-class request finds the queue full: nobody below it')
  await hold
  t.same([(await high).status, (await queued[0]).status], [200, 200])
  t.same(servedTags(seen), ['high1', 'low1'])
  const m = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(m, /pool_failures_total\{reason="queue_full"\} 2/)
})

t.test('overload with mixed classes: the invariant holds, every request is answered once, turned-away ones never reach a worker', async (t) => {
  const { balancer, seen } = await setup(t, 3, { overloadControl: true, overloadInterval: 50, overloadTarget: 0, overloadMaxWait: 100, priorityRoutes: '/health=high,/report/=low' })
  let stuckSeen = 0
  const watch = setInterval(() => { if (balancer.dispatcher.stuck()) stuckSeen++ }, 2)
  t.teardown(() => clearInterval(watch))
  // 90 requests at once, about 2.7 s of work for three workers: far more than 100 ms of waiting.
  const kinds = ['/sleep?ms=30&tag=n', '/report/x?ms=30&tag=l', '/health?tag=h']
  const responses = await Promise.all(Array.from({ length: 90 }, (_, i) => request(`${balancer.base}${kinds[i % 3]}${i}`)))
  clearInterval(watch)
  t.equal(stuckSeen, 0, 'never a queued request while a worker was free')
  const ok = responses.filter((r) => r.status === 200).length
  const shed = responses.filter((r) => r.status === 503).length
  t.equal(ok + shed, 90, 'each answered 200 or 503')
  t.ok(shed > 0, `the standing queue turned some away (${shed})`)
  t.equal(seen().length, ok, 'only the answered ones reached a worker')
  const m = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(m, new RegExp(`pool_failures_total\\{reason="queue_shed"\\} ${shed}`))
  const highOk = responses.filter((r, i) => i % 3 === 2 && r.status === 200).length
  const lowOk = responses.filter((r, i) => i % 3 === 1 && r.status === 200).length
  t.ok(highOk > lowOk, `the high class fared better than the low one (${highOk} vs ${lowOk} of 30)`)
  t.equal(balancer.status().queue, 0)
})
