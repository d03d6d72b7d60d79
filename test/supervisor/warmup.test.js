'use strict'

// --warmup: a new worker (first boot, replacement, reload, scale-up) gets its warm-up requests
// before any front is told it is ready; a warm-up that fails is a failed boot.

const t = require('tap')
const path = require('node:path')
const pino = require('pino')
const { Pool, codes } = require('../..')
const { FIXTURES, freePorts, request, waitFor } = require('../helpers')

const APP = path.join(FIXTURES, 'warmup-app.js')
const silent = pino({ level: 'silent' })

// A front that records, for each workerReady, what the worker had served by then.
function recordingFront () {
  const readyLogs = []
  return {
    readyLogs,
    name: 'recorder',
    async start () {},
    workerReady (w) { readyLogs.push(request(`http://127.0.0.1:${w.port}/log`).then((r) => ({ slot: w.slot, ...JSON.parse(r.body) }))) },
    workerGone () {},
    async drain () {},
    async stop () {},
    status () { return { type: 'recorder' } }
  }
}

t.test('every new worker is warmed up before a front hears it is ready', async (t) => {
  const [workerPort] = await freePorts(3)
  const front = recordingFront()
  const states = []
  const pool = new Pool({
    app: APP,
    workers: 2,
    workerPort,
    logger: silent,
    warmup: ['/warm-a', '/warm-b'],
    warmupRequests: 3,
    fronts: [front]
  })
  pool.on('state', (w) => states.push(`${w.slot}:${w.from}→${w.state}`))
  t.teardown(() => pool.kill())
  await pool.start()
  await pool.scale(3)
  await pool.reload()
  const logs = await Promise.all(front.readyLogs)
  t.equal(logs.length, 3 + 3, 'first boots, the scale-up, and every reloaded worker')
  for (const log of logs) {
    // The /log request itself is not recorded: at workerReady the worker had served exactly
    // its warm-up, in order, cycling through the paths.
    t.same(log.seen,
      [{ url: '/warm-a', warmup: true }, { url: '/warm-b', warmup: true }, { url: '/warm-a', warmup: true }],
      `slot ${log.slot} pid ${log.pid}: warmed up, and nothing else, before ready`)
  }
  t.ok(states.includes('1:booting→warming') && states.includes('1:warming→ready'), 'booting → warming → ready')
  // Slot 1's worker has served the recorder's /log and now /real: 2, not 2 + its 3 warm-ups.
  await request(`http://127.0.0.1:${workerPort}/real`)
  await waitFor(() => pool.workers()[0].requests >= 2, { what: 'the idle report' })
  t.equal(pool.workers()[0].requests, 2, 'warm-up requests are not counted as served')
})

t.test('a warm-up that fails is a failed boot', async (t) => {
  const [workerPort] = await freePorts(2)
  const pool = new Pool({
    app: APP,
    workers: 1,
    workerPort,
    logger: silent,
    warmup: ['/warm'],
    warmupRequests: 2,
    maxBootFailures: 2,
    restartDelay: 10,
    env: { WARMUP_FAIL: '1' }
  })
  const exits = []
  pool.on('exit', (w) => exits.push(w.reason))
  t.teardown(() => pool.kill())
  await t.rejects(pool.start(), { code: codes.BOOT_FAILED, message: /warm-up failed: GET \/warm answered 500/ })
  t.same(exits, ['warmup-failed', 'warmup-failed'], 'each failed warm-up ended its worker')
})

t.test('warm-up paths must be paths', async (t) => {
  t.throws(() => new Pool({ app: APP, warmup: ['warm'] }),
    { code: codes.BAD_OPTION, message: 'warmup (--warmup) paths must start with / (got "warm")' })
})
