'use strict'
// The supervisor as a process: the app's own child processes do not outlive their worker, an
// uncaught error in the supervisor stops the workers and exits 1, and a worker accepts the
// header block the balancer may hand it.
const t = require('tap')
const { spawn } = require('node:child_process')
const {
  BIN, ROOT, cleanEnv, freePorts, request, startPool, runPool, waitFor, isAlive, untilBusy, fixture, onJsonLines
} = require('../helpers')
const { pidFile, helpersOf, reapHelpersAtTeardown } = require('../helpers/app-children')

async function readyWorkers (pool, n) {
  await waitFor(() => pool.readyCount() >= n, { what: `${n} ready workers` })
  return pool.logs.filter((l) => l.event === 'ready').map((l) => l.pid)
}

t.test('pool stop: the app\'s own child processes are gone when the pool has exited, ' +
  'even one ignoring SIGTERM', async (t) => {
  const file = pidFile(t)
  reapHelpersAtTeardown(t, file)
  const ports = await freePorts(2)
  const pool = startPool(['start', fixture('spawns-child.js'), '-n', '2', '--worker-port', String(ports[0]),
    '--balancer', 'none', '--kill-timeout', '500ms'],
  { env: { CHILD_PID_FILE: file, CHILD_IGNORES_TERM: '1' } })
  t.teardown(() => pool.stop('SIGKILL'))
  const workers = await readyWorkers(pool, 2)
  const helpers = helpersOf(file)
  t.same([...helpers.keys()].sort(), [...workers].sort(), 'each worker started one helper')
  for (const pid of helpers.values()) t.ok(isAlive(pid), `helper ${pid} runs`)

  const stop = await runPool(['stop', '--port', String(ports[0])])
  t.equal(stop.code, 0, `pool stop succeeded: ${stop.stderr}`)
  const { code } = await pool.exited
  t.equal(code, 0, 'the workers themselves stopped cleanly')
  for (const pid of workers) t.notOk(isAlive(pid), `worker ${pid} is gone`)
  for (const pid of helpers.values()) t.notOk(isAlive(pid), `helper ${pid} is gone by the time the pool exited`)
  const left = pool.logs.filter((l) => l.event === 'leftovers')
  t.equal(left.length, 2, 'one line per worker that left processes behind')
  t.ok(pool.logs.some((l) => l.event === 'leftovers-killed'),
    'the helpers ignoring SIGTERM were SIGKILLed after --kill-timeout')
})

t.test('a crashed worker\'s child processes are stopped, and the slot serves again', async (t) => {
  const file = pidFile(t)
  reapHelpersAtTeardown(t, file)
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('spawns-child.js'), '-n', '1', '--worker-port', String(ports[0]),
    '--balancer', 'none'],
  { env: { CHILD_PID_FILE: file } })
  t.teardown(() => pool.stop('SIGKILL'))
  const [worker] = await readyWorkers(pool, 1)
  const helper = helpersOf(file).get(worker)
  t.ok(isAlive(helper), 'the helper runs')
  await request(`http://127.0.0.1:${ports[0]}/crash`).catch(() => {})
  await pool.waitLog((l) => l.event === 'exit' && l.pid === worker)
  await waitFor(() => !isAlive(helper), { what: 'the crashed worker\'s helper to be gone' })
  t.pass('the helper of the crashed worker is gone')
  await pool.waitLog((l) => l.event === 'ready' && l.pid !== worker)
  t.equal((await request(`http://127.0.0.1:${ports[0]}/`)).status, 200, 'the respawned worker serves')
})

t.test('a hung worker is killed with its child processes', async (t) => {
  const file = pidFile(t)
  reapHelpersAtTeardown(t, file)
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('spawns-child.js'), '-n', '1', '--worker-port', String(ports[0]),
    '--balancer', 'none', '--timeout', '500ms'],
  { env: { CHILD_PID_FILE: file } })
  t.teardown(() => pool.stop('SIGKILL'))
  const [worker] = await readyWorkers(pool, 1)
  const helper = helpersOf(file).get(worker)
  const looping = request(`http://127.0.0.1:${ports[0]}/loop`).catch((err) => err)
  await pool.waitLog((l) => l.event === 'hung' && l.pid === worker)
  t.type(await looping, Error)
  await waitFor(() => !isAlive(helper) && !isAlive(worker), { what: 'the hung worker and its helper to be gone' })
  t.pass('the hung worker and its helper are gone')
})

t.test('a SIGKILLed supervisor: the workers take their child processes with them', async (t) => {
  const file = pidFile(t)
  reapHelpersAtTeardown(t, file)
  const ports = await freePorts(2)
  const pool = startPool(['start', fixture('spawns-child.js'), '-n', '2', '--worker-port', String(ports[0]),
    '--balancer', 'none'],
  { env: { CHILD_PID_FILE: file } })
  t.teardown(() => pool.stop('SIGKILL'))
  await readyWorkers(pool, 2)
  const helpers = [...helpersOf(file).values()]
  pool.kill('SIGKILL')
  await pool.exited
  await waitFor(() => helpers.every((pid) => !isAlive(pid)), { what: 'the helpers to be gone' })
  t.pass(`both helpers are gone (${helpers.join(', ')})`)
})

// `pool start` with `node -r test/fixtures/supervisor-fault.js`: SIGUSR2 makes the supervisor's
// own process throw (or reject) from a timer. JSON log lines are collected like startPool's.
function startFaultyPool (args, env) {
  const child = spawn(process.execPath, ['-r', fixture('supervisor-fault.js'), BIN, ...args], {
    cwd: ROOT, env: cleanEnv({ POOL_TEST: '1', ...env }), stdio: ['ignore', 'pipe', 'pipe']
  })
  child.logs = []
  child.stderrText = ''
  onJsonLines(child.stdout, (rec) => child.logs.push(rec))
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d) => { child.stderrText += d })
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  child.waitLog = (pred, what) => waitFor(() => child.logs.find(pred), { timeout: 15000, what })
  return child
}

async function faultyPool (t, { env = {}, flags = [] } = {}) {
  const file = pidFile(t)
  reapHelpersAtTeardown(t, file)
  const ports = await freePorts(2)
  const pool = startFaultyPool(['start', fixture('spawns-child.js'), '-n', '2', '--worker-port', String(ports[0]),
    '--balancer', 'none', '--stats-port', '0', ...flags],
  { CHILD_PID_FILE: file, ...env })
  t.teardown(async () => {
    if (pool.exitCode === null && pool.signalCode === null) {
      pool.kill('SIGKILL')
      await pool.exited
    }
  })
  await pool.waitLog((l) => l.event === 'started', 'the pool to start')
  const workers = pool.logs.filter((l) => l.event === 'ready').map((l) => l.pid)
  const helpers = [...helpersOf(file).values()]
  t.equal(helpers.length, 2, 'two helpers run')
  return { pool, ports, workers, helpers }
}

t.test('an uncaught error in the supervisor: fatal log with the stack, a graceful stop, exit 1', async (t) => {
  const { pool, ports, workers, helpers } = await faultyPool(t)
  const inflight = request(`http://127.0.0.1:${ports[0]}/wait?ms=1000`)
  await untilBusy(ports[0])
  pool.kill('SIGUSR2')
  const res = await inflight
  t.equal(res.status, 200, 'the request running at the error finished: the stop was graceful')
  const { code } = await pool.exited
  t.equal(code, 1, 'exit 1, so that systemd restarts the pool')
  const fatal = pool.logs.filter((l) => l.event === 'fatal')
  t.equal(fatal.length, 1, 'one fatal line')
  t.match(fatal[0], { level: 60, origin: 'uncaughtException', err: { message: 'supervisor bug (test): thrown' } })
  t.match(fatal[0].err.stack, /supervisorBug .*supervisor-fault\.js:\d+/, 'with the stack')
  t.ok(pool.logs.some((l) => l.event === 'stopped'), 'the pool stopped')
  for (const pid of [...workers, ...helpers]) t.notOk(isAlive(pid), `${pid} is gone`)
})

t.test('an unhandled rejection in the supervisor is fatal the same way', async (t) => {
  const { pool, workers, helpers } = await faultyPool(t, { env: { FAULT: 'reject' } })
  pool.kill('SIGUSR2')
  const { code } = await pool.exited
  t.equal(code, 1)
  const fatal = pool.logs.find((l) => l.event === 'fatal')
  t.match(fatal, { level: 60, origin: 'unhandledRejection', err: { message: 'supervisor bug (test): rejected' } })
  t.match(fatal.err.stack, /supervisor-fault\.js:\d+/)
  for (const pid of [...workers, ...helpers]) t.notOk(isAlive(pid), `${pid} is gone`)
})

t.test('a second uncaught error during that stop kills the workers at once instead of waiting', async (t) => {
  const { pool, ports, workers, helpers } = await faultyPool(t,
    { env: { FAULT_AGAIN_MS: '300' }, flags: ['--graceful-timeout', '60s'] })
  // Would finish long after the second error if the stop went on gracefully.
  const inflight = request(`http://127.0.0.1:${ports[0]}/wait?ms=20000`, { timeout: 30000 }).catch((err) => err)
  await untilBusy(ports[0])
  pool.kill('SIGUSR2')
  const { code } = await pool.exited
  t.equal(code, 1)
  t.type(await inflight, Error, 'the request running at the second error was cut: the workers were killed')
  const fatal = pool.logs.filter((l) => l.event === 'fatal')
  t.same(fatal.map((l) => l.err.message), ['supervisor bug (test): thrown', 'supervisor bug (test): again'],
    'both errors logged at fatal, in order')
  for (const pid of [...workers, ...helpers]) t.notOk(isAlive(pid), `${pid} is gone`)
})

t.test('a worker accepts a 20 KiB header block (the balancer adds headers to what it accepted)', async (t) => {
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('handler.js'), '-n', '1', '--worker-port', String(ports[0]), '--balancer',
    'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const headers = {}
  for (let i = 0; i < 20; i++) headers[`x-filler-${i}`] = 'v'.repeat(1000)
  const res = await request(`http://127.0.0.1:${ports[0]}/`, { headers })
  t.equal(res.status, 200, 'not 431 Request Header Fields Too Large')
})
