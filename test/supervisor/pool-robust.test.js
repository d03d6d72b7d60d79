'use strict'
// The Pool's lifecycle under awkward timing, through the library: every async method answers
// with a promise, a stop's cleanliness is its own, a crash while draining is a crash, every state
// change has its event, and a stop in the middle of start() or scale() leaves nothing behind.
const t = require('tap')
const path = require('node:path')
const { Writable } = require('node:stream')
const pino = require('pino')
const { Pool, codes } = require('../..')
const { NoFront } = require('../../lib/fronts/front')
const { FIXTURES, freePorts, request, waitFor } = require('../helpers')

const silent = pino({ level: 'silent' })

// A pino logger whose lines the test can read.
function recordingLogger () {
  const lines = []
  const stream = new Writable({ write (chunk, enc, done) { lines.push(JSON.parse(chunk)); done() } })
  const logger = pino({ level: 'info' }, stream)
  logger.lines = lines
  return logger
}

// execArgv and NODE_OPTIONS cleared: tap's loader hooks stay out of the workers.
async function newPool (t, { workers = 1, fixture = 'control.js', ...options } = {}) {
  const ports = await freePorts(workers + 1)
  const pool = new Pool({
    app: path.join(FIXTURES, fixture),
    workers,
    workerPort: ports[0],
    logger: silent,
    execArgv: [],
    env: { NODE_OPTIONS: '' },
    ...options
  })
  t.teardown(() => pool.kill())
  return { pool, ports }
}

// Calls fn and reports how it answered: a promise (settled or not) or a synchronous throw.
function answerOf (fn) {
  try { return fn() } catch (err) { return { threw: err } }
}

async function assertRejects (t, what, fn, code) {
  const answer = answerOf(fn)
  t.ok(answer instanceof Promise, `${what} returns a promise${answer.threw ? ` (it threw ${answer.threw.code})` : ''}`)
  if (answer instanceof Promise) await t.rejects(answer, { code }, `${what} rejects with ${code}`)
}

t.test('every async method answers with a promise, before start and after stop', async (t) => {
  const { pool } = await newPool(t)
  await assertRejects(t, 'reload() before start', () => pool.reload(), codes.NOT_STARTED)
  await assertRejects(t, 'scale() before start', () => pool.scale(2), codes.NOT_STARTED)
  await assertRejects(t, 'scale(0) before start', () => pool.scale(0), codes.NOT_STARTED)
  t.same(await pool.stop(), { clean: true }, 'stop() before start resolves')

  const { pool: started } = await newPool(t)
  await started.start()
  await assertRejects(t, 'scale(0) while running', () => started.scale(0), codes.BAD_OPTION)
  await assertRejects(t, 'a second start()', () => started.start(), codes.BAD_OPTION)
  t.same(await started.stop(), { clean: true })
  await assertRejects(t, 'reload() after stop', () => started.reload(), codes.STOPPING)
  await assertRejects(t, 'scale() after stop', () => started.scale(2), codes.STOPPING)
  await assertRejects(t, 'start() after stop', () => started.start(), codes.BAD_OPTION)
  t.same(await started.stop(), { clean: true }, 'a second stop() resolves the same way')
  t.same(await started.kill(), { clean: true }, 'kill() after the stop resolves too')
})

t.test('a drain that needed SIGTERM during a reload does not make a later stop unclean', async (t) => {
  const logger = recordingLogger()
  const { pool, ports } = await newPool(t, { gracefulTimeout: 200, killTimeout: 2000, logger })
  await pool.start()
  const oldPid = pool.workers()[0].pid
  const cut = request(`http://127.0.0.1:${ports[0]}/wait?ms=5000`).catch((err) => err)
  await waitFor(() => pool.workers()[0].state === 'busy', { what: 'the request running' })
  const result = await pool.reload()
  t.equal(result.replaced.length, 1, 'the reload replaced the worker')
  t.type(await cut, Error, 'the request outlived --graceful-timeout and was cut')
  const terminated = logger.lines.find((l) => l.event === 'terminate')
  t.match(terminated, { pid: oldPid }, 'the reload had to SIGTERM the old worker')
  // The reload ends when the new worker is ready; the old one retires and exits after.
  const exited = await waitFor(() => logger.lines.find((l) => l.event === 'exit' && l.pid === oldPid),
    { what: 'the old worker\'s exit' })
  t.match(exited, { reason: 'reload', signal: 'SIGTERM', level: 30 },
    'an exit by the SIGTERM the pool sent is the drain\'s, not a crash')
  t.same(await pool.stop(), { clean: true }, 'the stop itself signalled nobody: clean')
})

t.test('a worker that crashes while draining for scale-down is logged as a crash, ' +
  'and its slot still goes', async (t) => {
  const logger = recordingLogger()
  const { pool, ports } = await newPool(t, { workers: 2, logger })
  const exits = []
  pool.on('exit', (w) => exits.push(w))
  await pool.start()
  const pid = pool.workers()[1].pid
  request(`http://127.0.0.1:${ports[1]}/wait?ms=10000`).catch(() => {})
  await waitFor(() => pool.workers()[1].state === 'busy', { what: 'slot 2 busy' })
  const scaling = pool.scale(1)
  await waitFor(() => pool.workers()[1]?.state === 'draining', { what: 'slot 2 draining' })
  process.kill(pid, 'SIGKILL') // a signal the pool did not send
  t.same(await scaling, { from: 2, to: 1 }, 'the scale-down completes')
  t.match(exits.find((w) => w.pid === pid), { slot: 2, signal: 'SIGKILL', reason: 'crashed', draining: 'scale-down' },
    'the exit event says crashed, while draining')
  t.match(logger.lines.find((l) => l.event === 'exit' && l.pid === pid),
    { level: 40, reason: 'crashed', draining: 'scale-down' }, 'logged as a warning')
  t.same(pool.workers().map((w) => w.slot), [1], 'slot 2 was removed, as the drain it interrupted would have')
  t.notOk(logger.lines.some((l) => l.event === 'respawn-scheduled'), 'no respawn for a slot going away')
})

t.test('a worker that crashes while it retires (drained for a reload, finishing what it holds) is a crash; ' +
  'the reload completes', async (t) => {
  const logger = recordingLogger()
  const { pool, ports } = await newPool(t, { logger })
  await pool.start()
  const pid = pool.workers()[0].pid
  request(`http://127.0.0.1:${ports[0]}/wait?ms=10000`).catch(() => {})
  await waitFor(() => pool.workers()[0].state === 'busy', { what: 'the request running' })
  const result = await pool.reload()
  t.same(result.replaced.map((r) => r.oldPid), [pid], 'the reload completed, its request still open')
  t.match(logger.lines.find((l) => l.event === 'retiring'), { pid, open: 1, reason: 'reload' })
  process.kill(pid, 'SIGKILL')
  await waitFor(() => logger.lines.some((l) => l.event === 'exit' && l.pid === pid), { what: 'its exit' })
  t.match(logger.lines.find((l) => l.event === 'exit' && l.pid === pid),
    { level: 40, reason: 'crashed', draining: 'reload', retiring: true })
  t.notOk(logger.lines.some((l) => l.event === 'respawn-scheduled'), 'its slot was replaced before: nothing to respawn')
  t.equal(pool.workers()[0].state, 'ready')
})

t.test('a worker\'s whole life emits every state change exactly once, in order', async (t) => {
  const { pool, ports } = await newPool(t, { maxRequests: 1 }) // one request, then recycled
  const changes = []
  pool.on('state', (w) => changes.push(`${w.from}>${w.state}`))
  await pool.start()
  const first = pool.workers()[0].pid
  await request(`http://127.0.0.1:${ports[0]}/`)
  await waitFor(() => pool.workers()[0].pid !== first && pool.workers()[0].state === 'ready',
    { what: 'the recycled slot ready again' })
  await pool.stop()
  t.same(changes, [
    'dead>booting', 'booting>ready', // spawn, ready
    'ready>busy', 'busy>ready', // one request
    'ready>draining', 'draining>dead', // recycled after it: drain, exit
    'dead>booting', 'booting>ready', // respawn
    'ready>draining', 'draining>dead' // stop
  ])
})

// A front whose start() the test finishes by hand, recording the order of its calls.
class SlowFront extends NoFront {
  constructor () {
    super()
    this.calls = []
    this.started = new Promise((resolve) => { this.finishStart = resolve })
  }

  async start () {
    this.calls.push('start')
    await this.started
    this.calls.push('listening')
  }

  async stop () { this.calls.push('stop') }
}

t.test('stop() while a front is still starting stops it after it listens, not before', async (t) => {
  const front = new SlowFront()
  const { pool } = await newPool(t, { fronts: [front] })
  const starting = pool.start()
  await waitFor(() => front.calls.includes('start'), { what: 'the front starting' })
  const stopped = pool.stop()
  // The stop has run its course as far as it can while the front is still starting.
  await waitFor(() => pool.status().phase === 'stopped', { what: 'the pool stopped' })
  front.finishStart()
  await t.rejects(starting, { code: codes.STOPPING })
  t.same(await stopped, { clean: true })
  t.same(front.calls, ['start', 'listening', 'stop'], 'the listener opened during the stop was closed')
  t.same(pool.workers(), [], 'no worker was forked')
})

t.test('a scale() whose front check is pending when the pool stops rejects instead of hanging', async (t) => {
  let release
  const front = new NoFront()
  front.checkScale = () => new Promise((resolve) => { release = resolve })
  const { pool } = await newPool(t, { fronts: [front] })
  await pool.start()
  const scaling = pool.scale(2)
  await waitFor(() => release, { what: 'the front checking the scale' })
  t.same(await pool.stop(), { clean: true })
  release()
  const answer = await Promise.race([scaling.then(() => 'resolved', (err) => err),
    new Promise((resolve) => setTimeout(resolve, 5000, 'still pending'))])
  t.equal(answer.code, codes.STOPPING, `scale() rejected with POOL_E_STOPPING (got ${answer.code || answer})`)
  t.equal(pool.target, 1, 'the stopped pool was not asked for more workers')
})

t.test('a user\'s --max-http-header-size in execArgv wins over the pool\'s', async (t) => {
  const { pool, ports } = await newPool(t, { execArgv: ['--max-http-header-size=8192'] })
  await pool.start()
  const res = await request(`http://127.0.0.1:${ports[0]}/`, { headers: { 'x-big': 'v'.repeat(12 * 1024) } })
  t.equal(res.status, 431, 'the user\'s 8 KiB limit applies')
})
