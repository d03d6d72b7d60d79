'use strict'
// The supervisor keeps slots alive: respawn on the same port, backoff, hung and silent workers,
// boot timeout, and the in-worker one-request-at-a-time guard.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const {
  freePorts, request, startPool, waitFor, isAlive, poolStatus, untilBusy, tempDir, fixture
} = require('../helpers')

t.test('SIGKILL of a worker: a new pid serves on the same port', async (t) => {
  const ports = await freePorts(2)
  const pool = startPool(['start', fixture('handler.js'), '-n', '2', '--worker-port', String(ports[0]), '--balancer',
    'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const before = JSON.parse((await request(`http://127.0.0.1:${ports[1]}/`)).body)
  process.kill(before.pid, 'SIGKILL')
  const exit = await pool.waitLog((l) => l.event === 'exit' && l.pid === before.pid)
  t.equal(exit.signal, 'SIGKILL')
  t.equal(exit.slot, 2)
  await pool.waitLog((l) => l.event === 'ready' && l.slot === 2 && l.pid !== before.pid)
  const after = JSON.parse((await request(`http://127.0.0.1:${ports[1]}/`)).body)
  t.not(after.pid, before.pid, 'a new process')
  t.equal(after.slot, '2', 'in the same slot, on the same port')
})

t.test('respawn backoff grows per consecutive crash and resets after healthy uptime', async (t) => {
  const dir = tempDir(t, 'pool-backoff-')
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('crash-schedule.js'), '-n', '1', '--worker-port', String(ports[0]),
    '--balancer', 'none',
    '--restart-delay', '100ms', '--restart-factor', '2', '--healthy-after', '500ms'],
  { env: { CRASH_COUNTER: path.join(dir, 'boots'), FAST: '3', LONG_MS: '1500' } })
  t.teardown(() => pool.stop('SIGKILL'))
  // boots 1-3 die 50 ms after ready, boot 4 lives 1500 ms (> healthy-after), boot 5 dies fast.
  await waitFor(() => pool.logs.filter((l) => l.event === 'respawn-scheduled').length >= 5,
    { timeout: 15000, what: '5 respawns' })
  const delays = pool.logs.filter((l) => l.event === 'respawn-scheduled').slice(0, 5).map((l) => l.delay)
  t.same(delays.slice(0, 3), [100, 200, 400], 'delay doubles on each consecutive crash')
  t.equal(delays[3], 0, 'a death after healthy uptime is no crash loop: respawned at once')
  t.equal(delays[4], 100, 'and the count started over')
  const spawns = pool.logs.filter((l) => l.event === 'spawn')
  const gap = spawns[3].time - pool.logs.find((l) => l.event === 'exit' && l.pid === spawns[2].pid).time
  t.ok(gap >= 380, `the third respawn waited its delay (${gap} ms)`)
})

t.test('kills from outside cost no backoff: a worker that served is respawned at once, kill after kill', async (t) => {
  const ports = await freePorts(2)
  const pool = startPool(['start', fixture('handler.js'), '-n', '2', '--worker-port', String(ports[0]), '--balancer',
    'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const kills = 8
  const killed = new Set()
  for (let i = 0; i < kills; i++) {
    const { pid } = JSON.parse((await request(`http://127.0.0.1:${ports[0]}/`)).body)
    // It served, and the supervisor has heard the request end: a worker the OOM killer or an
    // operator picks has usually served many.
    await waitFor(async () => (await poolStatus(['--port', String(ports[0])])).workers.some((w) => w.pid === pid &&
      w.requests >= 1), { what: 'the request counted' })
    process.kill(pid, 'SIGKILL')
    killed.add(pid)
    await pool.waitLog((l) => l.event === 'exit' && l.pid === pid)
    await pool.waitLog((l) => l.event === 'ready' && l.slot === 1 && !killed.has(l.pid))
  }
  const scheduled = pool.logs.filter((l) => l.event === 'respawn-scheduled')
  t.equal(scheduled.length, kills)
  t.same(scheduled.map((l) => l.delay), Array(kills).fill(0), 'every respawn at once: no delay grows kill after kill')
  t.same(scheduled.map((l) => l.crashes), Array(kills).fill(0), 'and no crash counted')
  t.equal(JSON.parse((await request(`http://127.0.0.1:${ports[0]}/`)).body).slot, '1', 'the slot serves')
})

t.test('an endless-loop request: worker killed after --timeout and replaced; ' +
  'other slots serve meanwhile', async (t) => {
  const ports = await freePorts(2)
  const pool = startPool(['start', fixture('control.js'), '-n', '2', '--worker-port', String(ports[0]), '--balancer',
    'none', '--timeout', '2s'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const hungPid = JSON.parse((await request(`http://127.0.0.1:${ports[0]}/`)).body).pid
  // Until its check-in says it holds nothing again: else the first request's busy would pass for the loop's.
  await waitFor(async () => (await poolStatus(['--port', String(ports[0])])).workers.some((w) => w.pid === hungPid &&
    w.requests >= 1 && w.open === 0 && w.state === 'ready'), { timeout: 5000, what: 'its check-in to hold nothing' })
  const looping = request(`http://127.0.0.1:${ports[0]}/loop?id=x`, { timeout: 10000 }).catch((err) => err)
  await untilBusy(ports[0], 'the looping request to start')
  // While slot 1 spins, slot 2 keeps answering: every answer comes before slot 1 is killed.
  for (let i = 0; i < 3; i++) {
    const res = await request(`http://127.0.0.1:${ports[1]}/`)
    t.equal(res.status, 200)
    t.notOk(pool.logs.some((l) => l.event === 'hung'), 'slot 2 answered while slot 1 was still spinning')
  }
  const hung = await pool.waitLog((l) => l.event === 'hung', 8000)
  t.match(hung, { slot: 1, pid: hungPid, method: 'GET', url: '/loop?id=x', reason: 'timeout' },
    'the log line names slot, pid, and the request its last check-in named')
  t.ok(hung.ms >= 2000 && hung.ms < 4000, `killed after the timeout (${hung.ms} ms)`)
  t.type(await looping, Error, 'the looping request did not get an answer')
  await pool.waitLog((l) => l.event === 'ready' && l.slot === 1 && l.pid !== hungPid)
  t.equal(JSON.parse((await request(`http://127.0.0.1:${ports[0]}/`)).body).slot, '1', 'slot 1 serves again')
  t.notOk(isAlive(hungPid), 'the hung process is gone')
})

t.test('a worker that stops sending heartbeats while idle is killed and replaced', async (t) => {
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('idle-hang.js'), '-n', '1', '--worker-port', String(ports[0]), '--balancer',
    'none',
    '--heartbeat-interval', '100ms', '--heartbeat-timeout', '700ms'], { env: { HANG_AFTER_MS: '300' } })
  t.teardown(() => pool.stop('SIGKILL'))
  const ready = await pool.waitLog((l) => l.event === 'ready')
  const hung = await pool.waitLog((l) => l.event === 'hung', 5000)
  t.match(hung, { reason: 'heartbeat', slot: 1, pid: ready.pid })
  await pool.waitLog((l) => l.event === 'ready' && l.pid !== ready.pid)
  t.notOk(isAlive(ready.pid))
})

t.test('a worker not ready within --boot-timeout is killed and counts as a failed start', async (t) => {
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('never-listens.js'), '-n', '1', '--worker-port', String(ports[0]),
    '--balancer', 'none',
    '--boot-timeout', '400ms', '--max-boot-failures', '2', '--restart-delay', '50ms'])
  t.teardown(() => pool.stop('SIGKILL'))
  const { code } = await pool.exited
  t.equal(code, 1, 'every slot gave up: exit 1')
  t.equal(pool.logs.filter((l) => l.event === 'boot-timeout').length, 2, 'two boot timeouts')
  t.match(pool.logs.find((l) => l.event === 'give-up'), { slot: 1, failures: 2, level: 50 })
  t.match(pool.stderrText, /not ready within 400 ms/)
})

t.test('two concurrent requests sent straight to one worker never interleave', async (t) => {
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('control.js'), '-n', '1', '--worker-port', String(ports[0]), '--balancer',
    'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const base = `http://127.0.0.1:${ports[0]}`
  const [a, b] = await Promise.all([request(`${base}/wait?ms=300&id=a`), request(`${base}/wait?ms=300&id=b`)])
  t.equal(a.status, 200)
  t.equal(b.status, 200)
  const stats = JSON.parse((await request(`${base}/stats`)).body)
  t.equal(stats.maxActive, 1, 'never two requests at once in the process')
  const order = stats.log.filter((e) => !e.endsWith('null'))
  t.ok(order.join() === 'start a,end a,start b,end b' || order.join() === 'start b,end b,start a,end a',
    `one after the other: ${order.join()}`)
  const warn = await pool.waitLog((l) => l.event === 'request-queued')
  t.equal(warn.level, 40, 'the worker logs a warning')
  t.equal(warn.waiting, 1, 'with a count')
})

t.test('a client that leaves mid-request does not let the next request run beside the async handler', async (t) => {
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('control.js'), '-n', '1', '--worker-port', String(ports[0]), '--balancer',
    'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const base = `http://127.0.0.1:${ports[0]}`
  const aborted = request(`${base}/wait?ms=500&id=a`, { timeout: 100 }).catch((e) => e) // leaves after 100 ms
  await untilBusy(ports[0], 'request a to start')
  const b = await request(`${base}/wait?ms=100&id=b`)
  t.type(await aborted, Error)
  t.equal(b.status, 200)
  const stats = JSON.parse((await request(`${base}/stats`)).body)
  t.equal(stats.maxActive, 1, 'b started only after a\'s handler finished')
  t.same(stats.log.filter((e) => !e.endsWith('null')), ['start a', 'end a', 'start b', 'end b'])
})

t.test('a handler that throws crashes its worker without starting the request queued behind it', async (t) => {
  const dir = tempDir(t, 'pool-throw-')
  const requestLog = path.join(dir, 'requests')
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('throws-on-request.js'), '-n', '1', '--worker-port', String(ports[0]),
    '--balancer', 'none'],
  { env: { REQUEST_LOG: requestLog } })
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const base = `http://127.0.0.1:${ports[0]}`
  const lines = () => (fs.existsSync(requestLog) ? fs.readFileSync(requestLog, 'utf8').trim().split('\n') : [])
  // Straight to the worker, so the worker's own FIFO holds the second and third requests.
  const first = request(`${base}/wait?ms=2000&id=a`) // outlasts the queueing steps below
  await waitFor(() => lines().length === 1, { what: 'the first request running' })
  const throws = request(`${base}/throw?id=b`).catch((err) => err)
  await pool.waitLog((l) => l.event === 'request-queued' && l.waiting === 1)
  const behind = request(`${base}/?id=c`).catch((err) => err)
  await pool.waitLog((l) => l.event === 'request-queued' && l.waiting === 2)
  t.equal((await first).status, 200, 'the request before it completed')
  const exit = await pool.waitLog((l) => l.event === 'exit' && l.slot === 1)
  t.type(await throws, Error, 'the throwing request got no answer')
  t.type(await behind, Error, 'the request queued behind it was dropped with the process')
  const crashedPid = exit.pid
  t.same(lines().filter((l) => l.startsWith(`${crashedPid} `)).map((l) => l.split(' ')[1]),
    ['/wait?ms=2000&id=a', '/throw?id=b'],
    'the crashing process never started the request behind the throw')
  t.match(pool.stderrText + JSON.stringify(pool.logs), /render failed/, 'the app\'s error is reported')
  await pool.waitLog((l) => l.event === 'ready' && l.pid !== crashedPid, 10000)
  t.equal((await request(`${base}/?id=d`)).status, 200, 'the replacement serves')
})

t.test('a respawn that finds its port taken waits and tries again, however long: ' +
  'the slot is never given up for it', async (t) => {
  const net = require('node:net')
  const [workerPort] = await freePorts(1)
  const pool = startPool(['start', fixture('handler.js'), '-n', '1', '--worker-port', String(workerPort), '--balancer',
    'none',
    '--restart-delay', '100ms', '--restart-max-delay', '300ms', '--max-boot-failures', '2'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const first = JSON.parse((await request(`http://127.0.0.1:${workerPort}/`)).body).pid
  // The worker dies; something else takes its port before the respawn can (on a port in the
  // ephemeral range, any outgoing connection could), and keeps it for three failed respawns.
  const blocker = net.createServer()
  process.kill(first, 'SIGKILL')
  await waitFor(() => new Promise((resolve) => {
    blocker.once('error', () => resolve(false))
    blocker.listen(workerPort, '127.0.0.1', () => resolve(true))
  }), { interval: 1, what: 'the port taken before the respawn' })
  // Three failed boots: one more than --max-boot-failures.
  await waitFor(() => pool.logs.filter((l) => l.event === 'exit' && l.reason === 'boot-failed').length >= 3,
    { what: 'three failed respawns while the port is taken' })
  const tries = pool.logs.filter((l) => l.event === 'boot-error' || (l.event === 'exit' && l.reason === 'boot-failed'))
    .length
  t.ok(tries >= 3, `respawns kept trying while it was taken (${tries} log lines)`)
  t.same(pool.logs.filter((l) => l.event === 'give-up'), [], 'never given up, with --max-boot-failures 2')
  await new Promise((resolve) => blocker.close(resolve))
  await pool.waitLog((l) => l.event === 'ready' && l.pid !== first, 5000)
  t.equal((await request(`http://127.0.0.1:${workerPort}/`)).status, 200, 'the slot serves again once the port is free')
})
