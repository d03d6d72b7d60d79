'use strict'
// Operating a running pool under load, behind the embedded balancer: rolling reload with no
// failed request, a reload of broken code refused with every old worker serving, scaling, and
// recycling by request count and by memory.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const pino = require('pino')
const { Pool, codes } = require('../..')
const { createBalancer } = require('../../lib/fronts/balancer')
const { FIXTURES, freePorts, request, waitFor, tempDir } = require('../helpers')
const { startLoad, moreAnswers } = require('../helpers/load')

const silent = pino({ level: process.env.TEST_LOG || 'silent' }, pino.destination(2))

// A pool of `workers` behind an embedded balancer, on a copy of `fixture` that the test may
// overwrite to "deploy" new code.
async function startPool (t, { workers = 3, fixture = 'control.js', ...options } = {}) {
  const dir = tempDir(t, 'pool-ops-')
  const app = path.join(dir, 'app.js')
  fs.copyFileSync(path.join(FIXTURES, fixture), app)
  const [port, ...workerPorts] = await freePorts(workers + 4)
  const front = createBalancer({ port }, { logger: silent })
  // execArgv and NODE_OPTIONS cleared: tap's loader hooks stay out of the workers (heavier, slower).
  const pool = new Pool({
    app,
    workers,
    workerPort: workerPorts[0],
    logger: silent,
    fronts: [front],
    execArgv: [],
    env: { NODE_OPTIONS: '' },
    ...options
  })
  t.teardown(() => pool.kill())
  await pool.start()
  // The fewest wanted slots serving at once, watched from the pool's own events.
  pool.minServing = workers
  pool.on('state', () => {
    const serving = pool.workers().filter((w) => w.slot <= pool.target && (w.state === 'ready' || w.state === 'busy'))
      .length
    pool.minServing = Math.min(pool.minServing, serving)
  })
  return { pool, app, url: `http://127.0.0.1:${port}` }
}

const pids = (pool) => pool.workers().map((w) => w.pid)

t.test('reload under load: zero failed requests, every pid replaced, capacity >= N - 1', async (t) => {
  const { pool, url } = await startPool(t, { workers: 3 })
  const before = pids(pool)
  const load = startLoad(url, { concurrency: 6, path: (i) => `/block?ms=15&id=${i}` })
  await moreAnswers(load, 30)
  const result = await pool.reload()
  await moreAnswers(load, 30)
  const stats = await load.stop()
  t.equal(stats.failed, 0, `no failed request (${stats.ok} ok): ${stats.failures.slice(0, 3)}`)
  t.ok(stats.ok > 50, 'the load really ran')
  t.equal(result.replaced.length, 3)
  const after = pids(pool)
  for (const pid of before) t.notOk(after.includes(pid), `old pid ${pid} replaced`)
  t.same(result.replaced.map((r) => r.slot).sort(), [1, 2, 3])
  t.ok(pool.minServing >= 2, `at least N - 1 slots served throughout (min ${pool.minServing})`)
})

t.test('reload to code that throws at load: aborted, every old worker still serving, the error reported', async (t) => {
  const { pool, app, url } = await startPool(t, { workers: 3 })
  const before = pids(pool)
  const load = startLoad(url, { concurrency: 6, path: (i) => `/block?ms=10&id=${i}` })
  fs.writeFileSync(app, "throw new Error('deploy broke: cannot read config.json')\n")
  const err = await pool.reload().catch((e) => e)
  await moreAnswers(load)
  const stats = await load.stop()
  t.equal(err.code, codes.RELOAD_FAILED)
  t.match(err.message, /deploy broke: cannot read config\.json/)
  t.match(err.details.appError.stack, /app\.js:1/, 'the app\'s stack travels with the error')
  t.same(pids(pool), before, 'the same old workers')
  t.ok(pool.workers().every((w) => w.state === 'ready' || w.state === 'busy'), 'all serving')
  t.equal(stats.failed, 0, 'no failed request meanwhile')
  t.equal(pool.minServing, 3, 'no slot was ever taken out')
  t.equal((await request(url + '/')).status, 200)
})

t.test('scale up and down under load: zero failed requests, highest slots leave first', async (t) => {
  const { pool, url } = await startPool(t, { workers: 2 })
  const load = startLoad(url, { concurrency: 5, path: (i) => `/block?ms=10&id=${i}` })
  t.same(await pool.scale(4), { from: 2, to: 4 })
  t.same(pool.workers().map((w) => [w.slot, w.state === 'ready' || w.state === 'busy']),
    [[1, true], [2, true], [3, true], [4, true]])
  const removed = []
  pool.on('removed', (w) => removed.push(w.slot))
  t.same(await pool.scale(1), { from: 4, to: 1 })
  await moreAnswers(load)
  const stats = await load.stop()
  t.equal(stats.failed, 0, `no failed request (${stats.ok} ok): ${stats.failures.slice(0, 3)}`)
  t.same(pool.workers().map((w) => w.slot), [1])
  t.same(removed.sort(), [2, 3, 4])
  await t.rejects(pool.scale(0), { code: codes.BAD_OPTION })
})

t.test('--max-requests with jitter recycles workers, never mid-request, with zero failed requests', async (t) => {
  const { pool, url } = await startPool(t, { workers: 2, maxRequests: 10, maxRequestsJitter: 5 })
  const recycled = []
  const exits = []
  pool.on('draining', (w) => recycled.push({ reason: w.reason, requests: w.requests }))
  pool.on('exit', (w) => exits.push(w))
  const load = startLoad(url, { concurrency: 4, maxRequests: 300, path: (i) => `/block?ms=10&id=${i}` })
  await waitFor(() => load.stats.ok + load.stats.failed >= 300, { timeout: 30000, what: '300 requests' })
  const stats = await load.stop()
  t.equal(stats.failed, 0, `no failed request: ${stats.failures.slice(0, 3)}`)
  t.ok(recycled.length >= 4, `workers were recycled (${recycled.length} times)`)
  t.ok(recycled.every((r) => r.reason === 'max-requests'))
  // Never before its limit (10 + 0..5 jitter); later only while another slot was being replaced.
  t.ok(recycled.every((r) => r.requests >= 10), `each after at least 10 requests: ${recycled.map((r) => r.requests)}`)
  await waitFor(() => exits.length >= recycled.length, { what: 'the recycled workers to exit' })
  t.ok(exits.every((e) => e.reason === 'max-requests' && e.code === 0 && e.signal === null),
    'each left by itself after its last request, none was killed mid-request')
})

t.test('--max-rss recycles a worker whose memory grew past the limit', async (t) => {
  const { pool, url } = await startPool(t, { workers: 1, fixture: 'memory-hog.js', maxRss: 120 })
  const first = pids(pool)[0]
  const drained = []
  pool.on('draining', (w) => drained.push(w))
  for (let i = 0; i < 15 && drained.length === 0; i++) t.equal((await request(url + '/')).status, 200)
  await waitFor(() => pool.workers()[0].pid !== first && pool.workers()[0].state === 'ready',
    { what: 'a fresh worker' })
  t.equal(drained[0].reason, 'max-rss')
  t.ok(drained[0].rss > 120 * 1024 * 1024, `its RSS was above the limit (${Math.round(drained[0].rss / 1048576)} MB)`)
  // The loop may send one more request before it sees the draining event; the replacement
  // serves it, so the fresh process holds one or two buffers, not the old one's dozen.
  const { kept, pid } = JSON.parse((await request(url + '/')).body)
  t.not(pid, first)
  t.ok(kept <= 2, `the new worker starts small (${kept} buffers)`)
  await waitFor(() => pool.workers()[0].rss !== null, { what: 'an RSS report' })
  t.ok(pool.workers()[0].rss < 120 * 1024 * 1024, 'and is under the limit')
})

t.test('a scale superseded by a later one settles instead of hanging', async (t) => {
  const { pool } = await startPool(t, { workers: 1 })
  const first = pool.scale(3)
  const second = pool.scale(2)
  await t.rejects(first, { code: codes.BUSY, message: /superseded by a scale to 2/ })
  t.same(await second, { from: 3, to: 2 })
  t.equal(pool.workers().length, 2)
})
