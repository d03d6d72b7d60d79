'use strict'

// The embedded balancer under overload, with real worker processes (test/fixtures/balancer-worker.js,
// whose renders await a timer): closed-loop clients are served as a FIFO serves them; under
// overload what can no longer be answered in time gets 503 at once (--overload-control, on by
// default, its maximum wait scaled with the pool's pace unless given); priority classes
// (--priority-header, --priority-routes). Every assertion is on counts and order, none on speed.
// The decisions themselves, step by step on a simulated clock: dispatcher.test.js; on the loads
// of bench/overload.js: overload-shapes.test.js.

const t = require('tap')
const { request, waitFor, sleep } = require('../../helpers')
const { setup, release } = require('../../helpers/balancer')
const { createBalancer } = require('../../../lib/fronts/balancer')
const { NORMAL } = require('../../../lib/fronts/balancer/priority')
const { overloadLimits, Pace } = require('../../../lib/fronts/balancer/overload')
const { startLoad } = require('../../helpers/load')

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

t.test('options: overload control on by default, its durations scaled unless given, ' +
  'the priority rules checked', async (t) => {
  const b = createBalancer({})
  t.equal(b.options.overloadControl, true, 'on by default')
  t.same(b.options.overload, { interval: undefined, maxWait: undefined }, 'every duration scaled with the pool\'s pace')
  t.equal(createBalancer({ overloadControl: false }).options.overload, null, 'off when asked')
  t.equal(b.options.priorityOf({ url: '/x', headers: { 'x-priority': 'high' }, socket: {} }), 1,
    'every request is normal without rules')
  const given = createBalancer({ overloadMaxWait: 50 })
  t.same(given.options.overload, { interval: undefined, maxWait: 50 }, 'a duration given is kept')
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

// The pace, learnt as a pool in service learns it: `n` requests of `ms` sent at once, so that
// they queue and leave the queue one render apart.
async function learnPace (balancer, n = 4, ms = 20) {
  const rs = await Promise.all(Array.from({ length: n },
    (_, i) => request(`${balancer.base}/sleep?ms=${ms}&warm=${i}`)))
  if (rs.some((r) => r.status !== 200)) throw new Error('warm-up failed')
}

t.test('issue 26: closed-loop clients right after a burst of fast requests are served as a FIFO serves them, ' +
  'nothing turned away', async (t) => {
  // 2 workers whose pages await 200 ms of data; 8 clients, each sending its next request once
  // the last is answered: a queue of 6 that stands for as long as they run, and that a FIFO
  // serves in 800 ms. Before this was fixed, the fast requests' pace judged the slow ones, the
  // queue stood, and requests were turned away within the first second.
  const { balancer } = await setup(t, 2, {})
  const burst = startLoad(balancer.base, { concurrency: 8, maxRequests: 300, path: (i) => `/sleep?ms=0&fast=${i}` })
  await waitFor(() => burst.stats.ok + burst.stats.failed === 300, { interval: 10, timeout: 30000, what: 'the burst' })
  const burstStats = await burst.stop()
  t.equal(burstStats.ok, 300, 'the burst is answered')
  const load = startLoad(balancer.base, { concurrency: 8, maxMs: 4000, path: (i) => `/sleep?ms=200&page=${i}` })
  await waitFor(() => balancer.status().queue >= 6, { interval: 5, what: 'the standing queue' })
  await load.done // the load stops by itself: 8 clients, 4 s
  const stats = await load.stop()
  t.ok(stats.sent >= 16, `${stats.sent} pages asked for: the queue of 6 stood for rounds`)
  t.same(stats.failures, [], `every one of the ${stats.sent} pages answered 200`)
  t.same(balancer.dispatcher.overload.byClass.map((o) => o.stands), [0, 0, 0], 'the queue never stood')
  t.equal(requestLines(balancer).filter((l) => l.reason === 'queue_shed').length, 0, 'nothing turned away')
})

t.test('more arriving than the workers take: requests that can no longer be answered in time get 503 at once, ' +
  'never reach a worker, and are counted and logged', async (t) => {
  // One worker rendering 20 ms, clients taken to wait 300 ms. The worker is held while a request
  // arrives every 15 ms for 1.2 s: the queue grows until a FIFO would answer its newest request
  // too late, then stands (once arrivals have spanned each quarter of the 1 s window: a test
  // process stalled for less than a quarter on a loaded machine changes nothing), and every
  // request that has waited too long to be answered in time is turned away, but for the one the
  // worker serves next.
  const { balancer, workers: [worker], seen } = await setup(t, 1,
    { queueTimeout: 60000, overloadMaxWait: 300, overloadInterval: 1000 })
  await learnPace(balancer)
  const hold = request(`${balancer.base}/sleep?park=1&tag=hold`)
  await waitFor(() => balancer.status().inFlight === 1, { interval: 2, what: 'the hold on the worker' })
  const sent = []
  for (let i = 0; i < 80; i++) {
    sent.push(request(`${balancer.base}/sleep?ms=20&tag=q${i}`))
    await sleep(15) // arrivals paced faster than the worker serves them
  }
  await waitFor(() => requestLines(balancer).some((l) => l.reason === 'queue_shed'),
    { interval: 5, what: 'a request turned away' })
  t.ok(balancer.dispatcher.overload.byClass[NORMAL].stands >= 1, 'the queue stood')
  release(worker, '1')
  const answers = [await hold, ...await Promise.all(sent)]
  const shed = answers.filter((r) => r.status === 503)
  t.equal(answers.filter((r) => r.status === 200).length + shed.length, answers.length, 'each answered 200 or 503')
  t.ok(shed.length > 0, `${shed.length} turned away`)
  for (const r of shed) {
    t.equal(r.headers['retry-after'], '1', 'Retry-After')
    t.match(r.body, /overloaded/)
  }
  const lines = requestLines(balancer).filter((l) => l.reason === 'queue_shed')
  t.equal(lines.length, shed.length, 'one access-log line each, with the reason')
  t.ok(lines.every((l) => l.status === 503 && l.attempts === 0), 'none was given a worker')
  const rendered = new Set(servedTags(seen))
  t.ok(lines.every((l) => !rendered.has(new URL(l.url, 'http://x').searchParams.get('tag'))),
    'no worker rendered a turned-away request')
  const m = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(m, new RegExp(`pool_failures_total\\{reason="queue_shed"\\} ${shed.length}`))
  t.notOk(balancer.dispatcher.stuck(), 'invariant: nothing waits while a worker is free')
})

t.test('normal load: overload control at its defaults never finds the queue standing', async (t) => {
  const { balancer } = await setup(t, 3, {})
  const statuses = []
  // Bursts of four 10 ms requests on three workers: a queue forms and drains within a render.
  for (let round = 0; round < 15; round++) {
    const rs = await Promise.all(Array.from({ length: 4 },
      (_, i) => request(`${balancer.base}/sleep?ms=10&r=${round}&i=${i}`)))
    statuses.push(...rs.map((r) => r.status))
  }
  t.same(statuses, Array(60).fill(200))
  t.same(balancer.dispatcher.overload.byClass.map((o) => o.stands), [0, 0, 0], 'no class ever stood')
  t.equal(requestLines(balancer).filter((l) => l.reason).length, 0, 'nothing turned away')
})

t.test('the maximum wait left unset is a second, or 100 paces if longer, at most the queue timeout; ' +
  'the pace is the mean gap between requests leaving a busy queue', async (t) => {
  const limits = (pace, places, given = {}, ceiling) => overloadLimits(given, ceiling ?? Infinity, places, pace)
  t.same(limits(2, 15), { maxWait: 1000, window: 1000, render: 30, places: 15 }, '15 workers rendering 30 ms: a second')
  t.same(limits(100, 2), { maxWait: 10000, window: 10000, render: 200, places: 2 },
    '2 workers rendering 200 ms: 100 paces')
  t.equal(limits(100, 2, {}, 5000).maxWait, 5000,
    'no longer than --queue-timeout: past it the balancer turns the request away itself')
  t.same(limits(100, 2, { maxWait: 300, interval: 50 }), { maxWait: 300, window: 50, render: 200, places: 2 },
    'durations given are kept as given')
  t.same(limits(null, 2), { maxWait: Infinity, window: 1000, render: null, places: 2 },
    'pace unknown: nothing is judged')
  t.same(limits(2, 0), { maxWait: Infinity, window: 1000, render: null, places: 0 },
    'no worker in rotation: nothing is judged')
  const pace = new Pace()
  t.equal(pace.ms(2), null, 'no gap seen yet')
  for (let i = 0; i < 500; i++) pace.add(0.5)
  for (let i = 0; i < 32; i++) pace.add(100)
  t.equal(pace.ms(2), 100, 'the last 16 rounds of gaps decide: a burst before them is forgotten')
  pace.add(5000)
  t.ok(pace.ms(15) < 100 + 5000 / 240 + 1,
    `a worker stuck for 5 s weighs as one gap of the last 240 (${pace.ms(15).toFixed(1)} ms)`)
})

t.test('slow renders: at the defaults, a queue a few renders long is normal operation, not overload', async (t) => {
  // One worker rendering 300 ms. Fixed limits of a few hundred ms would find this queue standing
  // and turn its requests away; at this pace nothing here is near the scaled limits.
  const { balancer } = await setup(t, 1, {})
  await learnPace(balancer, 3, 300)
  const { hold, queued } = await holdAndQueue(balancer,
    ['/sleep?ms=300&tag=q1', '/sleep?ms=300&tag=q2', '/sleep?ms=300&tag=q3', '/sleep?ms=300&tag=q4'],
    { hold: '/sleep?ms=300&tag=hold' })
  const statuses = [(await hold).status, ...(await Promise.all(queued)).map((r) => r.status)]
  t.same(statuses, Array(5).fill(200), 'all served, the last after waiting four renders')
  t.same(balancer.dispatcher.overload.byClass.map((o) => o.stands), [0, 0, 0], 'the queue never stood')
  const { maxWait } = balancer.dispatcher.overload.currentLimits()
  t.ok(maxWait > 10 * 300 && Number.isFinite(maxWait),
    `the maximum wait scaled with the renders (${Math.round(maxWait)} ms)`)
})

t.test('priority classes: a higher class overtakes a queue of lower ones; ' +
  'the header is believed from trusted peers only', async (t) => {
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
  t.same(await order(rules), ['high1', 'asked-high', 'normal1', 'low1', 'low2', 'asked-low'],
    'from a trusted peer: the header wins over the route')
  t.same(await order({ ...rules, trustProxy: 'none' }), ['high1', 'normal1', 'asked-low', 'low1', 'low2', 'asked-high'],
    'from anyone else: the header is ignored')
})

t.test('a full queue gives a higher-class request the place of the lower-class one served last', async (t) => {
  const { balancer, seen } = await setup(t, 1,
    { queueTimeout: 60000, maxQueue: 2, priorityRoutes: '/health=high,/report/=low' })
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

t.test('overload with mixed classes: the invariant holds, every request is answered once, ' +
  'turned-away ones never reach a worker', async (t) => {
  const { balancer, seen } = await setup(t, 3,
    { overloadControl: true, overloadInterval: 400, overloadMaxWait: 300, priorityRoutes: '/health=high,/report/=low' })
  await learnPace(balancer, 9, 30)
  let stuckSeen = 0
  const watch = setInterval(() => { if (balancer.dispatcher.stuck()) stuckSeen++ }, 2)
  t.teardown(() => clearInterval(watch))
  // 150 requests of 30 ms over about 600 ms on three workers: 2.5 times what they render.
  const kinds = ['/sleep?ms=30&tag=n', '/report/x?ms=30&tag=l', '/health?tag=h']
  const pending = []
  for (let i = 0; i < 150; i++) {
    pending.push(request(`${balancer.base}${kinds[i % 3]}${i}`))
    if (i % 3 === 2) await sleep(12)
  }
  const responses = await Promise.all(pending)
  clearInterval(watch)
  t.equal(stuckSeen, 0, 'never a queued request while a worker was free')
  const ok = responses.filter((r) => r.status === 200).length
  const shed = responses.filter((r) => r.status === 503).length
  t.equal(ok + shed, 150, 'each answered 200 or 503')
  t.ok(shed > 0, `the standing queue turned some away (${shed})`)
  t.equal(seen().filter((l) => /tag=/.test(l.url)).length, ok, 'only the answered ones reached a worker')
  const m = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(m, new RegExp(`pool_failures_total\\{reason="queue_shed"\\} ${shed}`))
  const highOk = responses.filter((r, i) => i % 3 === 2 && r.status === 200).length
  const lowOk = responses.filter((r, i) => i % 3 === 1 && r.status === 200).length
  t.ok(highOk > lowOk, `the high class fared better than the low one (${highOk} vs ${lowOk} of 50)`)
  t.equal(balancer.status().queue, 0)
})
