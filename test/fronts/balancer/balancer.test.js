'use strict'

// The embedded balancer's dispatching: maxconn, the FIFO queue and its limits, balance modes,
// worker state from the Front hooks, /ping, forwarded headers. Real worker processes on
// loopback (test/fixtures/balancer-worker.js), driven through the Front hooks.

const t = require('tap')
const net = require('node:net')
const { request, waitFor, sleep } = require('../../helpers')
const { setup, snapshot, concurrencyOf, openRequest } = require('../../helpers/balancer')
const { createBalancer, OPTIONS } = require('../../../lib/fronts/balancer')

t.test('options: defaults, bad values rejected', async (t) => {
  const b = createBalancer({})
  t.match(b.options,
    {
      port: 9001,
      host: '127.0.0.1',
      maxconn: 1,
      balance: 'first',
      retries: 3,
      queueTimeout: 20000,
      maxBody: 10 * 1024 * 1024,
      pingPath: '/ping',
      sendTimeout: 60000
    })
  t.equal(b.options.maxQueue, 1024, 'max-queue bounded by default')
  t.notOk('statsPort' in OPTIONS, 'the stats listener is the pool\'s, not the balancer\'s')
  for (const name of ['port', 'host', 'maxconn', 'balance', 'retries', 'queueTimeout', 'maxQueue', 'maxBody',
    'pingPath']) {
    t.ok(OPTIONS[name] && OPTIONS[name].flag && OPTIONS[name].describe, `OPTIONS.${name} is described`)
  }
  t.throws(() => createBalancer({ maxconn: 0 }), { code: 'POOL_E_BAD_OPTION' })
  t.throws(() => createBalancer({ balance: 'random' }), { code: 'POOL_E_BAD_OPTION' })
  t.throws(() => createBalancer({ pingPath: 'ping' }), { code: 'POOL_E_BAD_OPTION' })
})

t.test('a busy port is a PoolError naming it', async (t) => {
  const { balancer } = await setup(t, 0)
  const other = createBalancer({ port: balancer.options.port })
  await t.rejects(other.start(), { code: 'POOL_E_PORT_IN_USE', message: new RegExp(`port ${balancer.options.port}`) })
})

t.test('maxconn 1 holds with far more concurrent requests than workers', async (t) => {
  const { workers, balancer } = await setup(t, 3)
  const responses = await Promise.all(Array.from({ length: 24 },
    (_, i) => request(`${balancer.base}/sleep?ms=40&i=${i}`)))
  t.same(responses.map((r) => r.status), Array(24).fill(200))
  let total = 0
  for (const w of workers) {
    const c = await concurrencyOf(w)
    t.equal(c.max, 1, `worker ${w.slot} never served two requests at once`)
    total += c.count
  }
  t.equal(total, 24, 'every request reached exactly one worker')
})

t.test('maxconn 2 allows two per worker, never three', async (t) => {
  const { workers, balancer } = await setup(t, 2, { maxconn: 2 })
  await Promise.all(Array.from({ length: 16 }, (_, i) => request(`${balancer.base}/sleep?ms=60&i=${i}`)))
  const maxima = await Promise.all(workers.map(async (w) => (await concurrencyOf(w)).max))
  t.same(maxima, [2, 2])
})

t.test('requests waiting for a worker are served in arrival order', async (t) => {
  const { balancer, seen } = await setup(t, 1)
  // The hold outlasts the eight queueing steps below even on a slow, loaded machine.
  const hold = request(`${balancer.base}/sleep?ms=2500&hold`)
  await waitFor(() => balancer.status().inFlight === 1)
  const queued = []
  for (let i = 1; i <= 8; i++) {
    queued.push(request(`${balancer.base}/sleep?order=${i}`))
    await waitFor(() => balancer.status().queue === i, { interval: 2, what: `request ${i} queued` })
  }
  await hold
  await Promise.all(queued)
  const order = seen().filter((r) => r.url.includes('order=')).map((r) => Number(r.url.split('order=')[1]))
  t.same(order, [1, 2, 3, 4, 5, 6, 7, 8])
})

t.test('balance first: the lowest free slot; rr: rotation among free workers', async (t) => {
  const first = await setup(t, 3)
  for (let i = 0; i < 6; i++) await request(`${first.balancer.base}/sleep?first=${i}`)
  t.same(new Set(first.seen().map((r) => r.port)), new Set([first.workers[0].port]), 'first: one hot worker')

  const rr = await setup(t, 3, { balance: 'rr' })
  for (let i = 0; i < 6; i++) await request(`${rr.balancer.base}/sleep?rr=${i}`)
  const perWorker = rr.workers.map((w) => rr.seen().filter((r) => r.port === w.port).length)
  t.same(perWorker, [2, 2, 2], 'rr: evenly spread')
})

t.test('only ready workers get work; a gone worker leaves rotation at once', async (t) => {
  const { workers, balancer, seen } = await setup(t, 2, {}, { ready: false })
  const early = request(`${balancer.base}/sleep?early`)
  await waitFor(() => balancer.status().queue === 1, { what: 'request queued while no worker is ready' })
  balancer.workerReady(snapshot(workers[1]))
  t.equal((await early).status, 200)
  t.same(seen().map((r) => r.port), [workers[1].port], 'served by the only ready worker')

  balancer.workerReady(snapshot(workers[0]))
  await request(`${balancer.base}/sleep?a`)
  t.equal(seen().at(-1).port, workers[0].port, 'slot 1 takes work once ready')
  balancer.workerGone(snapshot(workers[0])) // its process still runs: only the hook took it out
  for (let i = 0; i < 3; i++) await request(`${balancer.base}/sleep?after-gone=${i}`)
  t.same(seen().filter((r) => r.url.includes('after-gone')).map((r) => r.port), Array(3).fill(workers[1].port))
})

t.test('queue timeout: 503 with Retry-After, and the request never reaches a worker', async (t) => {
  const { balancer, seen } = await setup(t, 1, { queueTimeout: 300 })
  const hold = request(`${balancer.base}/sleep?ms=1500`)
  await waitFor(() => balancer.status().inFlight === 1)
  const late = await request(`${balancer.base}/sleep?late`)
  t.equal(late.status, 503)
  t.ok(Number(late.headers['retry-after']) >= 1, 'Retry-After given')
  t.match(late.body, /queue/)
  t.ok(late.headers['x-request-id'], 'the error carries the request id')
  t.equal(balancer.status().inFlight, 1, 'answered while the worker was still busy')
  t.equal((await hold).status, 200)
  t.notOk(seen().some((r) => r.url.includes('late')))
})

t.test('max-queue: beyond it, 503 at once (load shedding)', async (t) => {
  const { balancer, seen } = await setup(t, 1, { maxQueue: 1 })
  const hold = request(`${balancer.base}/sleep?ms=2000`)
  await waitFor(() => balancer.status().inFlight === 1)
  const queued = request(`${balancer.base}/sleep?queued`)
  await waitFor(() => balancer.status().queue === 1)
  const shed = await request(`${balancer.base}/sleep?shed`)
  t.equal(shed.status, 503)
  t.match(shed.body, /max-queue/)
  t.equal(balancer.status().queue, 1, 'shed while the queue was still full')
  t.same([(await hold).status, (await queued).status], [200, 200])
  t.notOk(seen().some((r) => r.url.includes('shed')))
})

t.test('a client that hangs up while queued leaves the queue and never reaches a worker', async (t) => {
  const { balancer, seen } = await setup(t, 1)
  const hold = request(`${balancer.base}/sleep?ms=2000`)
  await waitFor(() => balancer.status().inFlight === 1)
  const gone = openRequest(`${balancer.base}/sleep?abandoned`)
  await waitFor(() => balancer.status().queue === 1)
  gone.req.destroy()
  await waitFor(() => balancer.status().queue === 0, { what: 'the queue to forget the client' })
  await hold
  t.equal((await request(`${balancer.base}/sleep?after`)).status, 200)
  t.notOk(seen().some((r) => r.url.includes('abandoned')), 'the abandoned request was never forwarded')
  const metrics = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(metrics, /pool_failures_total\{reason="client_aborted"\} 1/)
  t.match(balancer.logs.find((l) => l.event === 'request' && l.url === '/sleep?abandoned'),
    { status: 499, reason: 'client_aborted', leftAt: 'queued' }, 'the access log says where the client left')
  t.notOk(balancer.logs.find((l) => l.event === 'request' && l.url === '/sleep?after').leftAt,
    'and says nothing of an answered one')
})

t.test('/ping is answered by the balancer, never by a worker', async (t) => {
  const { balancer, seen } = await setup(t, 1, { pingPath: '/healthz' })
  const ping = await request(`${balancer.base}/healthz`)
  t.equal(ping.status, 200)
  t.equal(ping.body, 'OK\n')
  t.equal((await request(`${balancer.base}/healthz?probe=1`)).status, 200)
  t.same(seen(), [], 'no worker saw a request')
  const noWorkers = await setup(t, 0)
  t.equal((await request(`${noWorkers.balancer.base}/ping`)).status, 200, 'answered even with no worker ready')
})

t.test('an X-Request-Id from a peer outside --trust-proxy is replaced: the pool does not take a stranger\'s word for ' +
  'a request\'s name', async (t) => {
  const { balancer } = await setup(t, 1, { trustProxy: 'none' })
  const seen = JSON.parse((await request(`${balancer.base}/echo`, { headers: { 'X-Request-Id': 'abc-123' } })).body)
  t.match(seen.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'a fresh one')
})

t.test('headers: Host kept, X-Forwarded-*, X-Request-Id added (or kept) and logged, body re-framed', async (t) => {
  const { balancer } = await setup(t, 1)
  const r = await request(`${balancer.base}/echo`,
    {
      method: 'POST',
      body: 'hello world',
      headers: {
        Host: 'shop.example',
        'X-Forwarded-For': '203.0.113.7',
        Connection: 'keep-alive, X-Secret',
        'X-Secret': 'hop'
      }
    })
  const seen = JSON.parse(r.body)
  t.equal(seen.headers.host, 'shop.example')
  t.equal(seen.headers['x-forwarded-for'], '203.0.113.7, 127.0.0.1')
  t.equal(seen.headers['x-forwarded-proto'], 'http')
  t.match(seen.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  t.equal(r.headers['x-request-id'], seen.headers['x-request-id'], 'the client sees the same id')
  t.equal(seen.headers['x-secret'], undefined, 'headers named in Connection are hop-by-hop')
  t.equal(seen.bodyLength, 11)
  await waitFor(() => balancer.logs.find((l) => l.event === 'request' && l.id === seen.headers['x-request-id']),
    { what: 'the access log line with the id' })

  const kept = JSON.parse((await request(`${balancer.base}/echo`,
    { headers: { 'X-Request-Id': 'abc-123', 'X-Forwarded-Proto': 'https' } })).body)
  t.equal(kept.headers['x-request-id'], 'abc-123')
  t.equal(kept.headers['x-forwarded-proto'], 'https')
  t.match(kept.headers['x-pool-request'], /^[\w-]+\.\d+$/,
    'the exchange carries the pool\'s own id, beside the client\'s')
  const forged = JSON.parse((await request(`${balancer.base}/echo`,
    { headers: { 'X-Pool-Request': 'forged.1', 'X-Pool-Stream': '1' } })).body)
  t.not(forged.headers['x-pool-request'], 'forged.1', 'a client\'s X-Pool-Request never reaches a worker')
  t.equal(forged.headers['x-pool-stream'], undefined, 'nor its X-Pool-Stream')

  // A chunked upload reaches the worker with a Content-Length: no framing left to disagree on.
  const chunked = await new Promise((resolve, reject) => {
    const req = require('node:http').request(`${balancer.base}/echo`, { method: 'PUT', agent: false }, (res) => {
      let body = ''
      res.on('data', (c) => { body += c })
      res.on('end', () => resolve(JSON.parse(body)))
    })
    req.on('error', reject)
    req.write('part one, ')
    req.end('part two')
  })
  t.equal(chunked.headers['transfer-encoding'], undefined)
  t.equal(chunked.headers['content-length'], '18')
  t.equal(chunked.bodyLength, 18)
})

t.test('oversize body: 413, and the worker never sees it', async (t) => {
  const { balancer, seen } = await setup(t, 1, { maxBody: 1000 })
  const declared = await request(`${balancer.base}/echo?declared`, { method: 'POST', body: Buffer.alloc(2000, 'a') })
  t.equal(declared.status, 413)
  t.match(declared.body, /max-body/)
  const chunked = await new Promise((resolve, reject) => {
    const options = { method: 'POST', agent: false }
    const req = require('node:http').request(`${balancer.base}/echo?chunked`, options, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    })
    req.on('error', (err) => (err.code === 'ECONNRESET' || err.code === 'EPIPE' ? resolve('reset') : reject(err)))
    req.write(Buffer.alloc(800, 'b'))
    req.end(Buffer.alloc(800, 'b'))
  })
  t.equal(chunked, 413)
  const fits = await request(`${balancer.base}/echo?fits`, { method: 'POST', body: Buffer.alloc(1000, 'c') })
  t.equal(fits.status, 200)
  t.same(seen().map((r) => r.url), ['/echo?fits'])
})

t.test('metrics and status: queue, durations, per-worker state and counters, beside the pool\'s own', async (t) => {
  const { PoolMetrics } = require('../../../lib/observe/metrics')
  const { createFrontContext } = require('../../../lib/fronts/front')
  const snapshots = [{ slot: 1, name: 'worker1', pid: 1, state: 'ready', restarts: 1 },
    { slot: 2, name: 'worker2', pid: 2, state: 'ready', restarts: 0 }]
  // What a Pool gives its fronts (lib/fronts/front.js FrontContext), over stand-in snapshots.
  const metrics = new PoolMetrics(() => snapshots)
  const context = createFrontContext({
    logger: null,
    metrics,
    workers: () => snapshots,
    portOf: (slot) => 9000 + slot,
    target: () => 2
  })
  const { workers, balancer } = await setup(t, 2, { queueTimeout: 1000 }, { context })
  metrics.spawned({ name: 'worker1', restarts: 0 })
  metrics.spawned({ name: 'worker1', restarts: 1 }) // a second start of slot 1: one restart
  metrics.failed('worker_hung')
  for (let i = 0; i < 5; i++) await request(`${balancer.base}/sleep?m=${i}`)
  // Fill both workers, then let one more time out in the queue.
  const holds = [request(`${balancer.base}/sleep?ms=2000`), request(`${balancer.base}/sleep?ms=2000`)]
  await waitFor(() => balancer.status().inFlight === 2)
  const timedOut = request(`${balancer.base}/sleep?timeout`)
  await waitFor(() => balancer.status().queue === 1)
  const during = await request(`${balancer.statsBase}/metrics`)
  t.equal(during.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8')
  t.match(during.body, /\npool_queue_length 1\n/)
  t.match(during.body, /pool_worker_state\{worker="worker1",slot="1",state="busy"\} 1/)
  t.match(during.body, /pool_worker_in_flight\{worker="worker2"\} 1/)
  t.equal((await timedOut).status, 503)
  await Promise.all(holds)

  const m = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(m, /\npool_queue_length 0\n/)
  t.match(m, /pool_queue_wait_seconds_count 7/)
  t.match(m, /pool_request_duration_seconds_count\{code="200"\} 7/)
  t.match(m, /pool_request_duration_seconds_count\{code="503"\} 1/)
  t.match(m, /pool_worker_requests_total\{worker="worker1"\} 6/)
  t.match(m, /pool_worker_requests_total\{worker="worker2"\} 1/)
  t.match(m, /pool_worker_state\{worker="worker1",slot="1",state="ready"\} 1/)
  t.match(m, /pool_worker_restarts_total\{worker="worker1"\} 1/)
  t.match(m, /pool_failures_total\{reason="queue_timeout"\} 1/)
  t.match(m, /pool_failures_total\{reason="worker_hung"\} 1/, 'the pool\'s failures and the balancer\'s in one counter')
  t.match(m, /pool_worker_process_state\{worker="worker1",slot="1",state="ready"\} 1/,
    'the pool\'s own view of each slot')
  t.match(m, /pool_worker_busy_seconds_count 7/)

  t.match(balancer.status(), {
    type: 'embedded',
    url: balancer.base,
    balance: 'first',
    maxconn: 1,
    queue: 0,
    inFlight: 0,
    workers: [
      { slot: 1, name: 'worker1', state: 'ready', pid: workers[0].pid, port: workers[0].port, requests: 6 },
      { slot: 2, name: 'worker2', state: 'ready', pid: workers[1].pid, requests: 1 }
    ]
  })
  t.same(JSON.parse((await request(`${balancer.statsBase}/status`)).body),
    JSON.parse(JSON.stringify(balancer.status())), '/status serves the status given')
  t.equal((await request(`${balancer.statsBase}/nothing`)).status, 404)
  t.match(balancer.logs.find((l) => l.event === 'balancer-listening'), { url: balancer.base })
})

t.test('stopping, unwatched: the listener closes at once; what was queued and running is served', async (t) => {
  const { workers, balancer } = await setup(t, 1, { stopAnnounce: 10000 })
  const inFlight = request(`${balancer.base}/sleep?ms=1500`)
  await waitFor(() => balancer.status().inFlight === 1)
  const queued = [request(`${balancer.base}/sleep?q=1`), request(`${balancer.base}/sleep?q=2`)]
  await waitFor(() => balancer.status().queue === 2)
  balancer.stopping()
  t.match(balancer.logs.find((l) => l.event === 'balancer-closed'), { why: 'unwatched' },
    'no health check asked: nobody to wait for')
  await t.rejects(request(`${balancer.base}/ping`, { timeout: 2000 }), { code: 'ECONNREFUSED' },
    'a refused connection: a balancer in front sends elsewhere')
  let drained = false
  const drain = balancer.drain(snapshot(workers[0])).then(() => { drained = true })
  t.equal(drained, false)
  const statuses = await Promise.all([inFlight, ...queued].map((p) => p.then((r) => r.status)))
  t.same(statuses, [200, 200, 200], 'what was running and queued was served')
  await drain
  t.equal(balancer.status().inFlight, 0)
  await balancer.stop()
})

t.test('stopping: a connection accepted before the close whose request comes after it is served, ' +
  'not cut', async (t) => {
  const { workers, balancer } = await setup(t, 1)
  const socket = net.connect(new URL(balancer.base).port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  await new Promise((resolve) => socket.once('connect', resolve))
  const connections = () => new Promise((resolve, reject) => {
    balancer.server.getConnections((err, n) => (err ? reject(err) : resolve(n)))
  })
  await waitFor(async () => (await connections()) === 1, { what: 'the balancer to accept the connection' })
  balancer.stopping()
  let drained = false
  const drain = balancer.drain(snapshot(workers[0])).then(() => { drained = true })
  await sleep(100) // the drain may not end meanwhile
  t.equal(drained, false, 'the worker is not drained while an accepted connection has not brought its request')
  let reply = ''
  socket.setEncoding('utf8').on('data', (d) => { reply += d })
  socket.on('error', () => {}) // cut by the close: the assertions below say so
  socket.write('GET /sleep?ms=10&late HTTP/1.1\r\nHost: x\r\n\r\n')
  await waitFor(() => /\r\n\r\n/.test(reply) || socket.destroyed, { what: 'the answer' })
  t.match(reply, /^HTTP\/1\.1 200 /, 'served by the worker')
  t.match(reply, /connection: close/i, 'and told the connection closes')
  await drain
})

t.test('stopping, watched: the listener closes after --stop-announce even while workers still serve', async (t) => {
  const { balancer } = await setup(t, 1, { stopAnnounce: 300 })
  t.equal((await request(`${balancer.base}/ping`)).status, 200)
  const running = request(`${balancer.base}/sleep?ms=1500`)
  await waitFor(() => balancer.status().inFlight === 1)
  balancer.stopping()
  t.equal((await request(`${balancer.base}/ping`)).status, 503)
  await waitFor(() => balancer.logs.some((l) => l.event === 'balancer-closed' && l.why === 'announced'),
    { what: 'the close after the announce time' })
  await t.rejects(request(`${balancer.base}/ping`, { timeout: 2000 }), { code: 'ECONNREFUSED' })
  t.equal((await running).status, 200, 'the running request still finished')
})

// Watched (a health check asked /ping before the stop, or an edge the pool's agent), the stop is
// announced before anything changes for the requests: a front that has not heard yet keeps
// sending, and what it sends must be served, not refused.
for (const [watcher, asked] of [['a health check asked /ping', {}],
  ['an edge asked the agent', { agentAsked: () => true }]]) {
  t.test(`stopping, watched (${watcher}): the workers serve as before until --stop-announce, ` +
    'then the listener closes', async (t) => {
    const context = asked.agentAsked
      ? { logger: undefined, workers: () => [], agentAsked: asked.agentAsked }
      : undefined
    const { workers, balancer, seen } = await setup(t, 2, { stopAnnounce: 1500 }, { context })
    if (!asked.agentAsked) {
      t.equal((await request(`${balancer.base}/ping`)).status, 200, 'the health check, before the stop')
    }
    const stoppedAt = Date.now()
    balancer.stopping()
    t.equal((await request(`${balancer.base}/ping`)).status, 503, '/ping says the pool stops')
    let drained = 0
    const drains = workers.map((w) => balancer.drain(snapshot(w)).then(() => { drained++ }))
    // What the front still sends during the announcement reaches both workers, as before.
    const during = await Promise.all(Array.from({ length: 6 },
      (_, i) => request(`${balancer.base}/sleep?ms=100&during=${i}`)))
    t.same(during.map((r) => r.status), Array(6).fill(200), 'served during the announcement')
    t.same(new Set(seen().filter((r) => r.url.includes('during')).map((r) => r.port)),
      new Set(workers.map((w) => w.port)), 'by every worker: none was drained yet')
    t.equal(drained, 0, 'the stop\'s drains wait for the announcement')
    t.notOk(balancer.logs.some((l) => l.event === 'balancer-closed'), 'the listener is still open')
    await Promise.all(drains)
    t.ok(Date.now() - stoppedAt >= 1400, `the drains ended after --stop-announce (${Date.now() - stoppedAt} ms)`)
    t.match(balancer.logs.find((l) => l.event === 'balancer-closed'), { why: 'announced' })
    await t.rejects(request(`${balancer.base}/ping`, { timeout: 2000 }), { code: 'ECONNREFUSED' },
      'then refused: the front knows')
  })
}

t.test('stopping, watched: the listener closes at once when every worker is gone', async (t) => {
  const { workers, balancer } = await setup(t, 1, { stopAnnounce: 10000 })
  await request(`${balancer.base}/ping`)
  balancer.stopping()
  balancer.workerGone(snapshot(workers[0]))
  t.match(balancer.logs.find((l) => l.event === 'balancer-closed'), { why: 'no-worker' },
    'nothing can serve: a refused connection sends the request elsewhere')
})

t.test('drain (reload): the worker gets nothing new and drain resolves when it is idle', async (t) => {
  const { workers, balancer, seen } = await setup(t, 2)
  const held = request(`${balancer.base}/sleep?ms=2000&held`)
  await waitFor(() => balancer.status().inFlight === 1)
  let drained = false
  const drain = balancer.drain(snapshot(workers[0])).then(() => { drained = true })
  for (let i = 0; i < 3; i++) await request(`${balancer.base}/sleep?during=${i}`)
  t.equal(drained, false, 'not drained while its request runs')
  t.same(seen().filter((r) => r.url.includes('during')).map((r) => r.port), Array(3).fill(workers[1].port))
  await held
  await drain
  t.equal(drained, true)
})

t.test('stop answers queued requests with 503', async (t) => {
  const { balancer } = await setup(t, 1)
  const held = request(`${balancer.base}/sleep?ms=2000`).catch((err) => ({ error: err.code }))
  await waitFor(() => balancer.status().inFlight === 1)
  const queued = request(`${balancer.base}/sleep?queued`)
  await waitFor(() => balancer.status().queue === 1)
  await balancer.stop()
  const r = await queued
  t.equal(r.status, 503)
  t.match(r.body, /stopping/)
  await held
})
