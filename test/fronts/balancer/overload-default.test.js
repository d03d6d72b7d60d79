'use strict'

// Overload protection is the default of `pool start` (issue 21): a pool started with no
// overload flags keeps answering its clients in time when more arrives than it can render,
// where a plain FIFO queue (--no-overload-control) serves each request just after its client
// gave up. And the protection can be turned off in every way an option can be given.
// Real pools (bin/pool.js) with workers that block in Atomics.wait (test/fixtures/control.js,
// /block?ms=N): they take no CPU, so their capacity holds on a loaded machine. Assertions are
// on counts: how many renders reached a client in time, against how many were made.

const t = require('tap')
const path = require('node:path')
const { FIXTURES, freePorts, startPool, request } = require('../../helpers')
const { openLoad } = require('../../helpers/load')
const { assemblePool } = require('../../../lib/config/pool')

const APP = path.join(FIXTURES, 'control.js')

// 6 workers rendering 60 ms each: 100 requests a second. The load is twice that, for 8 s, from
// clients that give up after 1.5 s. A FIFO queue grows by a second's wait every second, so after
// the first 1.5 s it serves only requests whose clients are leaving or gone. The deadline is
// above what the defaults take clients to wait (a second: 100 paces of 10 ms at this pace), so
// that renders slowed down by a busy machine still leave overload control room to act.
const WORKERS = 6
const RENDER_MS = 60
const RATE = 2 * WORKERS * 1000 / RENDER_MS
const SECONDS = 8
const DEADLINE_MS = 1500

async function overloadRun (t, flags) {
  const [port, ...workerPorts] = await freePorts(1 + WORKERS)
  const pool = startPool(['start', APP, '-n', String(WORKERS), '--port', String(port), '--worker-port',
    String(workerPorts[0]), ...flags])
  t.teardown(() => pool.stop('SIGKILL'))
  const listening = await pool.waitLog((l) => l.event === 'balancer-listening')
  await pool.waitLog((l) => l.event === 'started', 30000)
  const base = `http://127.0.0.1:${port}`
  // A few renders first, as a pool in service has made: the queue's pace is then known.
  for (let i = 0; i < 3; i++) t.equal((await request(`${base}/block?ms=${RENDER_MS}`)).status, 200)
  const counts = await openLoad(base,
    { rate: RATE, seconds: SECONDS, deadlineMs: DEADLINE_MS, path: (i) => `/block?ms=${RENDER_MS}&id=${i}` })
  await pool.stop()
  // The access log: one line per request; those that reached a worker were rendered.
  const lines = pool.logs.filter((l) => l.event === 'request' && /&id=/.test(l.url))
  const rendered = lines.filter((l) => l.attempts > 0).length
  const shed = lines.filter((l) => l.reason === 'queue_shed').length
  return { overloadControl: listening.overloadControl, ...counts, rendered, shed }
}

t.test('under overload the default pool keeps answering within the clients\' deadline; ' +
  'without overload control it collapses', async (t) => {
  const protectedRun = await overloadRun(t, [])
  const fifo = await overloadRun(t, ['--no-overload-control'])
  const show = (r) => `${r.ok} in time of ${r.rendered} rendered ` +
    `(${r.sent} sent, ${r.turnedAway} turned away, ${r.gaveUp} gave up, ${r.failed} failed)`
  t.comment(`default: ${show(protectedRun)}`)
  t.comment(`--no-overload-control: ${show(fifo)}`)
  t.equal(protectedRun.overloadControl, true, 'no flag: overload control is on')
  t.equal(fifo.overloadControl, false, '--no-overload-control: off')
  for (const r of [protectedRun, fifo]) {
    t.equal(r.failed, 0, 'every request answered 200 or 503, or given up by its client')
    t.ok(r.rendered > 0)
  }
  // Every render is a worker's capacity spent: with the protection most of it reaches a client
  // in time, without it most is spent on clients that leave before their answer comes.
  t.ok(protectedRun.ok >= 0.75 * protectedRun.rendered,
    `default: most renders answered in time (${protectedRun.ok} of ${protectedRun.rendered})`)
  t.ok(fifo.ok <= 0.6 * fifo.rendered, `FIFO: many renders too late (${fifo.ok} of ${fifo.rendered} in time)`)
  t.ok(protectedRun.ok >= 1.5 * fifo.ok, `default: ${protectedRun.ok} answered in time, FIFO ${fifo.ok}`)
  t.equal(fifo.shed, 0, 'a FIFO queue turns nothing away early')
})

t.test('overload control can be turned off in every way an option is given, and is on without them', async (t) => {
  const dir = t.testdir({ 'off.json': JSON.stringify({ overloadControl: false }) })
  const cases = [
    ['no flag', [], {}, true],
    ['--no-overload-control', ['--no-overload-control'], {}, false],
    ['--overload-control false', ['--overload-control', 'false'], {}, false],
    ['POOL_OVERLOAD_CONTROL=0', [], { POOL_OVERLOAD_CONTROL: '0' }, false],
    ['"overloadControl": false in a --config file', ['--config', path.join(dir, 'off.json')], {}, false]
  ]
  for (const [name, flags, env, expected] of cases) {
    const [port, workerPort] = await freePorts(2)
    const pool = startPool(['start', APP, '-n', '1', '--port', String(port), '--worker-port', String(workerPort),
      ...flags], { env })
    const listening = await pool.waitLog((l) => l.event === 'balancer-listening')
    await pool.stop('SIGKILL')
    t.equal(listening.overloadControl, expected, `${name}: ${expected ? 'on' : 'off'}`)
  }
  const library = (options) => assemblePool({ app: APP, balancer: 'embedded', ...options })
    .front.options.overloadControl
  t.equal(library({}), true, 'library: on by default')
  t.equal(library({ overloadControl: false }), false, 'library: overloadControl: false')
})
