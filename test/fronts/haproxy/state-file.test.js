'use strict'

// `pool start --haproxy-state-file` with `pool config haproxy --state-file`: the pool keeps
// HAProxy's server states on disk, so `systemctl reload haproxy` (SIGUSR2 to the master of a
// real HAProxy run as -W) starts the new process with the workers READY instead of the config's
// `disabled`, and no request gets a 503 in the window before the pool's next check.

const t = require('tap')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { parseServersState } = require('../../../lib/haproxy/servers-state')
const { waitFor, sleep, isAlive, runPool, freePorts, poolStatus, tempDir } = require('../../helpers')
const { startLoad } = require('../../helpers/load')
const { onPlatforms } = require('../../helpers/haproxy')
const {
  CONTROL_APP, startLabHaproxy, startHaproxyPool, statuses, pidsBySlot, allUp
} = require('../../helpers/haproxy-pool')

// The admin state of each server as the file on disk has it: { worker1: 'ready', ... }.
function fileStates (file) {
  let text
  try { text = fs.readFileSync(file, 'utf8') } catch { return null }
  const parsed = parseServersState(text)
  if (!parsed) return null
  return Object.fromEntries(Object.entries(parsed).map(([name, s]) => [name, s.admin]))
}

// The pool's own check is set ten minutes apart, so whatever keeps the servers READY across the
// reload can only be the file.
const NO_CHECKS = ['--haproxy-check-interval', '10m']

onPlatforms(t, 'a HAProxy reload keeps ready workers in service: no 503, no wait for the pool', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2, stateFile: true, masterWorker: true })
  await startHaproxyPool(t, lab, { workers: 2, args: ['--haproxy-state-file', lab.stateFile, ...NO_CHECKS] })
  await waitFor(allUp(lab.client), { timeout: 5000, what: 'both servers UP' })
  await waitFor(() => {
    const s = fileStates(lab.stateFile)
    return s && s.worker1 === 'ready' && s.worker2 === 'ready'
  }, {
    timeout: 3000,
    what: 'the file to say READY'
  })
  t.equal((fs.statSync(lab.stateFile).mode & 0o777), 0o644, 'readable by HAProxy, writable by the pool only')

  // A new connection per request: what this case is about is the servers' states in the new
  // process; kept-alive connections across a reload have a case of their own below.
  const load = startLoad(lab.url,
    { concurrency: 4, maxMs: 20000, maxRequests: 20000, keepAlive: false, path: (i) => `/block?ms=5&id=${i}` })
  t.teardown(() => load.stop())
  await waitFor(() => load.stats.ok >= 20, { timeout: 5000, what: 'the load to run' })
  const newPid = await lab.reloadHaproxy()
  t.same(await statuses(lab.client), { worker1: 'UP', worker2: 'UP' },
    `the new HAProxy (pid ${newPid}) starts with both workers READY`)
  const okAtReload = load.stats.ok
  await waitFor(() => load.stats.ok >= okAtReload + 100,
    { timeout: 10000, what: '100 requests through the new HAProxy' })
  const stats = await load.stop()
  t.equal(stats.failed, 0,
    `no request failed across the reload (${stats.ok} ok; ${JSON.stringify(stats.statuses)}; ` +
      `${[...new Set(stats.failures)].join('; ')})`)
})

// GET `url` on `agent`: { status, connection (the header), reused (an idle socket of the agent) }.
function getOn (url, agent) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent }, (res) => {
      res.resume()
      res.on('end',
        () => resolve({ status: res.statusCode, connection: res.headers.connection, reused: req.reusedSocket }))
    })
    req.on('error', reject)
  })
}

onPlatforms(t, 'a HAProxy reload leaves an idle kept-alive connection open until it carries one more answer, ' +
  'with Connection: close', async (t, platform) => {
  // nginx keeps idle connections to HAProxy and does not replay a request (proxy_next_upstream
  // off): were the old process to close them as it stops, a request nginx writes on one then is
  // a 502. `option idle-close-on-response` keeps them for one more answer.
  const lab = await startLabHaproxy(t, { platform, workers: 2, stateFile: true, masterWorker: true })
  await startHaproxyPool(t, lab, { workers: 2, args: ['--haproxy-state-file', lab.stateFile, ...NO_CHECKS] })
  await waitFor(allUp(lab.client), { timeout: 5000, what: 'both servers UP' })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  t.equal((await getOn(`${lab.url}/block?ms=1`, agent)).status, 200, 'a first request opens the connection')
  const [idle] = Object.values(agent.freeSockets).flat()
  let closed = false
  idle.once('close', () => { closed = true })

  const oldPid = (await lab.client.info()).Pid
  await lab.reloadHaproxy()
  await waitFor(() => lab.haproxy.child.output.includes(`(${oldPid}) : Proxy pool_http stopped`),
    { timeout: 5000, what: 'the old HAProxy to stop its frontend' })
  await sleep(200) // time for a close, were one coming
  t.notOk(closed, 'the old HAProxy stopped its frontend and left the idle connection open')
  const next = await getOn(`${lab.url}/block?ms=1`, agent)
  t.same(next, { status: 200, connection: 'close', reused: true },
    'the next request on it is answered, with Connection: close')
  await waitFor(() => !isAlive(oldPid),
    { timeout: 5000, what: 'the old HAProxy to exit once its last connection closed' })
})

onPlatforms(t, 'the file follows every state: MAINT on a kill, READY on the respawn, ' +
  'gone at stop', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2, stateFile: true, masterWorker: true })
  const pool = await startHaproxyPool(t, lab,
    { workers: 2, args: ['--haproxy-state-file', lab.stateFile, '--restart-delay', '1s'] })
  await waitFor(() => fileStates(lab.stateFile)?.worker1 === 'ready',
    { timeout: 5000, what: 'worker1 READY in the file' })
  const status = await poolStatus(['--control', path.join(lab.dir, 'control.sock')])
  t.same(status.front.stateFile, { file: lab.stateFile, error: null }, 'pool status shows the file, and no error')
  const oldPid = pidsBySlot(pool)[1]
  process.kill(oldPid, 'SIGKILL')
  await waitFor(() => fileStates(lab.stateFile)?.worker1 === 'maint',
    { timeout: 3000, interval: 5, what: 'worker1 MAINT in the file' })
  t.notOk(pool.logs.some((l) => l.event === 'ready' && l.slot === 1 && l.pid !== oldPid),
    'written before the replacement was even ready')
  await pool.waitLog((l) => l.event === 'ready' && l.slot === 1 && l.pid !== oldPid, 10000)
  await waitFor(() => fileStates(lab.stateFile)?.worker1 === 'ready',
    { timeout: 3000, what: 'worker1 READY again in the file' })

  pool.kill('SIGTERM')
  t.equal((await pool.exited).code, 0, 'a clean stop')
  t.same(await statuses(lab.client), { worker1: 'MAINT', worker2: 'MAINT' }, 'every server MAINT first')
  t.notOk(fs.existsSync(lab.stateFile),
    'then the file is removed: a HAProxy reload after the pool is gone takes states and ports from its config')
  t.same(fs.readdirSync(lab.dir).filter((f) => f.endsWith('.tmp')), [], 'no temporary file left behind')
  await lab.reloadHaproxy()
  t.same(await statuses(lab.client), { worker1: 'MAINT', worker2: 'MAINT' },
    'a HAProxy reloaded after the stop sends nothing to dead ports')
})

onPlatforms(t, 'HAProxy down when a worker dies: the file is removed, ' +
  'so no HAProxy loads READY for it', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2, stateFile: true })
  const pool = await startHaproxyPool(t, lab,
    { workers: 2, args: ['--haproxy-state-file', lab.stateFile, '--restart-delay', '2s'] })
  await waitFor(() => fileStates(lab.stateFile)?.worker1 === 'ready',
    { timeout: 5000, what: 'worker1 READY in the file' })
  lab.haproxy.child.kill('SIGKILL')
  await lab.haproxy.child.exited
  const pid = pidsBySlot(pool)[1]
  process.kill(pid, 'SIGKILL') // its MAINT cannot be sent: the file would say READY for it
  await waitFor(() => !fs.existsSync(lab.stateFile), { timeout: 3000, interval: 5, what: 'the file removed' })
  t.pass('removed once HAProxy could not be told')
  await lab.restartHaproxy()
  t.equal((await lab.client.serversState('pool')).worker1.admin, 'maint',
    'a HAProxy started meanwhile has the dead worker MAINT (the config\'s disabled)')
  await waitFor(allUp(lab.client),
    { timeout: 15000, interval: 50, what: 'the pool to re-assert, the new worker1 included' })
  await waitFor(() => {
    const s = fileStates(lab.stateFile)
    return s && s.worker1 === 'ready' && s.worker2 === 'ready'
  }, {
    timeout: 3000,
    what: 'the file written again'
  })
  // Slot 1 as the pool itself has it, not as its log lines have reached us through a pipe: once
  // (HAProxy 3.0.11, a busy machine) those still named the old pid when HAProxy read UP.
  const slot1 = (await poolStatus(['--control', path.join(lab.dir, 'control.sock')])).workers.find((w) => w.slot === 1)
  t.ok(slot1.state === 'ready' && slot1.pid !== pid,
    `by then worker1 is the replacement, ready (${slot1.state}, pid ${slot1.pid}; the killed one ${pid})`)
})

onPlatforms(t, 'a write that fails later: one warning, the pool goes on, ' +
  'and the file comes back', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2 })
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const file = path.join(dir, 'haproxy.state')
  const pool = await startHaproxyPool(t, lab,
    { workers: 2, args: ['--haproxy-state-file', file, '--restart-delay', '300ms'] })
  await waitFor(() => fileStates(file)?.worker2 === 'ready', { timeout: 5000, what: 'worker2 READY in the file' })
  // Its directory is gone, at once: a rename is atomic, where removing a directory the pool may
  // be writing into at that moment is not.
  const gone = `${dir}.gone`
  fs.renameSync(dir, gone)
  t.teardown(() => fs.rmSync(gone, { recursive: true, force: true }))
  for (let i = 0; i < 2; i++) {
    const pid = pidsBySlot(pool)[1]
    process.kill(pid, 'SIGKILL')
    await pool.waitLog((l) => l.event === 'ready' && l.slot === 1 && l.pid !== pid, 10000)
  }
  const warnings = pool.logs.filter((l) => l.event === 'haproxy-state-file-failed')
  t.equal(warnings.length, 1, 'one warning for the same reason, however many writes failed')
  t.match(warnings[0], { level: 40, file, reason: 'its directory does not exist' })
  await waitFor(allUp(lab.client), { timeout: 5000, what: 'the new worker1 READY: HAProxy is still driven' })

  fs.mkdirSync(dir)
  const pid = pidsBySlot(pool)[2]
  process.kill(pid, 'SIGKILL')
  await pool.waitLog((l) => l.event === 'haproxy-state-file-ok', 5000)
  await waitFor(() => fileStates(file)?.worker2 === 'ready' && pidsBySlot(pool)[2] !== pid,
    { timeout: 10000, what: 'the file written again' })
  t.pass('written again once its directory is back')
})

t.test('a state file the pool cannot write: one line, exit 2, HAProxy untouched', async (t) => {
  const lab = await startLabHaproxy(t, { workers: 1, stateFile: true })
  // READY by hand: a start that got as far as touching HAProxy would set it MAINT.
  await lab.client.setServerState('pool', 'worker1', 'ready')
  const missingDir = path.join(tempDir(t, 'pool-haproxy-', { openToOthers: true }), 'no-such-dir', 'haproxy.state')
  const aDir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  for (const [file, why] of [[missingDir, 'its directory does not exist'], [aDir, 'it is a directory']]) {
    const r = await runPool(['start', CONTROL_APP, '-n', '1', '--balancer', 'haproxy', '--haproxy-socket', lab.socket,
      '--worker-port', String(lab.workerPort), '--haproxy-state-file', file, '--log-format', 'json'],
    { timeout: 15000 })
    t.equal(r.code, 2, `exit 2 (${r.stderr.trim()})`)
    t.equal(r.stderr, `pool: cannot write --haproxy-state-file ${file}: ${why}\n`)
    t.notMatch(r.stdout, /"event":"spawn"/, 'no worker was forked')
  }
  t.equal((await lab.client.serversState('pool')).worker1.admin, 'ready', 'nothing was changed in HAProxy')
})

t.test('pool config haproxy --state-file: HAProxy accepts it and loads it', async (t) => {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const file = path.join(dir, 'haproxy.state')
  const [workerPort] = await freePorts(1)
  const r = await runPool(['config', 'haproxy', '-n', '2', '--prefix', dir, '--worker-port', String(workerPort),
    '--state-file', file])
  t.equal(r.code, 0, r.stderr)
  t.match(r.stdout, new RegExp(`\\n    server-state-file ${file}\\n`), 'global: where the file is')
  t.match(r.stdout, /\ndefaults\n(?: {4}.*\n)*? {4}load-server-state-from-file global\n/, 'defaults: load it')
  t.match(r.stdout, new RegExp(`--haproxy-state-file ${file}`), 'the run line names the pool\'s flag')
  const bad = await runPool(['config', 'haproxy', '--state-file', 'has space'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--state-file must not contain spaces/)
})
