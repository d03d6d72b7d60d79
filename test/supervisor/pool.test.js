'use strict'
// Library use without the CLI: new Pool(), start(), events for every transition, stop().
const t = require('tap')
const path = require('node:path')
const { Pool, PoolError, codes } = require('../..')
const { FIXTURES, freePorts, request, waitFor, tempDir } = require('../helpers')
const pino = require('pino')

const silent = pino({ level: 'silent' })

t.test('start, events, workers(), stop', async (t) => {
  const ports = await freePorts(2)
  const pool = new Pool({
    app: path.join(FIXTURES, 'control.js'),
    workers: 2,
    workerPort: ports[0],
    logger: silent,
    timeout: 800
  })
  const seen = [] // busy and idle as the worker's check-ins see it: when a request arrives, then at the next
  for (const e of ['spawn', 'ready', 'busy', 'idle', 'exit', 'hung', 'state', 'stopped']) {
    pool.on(e, (w) => seen.push([e, w && w.slot]))
  }
  t.teardown(() => pool.kill())
  await pool.start()
  const workers = pool.workers()
  t.same(workers.map((w) => [w.slot, w.port, w.state, w.name]),
    [[1, ports[0], 'ready', 'worker1'], [2, ports[1], 'ready', 'worker2']])
  t.ok(workers.every((w) => Number.isInteger(w.pid)), 'every worker has a pid')

  await request(`http://127.0.0.1:${ports[0]}/`)
  await waitFor(() => seen.some(([e, s]) => e === 'idle' && s === 1), { what: 'idle event' })
  t.ok(seen.some(([e, s]) => e === 'busy' && s === 1), 'busy event')
  t.equal(pool.workers()[0].requests, 1, 'requests counted')

  request(`http://127.0.0.1:${ports[1]}/loop`).catch(() => {})
  await waitFor(() => seen.some(([e]) => e === 'hung'), { what: 'hung event', timeout: 5000 })
  await waitFor(() => seen.some(([e, s]) => e === 'exit' && s === 2), { what: 'exit event' })
  await waitFor(() => pool.workers()[1].state === 'ready', { what: 'slot 2 ready again' })
  t.equal(pool.workers()[1].restarts, 1, 'slot 2 restarted once')
  t.equal(pool.workers()[1].lastExit.reason, 'timeout')
  // The pool's own metrics, with no front at all.
  const metrics = await pool.metrics.registry.metrics()
  t.match(metrics, /pool_worker_restarts_total\{worker="worker2"\} 1\n/, 'one restart, counted once')
  t.match(metrics, /pool_worker_restarts_total\{worker="worker1"\} 0\n/)
  t.match(metrics, /pool_failures_total\{reason="worker_hung"\} 1\n/)

  const result = await pool.stop()
  t.same(result, { clean: true })
  t.ok(seen.some(([e]) => e === 'stopped'), 'stopped event')
  t.same(pool.workers().map((w) => w.state), ['dead', 'dead'])
})

t.test('start() rejects with a coded error when the app cannot boot', async (t) => {
  const ports = await freePorts(1)
  const pool = new Pool({
    app: path.join(FIXTURES, 'throws.js'),
    workers: 1,
    workerPort: ports[0],
    logger: silent,
    restartDelay: 10,
    maxBootFailures: 2
  })
  const gaveUp = []
  pool.on('give-up', (w) => gaveUp.push(w))
  const err = await pool.start().catch((e) => e)
  t.type(err, PoolError)
  t.equal(err.code, codes.BOOT_FAILED)
  t.match(err.details.appError.message, /missing DATABASE_URL/)
  t.equal(gaveUp.length, 1)
  t.match(gaveUp[0].error.message, /missing DATABASE_URL/)
})

t.test('a missing app throws POOL_E_APP_NOT_FOUND at construction', async (t) => {
  t.throws(() => new Pool({ app: '/no/such/file.js', workers: 1, logger: silent }), { code: codes.APP_NOT_FOUND })
})

t.test('invalid options throw POOL_E_BAD_OPTION', async (t) => {
  t.throws(() => new Pool({ app: path.join(FIXTURES, 'handler.js'), workers: 0, logger: silent }),
    { code: codes.BAD_OPTION, message: /workers .* positive integer/ })
})

t.test('the heartbeat: a third of --heartbeat-timeout unless given, and below it or refused', async (t) => {
  const app = path.join(FIXTURES, 'handler.js')
  t.equal(new Pool({ app, workers: 1, logger: silent }).options.heartbeatInterval, 10000, 'default: 30 s ÷ 3')
  t.equal(new Pool({ app, workers: 1, logger: silent, heartbeatTimeout: 3000 }).options.heartbeatInterval, 1000,
    'follows the timeout')
  t.equal(new Pool({ app, workers: 1, logger: silent, heartbeatInterval: 200 }).options.heartbeatInterval, 200,
    'as given')
  t.throws(() => new Pool({ app, workers: 1, logger: silent, heartbeatTimeout: 2000, heartbeatInterval: 2000 }),
    {
      code: codes.BAD_OPTION,
      message: 'heartbeatInterval (--heartbeat-interval) 2000 ms must be below heartbeatTimeout ' +
        '(--heartbeat-timeout) 2000 ms: an idle worker would be taken for hung between two heartbeats'
    })
})

t.test('stop() during start(): start rejects with POOL_E_STOPPING instead of hanging', async (t) => {
  const ports = await freePorts(2)
  const pool = new Pool({
    app: path.join(FIXTURES, 'slow-boot.js'),
    workers: 2,
    workerPort: ports[0],
    logger: silent,
    env: { BOOT_MS: '2000' }
  })
  const starting = pool.start()
  const stopped = pool.stop()
  await t.rejects(starting, { code: codes.STOPPING })
  t.same(await stopped, { clean: true })
})

t.test('a worker drained while still loading is not taken for hung', async (t) => {
  const ports = await freePorts(1)
  const pool = new Pool({
    app: path.join(FIXTURES, 'slow-sync-boot.js'),
    workers: 1,
    workerPort: ports[0],
    logger: silent,
    heartbeatTimeout: 300,
    env: { BOOT_MS: '1200' }
  })
  const hung = []
  pool.on('hung', (w) => hung.push(w))
  const starting = pool.start().catch((e) => e)
  await waitFor(() => pool.workers()[0]?.state === 'booting', { what: 'booting' })
  const result = await pool.stop()
  t.equal(hung.length, 0, 'no heartbeat kill while loading')
  t.same(result, { clean: true })
  t.equal((await starting).code, codes.STOPPING)
})

t.test('a reload brings back a slot given up on the old code', async (t) => {
  const fs = require('node:fs')
  const dir = tempDir(t, 'pool-revive-')
  const flag = path.join(dir, 'broken')
  fs.writeFileSync(flag, '2')
  const ports = await freePorts(2)
  const pool = new Pool({
    app: path.join(FIXTURES, 'broken-slot.js'),
    workers: 2,
    workerPort: ports[0],
    logger: silent,
    restartDelay: 10,
    maxBootFailures: 2,
    execArgv: [],
    env: { BROKEN_SLOT_FILE: flag }
  })
  t.teardown(() => pool.kill())
  await pool.start()
  t.same(pool.workers().map((w) => w.state), ['ready', 'given-up'])
  fs.rmSync(flag) // the fix is deployed
  await pool.reload()
  await waitFor(() => pool.workers()[1].state === 'ready', { what: 'slot 2 ready with the new code' })
  t.equal(JSON.parse((await request(`http://127.0.0.1:${ports[1]}/`)).body).slot, '2')
})

t.test('the embedded balancer from the library: balancer, port and its other options', async (t) => {
  const [port, stats, workerPort] = await freePorts(4)
  const pool = new Pool({
    app: path.join(FIXTURES, 'handler.js'),
    workers: 2,
    workerPort,
    logger: silent,
    balancer: 'embedded',
    port,
    maxconn: 1,
    statsPort: stats
  })
  t.teardown(() => pool.kill())
  await pool.start()
  const answers = await Promise.all([1, 2, 3, 4].map((i) => request(`http://127.0.0.1:${port}/?i=${i}`)))
  t.same(answers.map((a) => a.status), [200, 200, 200, 200], 'served through the balancer on `port`')
  t.match(pool.status().front, { type: 'embedded', url: `http://127.0.0.1:${port}`, maxconn: 1 })
  t.match((await request(`http://127.0.0.1:${stats}/metrics`)).body, /pool_worker_requests_total\{worker="worker1"\}/,
    'its metrics in the pool\'s registry')
  t.same(await pool.stop(), { clean: true })
})

// The frames each worker writes to the supervisor, by type, read from the supervisor's end of
// its channel beside the pool.
function framesOf (pool) {
  const counts = {}
  for (const h of pool.handles.values()) {
    h.child.stdio[3].on('data', (bytes) => {
      for (const m of bytes.toString().matchAll(/"type":"([\w-]+)"/g)) counts[m[1]] = (counts[m[1]] ?? 0) + 1
    })
  }
  return counts
}

t.test('a worker sends no message per request: its check-ins count requests, ' +
  'a request as long as it likes kills nothing, a stopped loop is killed', async (t) => {
  for (const balancer of ['embedded', 'none']) {
    const [port, workerPort] = await freePorts(3)
    const pool = new Pool({
      app: path.join(FIXTURES, 'long-lived.js'),
      workers: 1,
      workerPort,
      logger: silent,
      balancer,
      ...(balancer === 'embedded' ? { port } : {}),
      timeout: 800
    })
    t.teardown(() => pool.kill())
    await pool.start()
    const base = `http://127.0.0.1:${balancer === 'embedded' ? port : workerPort}`
    const frames = framesOf(pool)
    for (let i = 0; i < 40; i++) t.equal((await request(`${base}/?i=${i}`)).status, 200)
    await waitFor(() => pool.workers()[0].requests === 40, { what: `${balancer}: the 40 requests counted` })
    t.ok((frames['check-in'] ?? 0) <= 10, `${balancer}: ${frames['check-in']} check-ins for 40 requests`)
    t.same(Object.keys(frames).filter((type) => type !== 'check-in'), [], 'and no other message')
    const stream = await request(`${base}/stream?ms=3000&every=100`, { timeout: 10000 })
    t.equal(stream.status, 200)
    t.match(stream.body, /data: end/, `${balancer}: a stream almost four times --timeout runs to its end`)
    const pid = pool.workers()[0].pid
    const hung = new Promise((resolve) => pool.once('hung', resolve))
    request(`${base}/loop`).catch(() => {})
    t.match(await hung, { slot: 1, pid, reason: 'timeout' }, `${balancer}: its loop stopped: killed`)
    await pool.stop()
  }
})

t.test('unknown options are refused, naming the closest known one', async (t) => {
  const app = path.join(FIXTURES, 'handler.js')
  t.throws(() => new Pool({ app, gracefullTimeout: 1 }),
    { code: codes.BAD_OPTION, message: 'unknown option gracefullTimeout (did you mean gracefulTimeout?)' })
  t.throws(() => new Pool({ app, port: 9001 }),
    { code: codes.BAD_OPTION, message: /unknown option port; .*balancer: 'embedded'/ })
  t.throws(() => new Pool({ app, balancer: 'embedded', maxconn: 0 }),
    { code: codes.BAD_OPTION, message: /^maxconn \(--maxconn\) must be a positive integer/ })
  t.throws(() => new Pool({ app, balancer: 'haproxy' }), { code: codes.BAD_OPTION, message: /needs haproxySocket/ })
  t.throws(() => new Pool({ app, balancer: 'nginx' }),
    { code: codes.BAD_OPTION, message: /balancer must be one of embedded, haproxy, none/ })
  t.throws(() => new Pool({ app, balancer: 'embedded', fronts: [] }),
    { code: codes.BAD_OPTION, message: /either balancer or fronts/ })
  const err = t.throws(() => new Pool({ app, workers: 0 }))
  t.notOk('exitCode' in err, 'a library error carries no CLI exit code')
})

t.test('scale onto a taken port: refused before answering, naming the port and slot', async (t) => {
  const [workerPort] = await freePorts(3)
  const blocker = require('node:net').createServer().listen(workerPort + 2, '127.0.0.1')
  await new Promise((resolve) => blocker.once('listening', resolve))
  t.teardown(() => blocker.close())
  const pool = new Pool({ app: path.join(FIXTURES, 'handler.js'), workers: 2, workerPort, logger: silent })
  t.teardown(() => pool.kill())
  await pool.start()
  await t.rejects(pool.scale(3),
    { code: codes.PORT_IN_USE, message: `port ${workerPort + 2} (slot 3) is already in use on 127.0.0.1` })
  t.equal(pool.target, 2, 'the pool stays at 2')
  t.same(pool.workers().map((w) => w.state), ['ready', 'ready'])
  await t.rejects(pool.scale(70000), { code: codes.BAD_OPTION, message: /above 65535/ })
})
