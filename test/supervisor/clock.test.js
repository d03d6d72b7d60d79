'use strict'
// The supervisor's deadlines run on a monotonic clock: a step of the wall clock (NTP, a VM
// resumed) moves none of them. The real process under libfaketime (its wall clock stepped by a
// file, its monotonic clock left alone, as a real step leaves it): a +60 s step while workers
// are busy kills nothing and turns a reload into no kill; a −60 s step keeps no endless loop
// alive past --timeout.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { FIXTURES, freePorts, request, startPool, runPool, poolStatus, waitFor, tempDir } = require('../helpers')

const FAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1'
const skip = !fs.existsSync(FAKETIME) && `${FAKETIME} is missing (scripts/setup installs Debian's faketime)`

t.test('wall-clock steps of ±60 s change nothing the supervisor decides', { skip }, async (t) => {
  const dir = tempDir(t, 'pool-clock-')
  const offset = path.join(dir, 'offset')
  fs.writeFileSync(offset, '+0\n')
  const step = (to) => fs.writeFileSync(offset, `${to}\n`)
  const [port, workerPort] = await freePorts(3)
  const env = {
    LD_PRELOAD: FAKETIME,
    FAKETIME_TIMESTAMP_FILE: offset,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
    FAKETIME_NO_CACHE: '1'
  }
  const pool = startPool(['start', path.join(FIXTURES, 'long-lived.js'), '-n', '2', '--port', String(port),
    '--worker-port', String(workerPort),
    '--timeout', '2s', '--heartbeat-timeout', '3s'], { env })
  // A pool's stop, not a SIGKILL. libfaketime shares one semaphore among every process of the pool
  // (FAKETIME_SHARED); a supervisor SIGKILLed while holding it left a worker and the reaper waiting
  // on it for good (3 times in about 60 runs), holding this file's pipes open past tap's timeout.
  t.teardown(async () => {
    await pool.stop('SIGTERM', 15000)
    // libfaketime's shared memory and semaphore, made by the first process it was loaded into.
    for (const name of [`faketime_shm_${pool.pid}`, `sem.faketime_sem_${pool.pid}`]) {
      fs.rmSync(path.join('/dev/shm', name), { force: true })
    }
  })
  await pool.waitLog((l) => l.event === 'started')
  const clock = JSON.parse((await request(`http://127.0.0.1:${port}/`)).body)
  t.ok(clock.pid > 0)

  // +60 s while four requests await their data (two per worker) and a stream runs.
  const waiting = [1, 2, 3, 4].map((i) => request(`http://127.0.0.1:${port}/wait?ms=3000&id=w${i}`))
  const stream = request(`http://127.0.0.1:${port}/stream?ms=3000&every=100`)
  // The step must come while the requests and the stream are under way.
  await waitFor(async () => (await poolStatus(['--port', String(port)])).workers
    .reduce((sum, w) => sum + w.open, 0) === 5, { what: 'the supervisor to see all five under way' })
  step('+60s')
  const answers = await Promise.all([...waiting, stream])
  t.same(answers.map((a) => a.status), [200, 200, 200, 200, 200], 'every request answered')
  t.match(answers[4].body, /data: end/, 'the stream ran to its end')
  t.same(pool.logs.filter((l) => l.event === 'hung' || l.event === 'kill').length, 0, 'nothing killed by the step')
  const reload = await runPool(['reload', '--port', String(port)], { timeout: 30000 })
  t.equal(reload.code, 0, `a reload after the step: ${reload.stdout.trim()}`)
  const exits = () => pool.logs.filter((l) => l.event === 'exit')
  await waitFor(() => exits().length >= 2, { what: 'both old workers\' exits' })
  t.same(exits().map((l) => l.reason), ['reload', 'reload'], 'both drained as asked, none killed')

  // −60 s: an endless loop is still killed within --timeout plus a second.
  step('+0')
  const began = performance.now()
  const looped = await request(`http://127.0.0.1:${port}/loop`, { method: 'POST', timeout: 15000 })
  const ms = performance.now() - began
  t.equal(looped.status, 502, 'its worker died holding it')
  const hung = await pool.waitLog((l) => l.event === 'hung')
  t.equal(hung.reason, 'timeout')
  t.ok(hung.ms > 2000 && hung.ms < 3000,
    `killed ${hung.ms} ms after its last check-in (answered ${Math.round(ms)} ms after it began): within --timeout ` +
      '(2 s) and a second')
})
