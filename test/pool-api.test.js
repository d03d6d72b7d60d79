'use strict'
// Library use without the CLI: new Pool(), start(), events for every transition, stop().
const t = require('tap')
const path = require('node:path')
const { Pool, PoolError, codes } = require('..')
const { FIXTURES, freePorts, request, waitFor } = require('./helpers')
const pino = require('pino')

const silent = pino({ level: 'silent' })

t.test('start, events, workers(), stop', async (t) => {
  const ports = await freePorts(2)
  const pool = new Pool({ app: path.join(FIXTURES, 'control.js'), workers: 2, workerPort: ports[0], logger: silent, timeout: 800 })
  const seen = []
  for (const e of ['spawn', 'ready', 'busy', 'idle', 'exit', 'hung', 'state', 'stopped']) pool.on(e, (w) => seen.push([e, w && w.slot]))
  t.teardown(() => pool.kill())
  await pool.start()
  const workers = pool.workers()
  t.same(workers.map((w) => [w.slot, w.port, w.state, w.name]), [[1, ports[0], 'ready', 'worker1'], [2, ports[1], 'ready', 'worker2']])
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

  const result = await pool.stop()
  t.same(result, { clean: true })
  t.ok(seen.some(([e]) => e === 'stopped'), 'stopped event')
  t.same(pool.workers().map((w) => w.state), ['dead', 'dead'])
})

t.test('start() rejects with a coded error when the app cannot boot', async (t) => {
  const ports = await freePorts(1)
  const pool = new Pool({ app: path.join(FIXTURES, 'throws.js'), workers: 1, workerPort: ports[0], logger: silent, restartDelay: 10, maxBootFailures: 2 })
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
  t.throws(() => new Pool({ app: path.join(FIXTURES, 'handler.js'), workers: 0, logger: silent }), { code: codes.BAD_OPTION, message: /workers .* positive integer/ })
})
