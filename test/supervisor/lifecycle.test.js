'use strict'
// Stopping and failing: graceful SIGTERM, a SIGKILLed supervisor, an app that cannot boot.
const t = require('tap')
const { freePorts, request, startPool, waitFor, isAlive, untilBusy, fixture } = require('../helpers')

async function workerPids (pool, n) {
  await waitFor(() => pool.readyCount() >= n, { what: `${n} ready workers` })
  return pool.logs.filter((l) => l.event === 'ready').map((l) => l.pid)
}

t.test('SIGTERM: the running request finishes, every worker is gone, exit 0', async (t) => {
  const ports = await freePorts(2)
  const pool = startPool(['start', fixture('control.js'), '-n', '2', '--worker-port', String(ports[0]), '--balancer',
    'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  const pids = await workerPids(pool, 2)
  const inflight = request(`http://127.0.0.1:${ports[0]}/wait?ms=1500&id=slow`)
  await untilBusy(ports[0])
  pool.kill('SIGTERM')
  const res = await inflight
  t.equal(res.status, 200, 'the request running at SIGTERM got its answer')
  const { code } = await pool.exited
  t.equal(code, 0, 'exit 0')
  for (const pid of pids) t.notOk(isAlive(pid), `worker ${pid} is gone`)
  t.ok(pool.logs.find((l) => l.event === 'stopped' && l.clean === true), 'logged a clean stop')
})

t.test('SIGTERM with a request running past --graceful-timeout: TERM then exit 3', async (t) => {
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('control.js'), '-n', '1', '--worker-port', String(ports[0]), '--balancer',
    'none', '--graceful-timeout', '300ms', '--kill-timeout', '300ms'])
  t.teardown(() => pool.stop('SIGKILL'))
  const [pid] = await workerPids(pool, 1)
  const inflight = request(`http://127.0.0.1:${ports[0]}/wait?ms=3000`).catch((e) => e)
  await untilBusy(ports[0])
  pool.kill('SIGTERM')
  const { code } = await pool.exited
  t.equal(code, 3, 'an unclean stop exits 3')
  t.ok(pool.logs.find((l) => l.event === 'terminate'), 'logged the escalation')
  t.notOk(isAlive(pid))
  t.type(await inflight, Error)
})

t.test('SIGKILL of the supervisor: every worker is gone within 2 s', async (t) => {
  const ports = await freePorts(3)
  const pool = startPool(['start', fixture('handler.js'), '-n', '3', '--worker-port', String(ports[0]), '--balancer',
    'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  const pids = await workerPids(pool, 3)
  pool.kill('SIGKILL')
  await pool.exited
  const started = Date.now()
  await waitFor(() => pids.every((pid) => !isAlive(pid)), { timeout: 2000, what: 'orphans to exit' })
  t.pass(`all ${pids.length} workers exited ${Date.now() - started} ms after the supervisor died`)
  // The ports are free again: nothing is left holding them.
  const { canBind } = require('../helpers')
  for (const port of ports) t.ok(await canBind(port), `port ${port} is free`)
})

t.test('an app that throws at load: exit 1 with the app\'s error, printed once', async (t) => {
  const ports = await freePorts(2)
  const started = Date.now()
  const pool = startPool(['start', fixture('throws.js'), '-n', '2', '--worker-port', String(ports[0]), '--balancer',
    'none', '--restart-delay', '20ms'])
  t.teardown(() => pool.stop('SIGKILL'))
  const { code } = await pool.exited
  t.equal(code, 1)
  t.ok(Date.now() - started < 15000, 'within a bounded time')
  const occurrences = pool.stderrText.split('missing DATABASE_URL').length - 1
  t.equal(occurrences, 1, 'the app\'s error message appears once on stderr')
  t.match(pool.stderrText, /throws\.js:\d+/, 'with its stack')
  const errorLines = pool.logs.filter((l) => l.level >= 50 && l.event === 'boot-error')
  t.equal(errorLines.length, 1, 'one error-level boot-error log line, not a wall of repeats')
  t.equal(pool.logs.filter((l) => l.event === 'give-up').length, 2, 'both slots gave up')
})
