'use strict'
// Nothing outlives a killed supervisor (its reaper, lib/supervisor/reaper.js; a worker whose loop
// runs, lib/worker/app-processes.js), nor a stopped pool, and what still escapes (a pool whose
// reaper died with it) is ended by the next pool on the same ports (lib/supervisor/leftovers.js).
// Real supervisors, SIGKILLed by pid; every assertion is by pid liveness and port bindability.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const {
  cleanEnv, freePorts, request, startPool, runPool, waitFor, isAlive, canBind, sleep, untilBusy, tempDir, fixture
} = require('../helpers')
const { pidFile, helpersOf, reapHelpersAtTeardown } = require('../helpers/app-children')

// A pool of spawns-child.js workers on fresh ports, each with one helper process, all of them
// killed at the test's end whatever happens.
async function poolWithHelpers (t, { workers = 2, flags = [], env = {} } = {}) {
  const file = pidFile(t)
  reapHelpersAtTeardown(t, file)
  const ports = await freePorts(workers)
  const pool = startPool(['start', fixture('spawns-child.js'), '-n', String(workers), '--worker-port', String(ports[0]),
    '--balancer', 'none', '--kill-timeout', '500ms', ...flags],
  { env: { CHILD_PID_FILE: file, ...env } })
  t.teardown(() => pool.stop('SIGKILL'))
  await waitFor(() => pool.readyCount() >= workers && helpersOf(file).size >= workers,
    { what: `${workers} ready workers with their helpers` })
  return { pool, ports, file }
}

// Every worker and helper the pool ever started, from the fixture's file.
function processesOf (file) {
  return [...helpersOf(file)].flat()
}

async function untilGone (pids, what) {
  try {
    await waitFor(() => pids.every((pid) => !isAlive(pid)), { timeout: 10000, what })
  } catch (err) {
    err.message += `; still running: ${pids.filter(isAlive).map(describe).join('; ')}`
    throw err
  }
}

// "pid (comm) state ppid pgrp session", for a failure's message.
function describe (pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return `${pid} ${stat.slice(stat.indexOf('('), stat.lastIndexOf(')') + 1)} ${f[0]} ppid ${f[1]} pgrp ${f[2]} ` +
      `session ${f[3]}`
  } catch { return `${pid} (gone)` }
}

async function portsFree (t, ports) {
  for (const port of ports) {
    t.ok(await waitFor(() => canBind(port), { timeout: 5000, what: `port ${port} to be free` }), `port ${port} is free`)
  }
}

// The pool's mark of its supervisor as its workers carry it: "<pid>:<start time>".
function markOf (pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
  return `${pid}:${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}`
}

t.test('a SIGKILLed supervisor: a worker stuck for good (Atomics.wait) goes, ' +
  'with its port and the app\'s processes', async (t) => {
  const { pool, ports, file } = await poolWithHelpers(t,
    { env: { CHILD_IGNORES_TERM: '1' }, flags: ['--timeout', '60s', '--heartbeat-timeout', '60s'] })
  const stuck = request(`http://127.0.0.1:${ports[0]}/block`, { timeout: 30000 }).catch((err) => err)
  await untilBusy(ports[0], 'the worker to be stuck in its request')
  pool.kill('SIGKILL')
  await pool.exited
  const everyone = processesOf(file)
  await untilGone(everyone, 'the workers (one stuck for good) and their helpers (ignoring SIGTERM) to be gone')
  t.pass(`gone: ${everyone.join(', ')}`)
  await portsFree(t, ports)
  t.type(await stuck, Error, 'the stuck request got no answer')
})

t.test('a SIGKILLed supervisor: an app that goes on printing (to a broken pipe now) still takes its processes ' +
  'along', async (t) => {
  const { pool, ports, file } = await poolWithHelpers(t, { env: { CHILD_IGNORES_TERM: '1', APP_PRINTS: '1' } })
  pool.kill('SIGKILL')
  await pool.exited
  const everyone = processesOf(file)
  await untilGone(everyone, 'the workers and their helpers (ignoring SIGTERM) to be gone')
  t.pass(`gone: ${everyone.join(', ')}`)
  await portsFree(t, ports)
})

t.test('a supervisor SIGKILLed 0.3 s into a reload\'s drain leaves no worker and no app process behind', async (t) => {
  const { pool, ports, file } = await poolWithHelpers(t,
    { workers: 4, env: { CHILD_IGNORES_TERM: '1' }, flags: ['--reload-batch', '2'] })
  pool.kill('SIGHUP')
  await pool.waitLog((l) => l.event === 'draining')
  await sleep(300) // into the drain, as the test says
  pool.kill('SIGKILL')
  await pool.exited
  const everyone = processesOf(file)
  t.ok(everyone.length >= 8,
    `the old workers, their helpers and whatever the reload started (${everyone.length} processes)`)
  await untilGone(everyone, 'every worker and helper, old and new, to be gone')
  t.pass(`gone: ${everyone.join(', ')}`)
  await portsFree(t, ports)
})

t.test('pool stop: a child that made a process group of its own (coreutils timeout) is gone when the pool has ' +
  'exited', async (t) => {
  const { pool, ports, file } = await poolWithHelpers(t, { env: { CHILD_OWN_GROUP: '1', CHILD_IGNORES_TERM: '1' } })
  const { reaperPid } = pool.logs.find((l) => l.event === 'starting')
  const stop = await runPool(['stop', '--port', String(ports[0])])
  t.equal(stop.code, 0, `pool stop succeeded: ${stop.stderr}`)
  t.equal((await pool.exited).code, 0, 'a clean stop')
  for (const pid of processesOf(file)) t.notOk(isAlive(pid), `${pid} is gone by the time the pool exited`)
  await untilGone([reaperPid], 'the pool\'s reaper, with nothing left to wait for')
  t.notOk(pool.logs.some((l) => l.event === 'orphans-ended'), 'and it ended nothing: a stop is no death')
  t.ok(pool.logs.some((l) => l.event === 'leftovers-killed'), 'the helpers ignoring SIGTERM got SIGKILL')
})

t.test('a SIGKILLed supervisor: its reaper ends at once even what the app started detached, ' +
  'and says so in one line', async (t) => {
  // The helpers are detached: sessions of their own, out of their workers' reach; they carry the
  // supervisor's mark in their environment.
  const { pool, ports, file } = await poolWithHelpers(t, { env: { CHILD_DETACHED: '1', CHILD_IGNORES_TERM: '1' } })
  const { reaperPid } = pool.logs.find((l) => l.event === 'starting')
  t.ok(isAlive(reaperPid), `the pool's reaper runs (pid ${reaperPid})`)
  const everyone = processesOf(file)
  const helpers = [...helpersOf(file).values()]
  pool.kill('SIGKILL')
  await pool.exited
  await untilGone(everyone, 'the workers and their detached helpers (ignoring SIGTERM) to be gone')
  const line = await waitFor(() => pool.logs.find((l) => l.event === 'orphans-ended'), { what: 'the reaper\'s line' })
  t.match(line,
    {
      level: 40,
      supervisor: pool.pid,
      msg: new RegExp(`the supervisor \\(pid ${pool.pid}\\) is gone: ended \\d processes it left running: .*; ` +
        '2 needed SIGKILL')
    })
  // The workers, their loops running, may have left by themselves before its look.
  t.ok(line.processes.every((pid) => everyone.includes(pid)), 'naming only processes of the pool')
  t.same([...line.killed].sort(), [...helpers].sort(),
    'the helpers, out of their workers\' reach: ended by it alone, with SIGKILL')
  await untilGone([reaperPid], 'the reaper, its work done')
  await portsFree(t, ports)
})

t.test('a reaper killed while its pool runs is started again, and does its work', async (t) => {
  const { pool, ports, file } = await poolWithHelpers(t,
    { env: { CHILD_IGNORES_TERM: '1' }, flags: ['--timeout', '60s', '--heartbeat-timeout', '60s'] })
  const { reaperPid } = pool.logs.find((l) => l.event === 'starting')
  process.kill(reaperPid, 'SIGKILL')
  t.match(await pool.waitLog((l) => l.event === 'reaper-failed'),
    { level: 40, msg: /the pool's reaper exited \(SIGKILL\)/ })
  const again = await pool.waitLog((l) => l.event === 'reaper-started')
  t.not(again.reaperPid, reaperPid)
  const stuck = request(`http://127.0.0.1:${ports[0]}/block`, { timeout: 30000 }).catch((err) => err)
  await untilBusy(ports[0], 'the worker to be stuck in its request')
  pool.kill('SIGKILL')
  await pool.exited
  await untilGone(processesOf(file), 'the workers (one stuck for good) and their helpers, ended by the new reaper')
  await portsFree(t, ports)
  t.type(await stuck, Error)
})

t.test('the next pool on the same ports ends what a dead pool left, and says so in one line', async (t) => {
  // Pool A's helpers are detached: sessions of their own, out of their workers' reach, and A's
  // reaper is SIGKILLed with A (as by an OOM killer taking both, or kill -9 of every node process).
  const { pool: a, ports, file } = await poolWithHelpers(t, { env: { CHILD_DETACHED: '1', CHILD_IGNORES_TERM: '1' } })
  const mark = markOf(a.pid)
  const workers = [...helpersOf(file).keys()]
  const helpers = [...helpersOf(file).values()]
  process.kill(a.logs.find((l) => l.event === 'starting').reaperPid, 'SIGKILL')
  a.kill('SIGKILL')
  await a.exited
  await untilGone(workers, 'pool A\'s workers to be gone')
  for (const pid of helpers) t.ok(isAlive(pid), `detached helper ${pid} outlived pool A`)
  // And a process of A's still holding slot 2's port, as a worker would that nothing ended: started
  // detached, with A's mark.
  const stray = spawn(process.execPath, [fixture('stray-listener.js')],
    {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
      env: cleanEnv({ POOL_SUPERVISOR: mark, PORT: String(ports[1]) })
    })
  t.teardown(() => { try { process.kill(stray.pid, 'SIGKILL') } catch {} })
  await new Promise((resolve) => stray.stdout.once('data', resolve))
  t.notOk(await canBind(ports[1]), `port ${ports[1]} is taken by what pool A left`)

  const b = startPool(['start', fixture('handler.js'), '-n', '2', '--worker-port', String(ports[0]), '--balancer',
    'none', '--kill-timeout', '500ms'])
  t.teardown(() => b.stop('SIGKILL'))
  await b.waitLog((l) => l.event === 'started')
  const lines = b.logs.filter((l) => l.event === 'leftovers-ended')
  t.equal(lines.length, 1, 'one line')
  t.match(lines[0].msg,
    new RegExp(`ended 3 processes left running on ports ${ports[0]}-${ports[1]} by a pool that is gone \\(supervisor ` +
      `pid ${a.pid}\\)`))
  t.same([...lines[0].processes].sort(), [...helpers, stray.pid].sort(), 'naming each process it ended')
  for (const pid of [...helpers, stray.pid]) t.notOk(isAlive(pid), `${pid} is gone`)
  t.equal(b.readyCount(), 2, 'and pool B serves on those ports')
  t.equal((await request(`http://127.0.0.1:${ports[1]}/`)).status, 200)
})

t.test('a running pool\'s processes are never taken for leftovers', async (t) => {
  const { pool: a, ports, file } = await poolWithHelpers(t, { env: { CHILD_DETACHED: '1' } })
  const everyone = processesOf(file)
  const other = path.join(path.dirname(file), 'other.sock') // not A's control socket: B gets as far as the ports
  const b = await runPool(['start', fixture('handler.js'), '-n', '2', '--worker-port', String(ports[0]), '--balancer',
    'none', '--control', other], { timeout: 20000 })
  t.equal(b.code, 2, 'pool B refuses: the ports are in use')
  t.match(b.stderr, /already in use/)
  t.notMatch(b.stdout, /leftovers-ended/, 'nothing was ended')
  for (const pid of everyone) t.ok(isAlive(pid), `pool A's ${pid} still runs`)
  t.equal(a.exitCode, null, 'pool A still runs')
})

t.test('the directory the pool started in is removed: a crashed worker is replaced all the same, ' +
  'and goes with its supervisor even stuck for good', async (t) => {
  // A deploy that cleans up an old release's directory under a running pool. The new worker
  // inherits the removed directory and boots; the reaper runs from / and needs no thread (Node
  // cannot start one in a process whose working directory is gone).
  const dir = tempDir(t, 'pool-cwd-')
  const file = pidFile(t)
  reapHelpersAtTeardown(t, file)
  const ports = await freePorts(1)
  const pool = startPool(['start', fixture('spawns-child.js'), '-n', '1', '--worker-port', String(ports[0]),
    '--balancer', 'none', '--restart-delay', '20ms',
    '--kill-timeout', '500ms', '--timeout', '60s', '--heartbeat-timeout', '60s'],
  { cwd: dir, env: { CHILD_PID_FILE: file, CHILD_IGNORES_TERM: '1' } })
  t.teardown(() => pool.stop('SIGKILL'))
  const first = await pool.waitLog((l) => l.event === 'ready')
  fs.rmSync(dir, { recursive: true })
  process.kill(first.pid, 'SIGKILL')
  const second = await pool.waitLog((l) => l.event === 'ready' && l.pid !== first.pid, 10000)
  t.equal(JSON.parse((await request(`http://127.0.0.1:${ports[0]}/`)).body).pid, second.pid, 'the slot serves again')
  t.notOk(pool.logs.some((l) => l.event === 'spawn-error'), 'no fork failed')
  const stuck = request(`http://127.0.0.1:${ports[0]}/block`, { timeout: 30000 }).catch((err) => err)
  await untilBusy(ports[0], 'the new worker to be stuck in its request')
  pool.kill('SIGKILL')
  await pool.exited
  const everyone = [second.pid, helpersOf(file).get(second.pid)]
  await untilGone(everyone, 'the stuck worker and its helper (ignoring SIGTERM) to exit')
  await portsFree(t, ports)
  t.type(await stuck, Error)
})
