'use strict'

// --worker-concurrency K (issue 29): a worker is admitted by CPU, not by request. Above 1 it may
// hold up to K requests, and is given another only while every request it holds awaits I/O (it
// says so: the 'awaiting' message), never while one renders. Real forked workers serve the
// page of test/fixtures/awaits-data.js: Atomics.wait blocks the loop as a render would, a timer
// stands for awaited data, and the app counts what it held and whether CPU sections overlapped.

const t = require('tap')
const path = require('node:path')
const { Writable } = require('node:stream')
const pino = require('pino')
const { Pool } = require('../../..')
const { FIXTURES, freePorts, request, waitFor, sleep, parseJsonLines } = require('../../helpers')
const { WorkerSet } = require('../../../lib/fronts/balancer/workers')
const { assemblePool } = require('../../../lib/config/pool')
const { EMBEDDED_CONCURRENCY } = require('../../../lib/options/table')

const APP = path.join(FIXTURES, 'awaits-data.js')

// A pool of `workers` on the embedded balancer with the given K; its log lines kept (the access
// log says each request's queue wait).
async function startPool (t, { workers = 1, concurrency, balancer = 'embedded', ...more }) {
  const ports = await freePorts(workers + 1)
  const lines = []
  const sink = new Writable({
    write (chunk, enc, done) {
      lines.push(...parseJsonLines(chunk.toString()))
      done()
    }
  })
  const base = {
    app: APP,
    workers,
    workerPort: ports[1],
    logger: pino({ level: 'info' }, sink),
    workerConcurrency: concurrency,
    ...more
  }
  const pool = new Pool(balancer === 'embedded' ? { ...base, balancer, port: ports[0], overloadControl: false } : base)
  t.teardown(() => pool.kill())
  await pool.start()
  return { pool, lines, url: `http://127.0.0.1:${ports[0]}`, workerUrl: `http://127.0.0.1:${ports[1]}` }
}

const json = (r) => JSON.parse(r.body)
const accessOf = (lines, id) => lines.find((l) => l.event === 'request' && l.id === id)

t.test('pages that await data: with K=4 one worker serves 4 of them in about one round, ' +
  'with K=1 in four', async (t) => {
  const elapsed = {}
  for (const concurrency of [1, 4]) {
    const { pool, url } = await startPool(t, { concurrency })
    const t0 = performance.now()
    const answers = await Promise.all([1, 2, 3, 4].map(() => request(`${url}/?wait=300`)))
    elapsed[concurrency] = performance.now() - t0
    t.same(answers.map((r) => r.status), [200, 200, 200, 200], `K=${concurrency}: every page answered`)
    const held = answers.map((r) => json(r).heldAtStart).sort()
    t.same(held, concurrency === 1 ? [1, 1, 1, 1] : [1, 2, 3, 4],
      `K=${concurrency}: the worker held ${held.join(', ')} requests as each began`)
    await pool.stop()
  }
  const ratio = elapsed[1] / elapsed[4]
  t.ok(ratio > 2.5,
    `K=1 took ${ratio.toFixed(2)}× as long as K=4 (${Math.round(elapsed[1])} against ${Math.round(elapsed[4])} ms): ` +
      'the awaiting requests shared the worker')
})

t.test('the default K: 16 behind the embedded balancer, 1 where no balancer of the pool sees the loop', async (t) => {
  const haproxy = { haproxySocket: '/nonexistent/haproxy.sock' } // checked, never opened: nothing is built
  const k = (options) => assemblePool({ app: APP, ...options }).options.workerConcurrency
  t.equal(k({ balancer: 'embedded' }), EMBEDDED_CONCURRENCY, 'the embedded balancer (`pool start`\'s default)')
  const K = EMBEDDED_CONCURRENCY
  t.equal(K, 16)
  t.equal(k({ balancer: 'haproxy', ...haproxy }), 1, 'HAProxy mode: HAProxy keeps maxconn 1 and cannot see the loop')
  t.equal(k({ balancer: 'none' }), 1, 'workers only')
  t.equal(k({}), 1, 'a library pool with fronts of its own, or none')
  t.equal(k({ balancer: 'embedded', agentPort: 9100 }), 1,
    'a fleet\'s host: the edge sends one request per ready worker')
  t.equal(k({ balancer: 'embedded', workerConcurrency: 1 }), 1, 'K=1 given: today\'s rule')
  t.equal(k({ balancer: 'haproxy', ...haproxy, workerConcurrency: 3 }), 3, 'a K given is kept in any mode')

  // Real workers: with no K given, one worker behind the embedded balancer takes K pages that
  // await their data at once, and a worker with no balancer of the pool's runs one at a time.
  const embedded = await startPool(t, {})
  const answers = await Promise.all(Array.from({ length: K + 1 }, () => request(`${embedded.url}/?wait=300`)))
  const held = answers.map((r) => json(r).heldAtStart)
  const upToK = Array.from({ length: K }, (_, i) => i + 1)
  t.same(upToK.filter((n) => !held.includes(n)), [],
    `embedded: the worker held 1 to ${K} as they began (${held.join(', ')})`)
  t.equal(json(await request(`${embedded.url}/stats`)).maxOpen, K, `never ${K + 1}: the last waited for a place`)
  t.equal(embedded.pool.workers()[0].concurrency, K, `the worker's snapshot says K=${K}`)
  await embedded.pool.stop()
  const alone = await startPool(t, { balancer: 'none' })
  await Promise.all([1, 2].map(() => request(`${alone.workerUrl}/?wait=200`)))
  t.equal(json(await request(`${alone.workerUrl}/stats`)).maxOpen, 1,
    'no balancer: the worker\'s guard ran one request at a time')
  t.equal(alone.pool.workers()[0].concurrency, 1)
})

t.test('a render on the CPU is never given a second request: it waits in the balancer\'s queue', async (t) => {
  const { pool, url, lines } = await startPool(t, { concurrency: 4 })
  // A renders 400 ms on the CPU; B arrives while it does. B must wait in the balancer, not
  // on the worker's busy loop.
  const a = request(`${url}/?cpu=400`, { headers: { 'x-request-id': 'render-a' } })
  await waitFor(() => pool.workers()[0].open === 1, { what: 'A on the worker' })
  const b = await request(`${url}/?cpu=1`, { headers: { 'x-request-id': 'render-b' } })
  t.equal((await a).status, 200)
  t.equal(json(b).heldAtStart, 1, 'B began once A was over: the worker never held both')
  await waitFor(() => accessOf(lines, 'render-b'), { what: 'B\'s access log line' })
  const queued = accessOf(lines, 'render-b').queueMs
  t.ok(queued >= 150,
    `B waited ${queued} ms in the balancer's queue while A rendered (A's render had some 300 ms left)`)

  // C awaits data (the worker says so); D, which renders, is then let in beside it; E arrives
  // while D renders and waits in the queue again, though the worker holds two of its four.
  const c = request(`${url}/?wait=1500`, { headers: { 'x-request-id': 'data-c' } })
  await waitFor(() => pool.workers()[0].open === 1, { what: 'C on the worker' })
  await sleep(50) // time for the worker's word that C awaits its data
  const d = request(`${url}/?cpu=400`, { headers: { 'x-request-id': 'render-d' } })
  await sleep(100) // D on the worker: rendering, it can say so to nobody until it is done
  const e = await request(`${url}/?cpu=1`, { headers: { 'x-request-id': 'render-e' } })
  t.equal(json(await d).heldAtStart, 2, 'D was let in while C awaited its data')
  await waitFor(() => accessOf(lines, 'render-e'), { what: 'E\'s access log line' })
  t.ok(accessOf(lines, 'render-d').queueMs < 50,
    `D waited ${accessOf(lines, 'render-d').queueMs} ms: the worker awaiting C took it at once`)
  t.ok(accessOf(lines, 'render-e').queueMs >= 150,
    `E waited ${accessOf(lines, 'render-e').queueMs} ms in the queue while D rendered`)
  t.equal(json(e).heldAtStart, 2, 'E began beside C only, once D was over')
  t.equal((await c).status, 200)
  const stats = json(await request(`${url}/stats`))
  t.equal(stats.overlaps, 0, 'no CPU section began while another ran')
})

t.test('a render the handler defers to the check phase (as React\'s streaming renderer does) is a render too: ' +
  'no second request meanwhile', async (t) => {
  const { pool, url, lines } = await startPool(t, { concurrency: 4 })
  const a = request(`${url}/?cpu=400&defer=1`, { headers: { 'x-request-id': 'deferred-a' } })
  await waitFor(() => pool.workers()[0].open === 1, { what: 'A on the worker' })
  const b = await request(`${url}/?cpu=1`, { headers: { 'x-request-id': 'deferred-b' } })
  t.equal((await a).status, 200)
  t.equal(json(b).heldAtStart, 1, 'B began once A was over: the worker never held both')
  await waitFor(() => accessOf(lines, 'deferred-b'), { what: 'B\'s access log line' })
  t.ok(accessOf(lines, 'deferred-b').queueMs >= 150,
    `B waited ${accessOf(lines, 'deferred-b').queueMs} ms in the balancer's queue while A rendered`)
  t.equal(json(await request(`${url}/stats`)).overlaps, 0, 'no CPU section began while another ran')
})

t.test('a render the app queues behind the worker\'s first look at its loop is a render too: ' +
  'work after the handler returned, or two hops away', async (t) => {
  // The rest of a streamed page rendered in a task of its own once the shell is written (from a
  // request's 'end' listener: after the handler returned), and a render two check-phase hops
  // away: each is queued behind a look taken once the handler returned, and a single look said
  // "awaiting" before it ran.
  const { pool, url, lines } = await startPool(t, { concurrency: 4 })
  for (const [name, query] of [['after-return', 'tick=1&defer=1'], ['two-hops', 'defer=2']]) {
    const a = request(`${url}/?cpu=400&${query}`, { headers: { 'x-request-id': `${name}-a` } })
    await waitFor(() => pool.workers()[0].open === 1, { what: `${name}: A on the worker` })
    const b = await request(`${url}/?cpu=1`, { headers: { 'x-request-id': `${name}-b` } })
    t.equal((await a).status, 200)
    t.equal(json(b).heldAtStart, 1, `${name}: B began once A was over`)
    await waitFor(() => accessOf(lines, `${name}-b`), { what: `${name}: B's access log line` })
    t.ok(accessOf(lines, `${name}-b`).queueMs >= 150,
      `${name}: B waited ${accessOf(lines, `${name}-b`).queueMs} ms in the balancer's queue while A rendered`)
  }
  t.equal(json(await request(`${url}/stats`)).overlaps, 0, 'no CPU section began while another ran')
})

t.test('a fully idle worker is preferred to one whose requests await data', async (t) => {
  const { url } = await startPool(t, { workers: 2, concurrency: 4 })
  const first = request(`${url}/?wait=600`)
  await sleep(150) // time for its worker's word that it awaits data
  const second = await request(`${url}/?wait=10`)
  t.not(json(second).pid, json(await first).pid, 'the second request went to the idle worker, not beside the first')
})

t.test('the worker\'s own guard runs at most K at once, whoever sends the requests', async (t) => {
  // No balancer: a client talks to the worker's port directly, with 3 requests at once and K=2.
  const { pool, workerUrl } = await startPool(t, { concurrency: 2, balancer: 'none' })
  const answers = await Promise.all([1, 2, 3].map(() => request(`${workerUrl}/?wait=300`)))
  t.same(answers.map((r) => r.status), [200, 200, 200])
  const stats = json(await request(`${workerUrl}/stats`))
  t.equal(stats.maxOpen, 2, 'two ran at once, never three')
  await waitFor(() => pool.workers()[0].queued >= 1, { what: 'the supervisor to hear of the request the guard held' })
  t.equal(pool.workers()[0].queued, 1, 'the third waited in the guard, and the supervisor heard of it')
})

t.test('a worker killed holding 3 awaiting requests: the GETs are replayed on its successor, ' +
  'the POST is answered 502, none is lost', async (t) => {
  const { pool, url } = await startPool(t, { concurrency: 4 })
  const oldPid = pool.workers()[0].pid
  const sent = [
    request(`${url}/?wait=3000`, { headers: { 'x-request-id': 'get-1' } }),
    request(`${url}/?wait=3000`, { headers: { 'x-request-id': 'get-2' } }),
    request(`${url}/?wait=3000`, { method: 'POST', body: 'x', headers: { 'x-request-id': 'post-3' } })
  ]
  await waitFor(() => pool.workers()[0].open === 3, { what: 'three requests on the worker' })
  process.kill(oldPid, 'SIGKILL')
  const [g1, g2, p3] = await Promise.all(sent)
  t.equal(g1.status, 200, 'the first GET was replayed and answered')
  t.equal(g2.status, 200, 'the second GET was replayed and answered')
  t.not(json(g1).pid, oldPid, 'by the new worker')
  t.not(json(g2).pid, oldPid, 'by the new worker')
  t.equal(p3.status, 502, 'the POST, which may have run, is not replayed: its client hears the worker died')
})

t.test('WorkerSet: a word older than the latest request sent is old news; ' +
  'one sent before an answer counts after it', async (t) => {
  const set = new WorkerSet({ maxconn: 1, balance: 'first' })
  const r = set.add({ slot: 1, pid: 10, port: 1, concurrency: 3 })
  t.equal(r.cap, 3)
  // Each request is named by its exchange (X-Pool-Request), the pool's own: two clients sending
  // the same X-Request-Id cannot make one word pass for the other's request.
  r.take({ id: 'same', exchange: 'e.1' })
  t.notOk(set.canTake(r), 'a request just sent runs on the CPU')
  r.awaiting(1, 'e.1')
  t.ok(set.canTake(r), 'it awaits I/O: one more may go')
  r.take({ id: 'same', exchange: 'e.2' })
  r.awaiting(1, 'e.1') // sent before the second reached the worker
  t.notOk(set.canTake(r), 'a word that does not count the second says nothing of it, whatever the X-Request-Ids')
  r.awaiting(1, 'e.2') // it awaits, the first's answer is on its way: the worker counts 1, the balancer 2
  t.notOk(set.canTake(r), 'not while more are held than the worker counted')
  r.giveBack({ exchange: 'e.1' }, true)
  t.ok(set.canTake(r), 'once the first\'s answer is in, the second alone awaits')
  r.take({ exchange: 'e.3' })
  r.awaiting(2, 'e.3')
  r.take({ exchange: 'e.4' })
  r.awaiting(3, 'e.4')
  t.notOk(set.canTake(r), 'never past K renders')
  r.headArrived()
  t.ok(set.canTake(r), 'a response that began holds no render place: one more may go')
  r.take({ exchange: 'e.5' })
  r.headArrived(); r.headArrived(); r.headArrived()
  t.equal(r.renders, 0)
  t.ok(set.canTake(r),
    'every request it holds has its head: one more may go without a word (a stream, a page whose shell is out)')
  r.take({ exchange: 'e.6', longLived: true })
  t.equal(r.renders, 0, 'a long-lived request takes no render place')
  t.ok(set.canTake(r), 'so a render may still go beside it')
  const k1 = set.add({ slot: 2, pid: 11, port: 2 })
  t.equal(k1.cap, 1)
  t.equal(set.pickFree(), k1, 'an idle worker is picked')
})
