'use strict'

// Restarts that refuse nobody (systemd socket activation), and Type=notify. The sockets come from
// Debian's systemd-socket-activate, and a stand-in for systemd holds them across restarts
// (test/fixtures/service-manager.js) as a .socket unit does: the pool listens on what it was
// handed (LISTEN_FDS), and while one pool stops and the next boots, connections wait in the
// kernel's backlog. Under a bounded load, two restarts refuse no connection and fail no request.
// NOTIFY_SOCKET: a unix datagram socket from `systemd-socket-activate --datagram`, read by
// test/fixtures/notify-receiver.js, gets READY=1 once the workers are ready, STATUS=, and
// STOPPING=1.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const {
  FIXTURES, BIN, cleanEnv, freePorts, onJsonLines, request, waitFor, tempDir, stopChild
} = require('../helpers')
const { loadResults, LOAD } = require('../helpers/fleet')

const ACTIVATE = '/usr/bin/systemd-socket-activate'
const APP = path.join(FIXTURES, 'fleet-app.js')
const MANAGER = path.join(FIXTURES, 'service-manager.js')
const RECEIVER = path.join(FIXTURES, 'notify-receiver.js')
const missing = spawnSync(ACTIVATE, ['--version']).error ? `no ${ACTIVATE} (Debian's systemd package)` : null

// The fleet's app, but /env says what a worker inherited of the supervisor's service-manager
// environment.
const ENV_APP = `const render = require(${JSON.stringify(APP)})
module.exports = (req, res) => req.url === '/env'
  ? res.end(JSON.stringify({
      LISTEN_FDS: process.env.LISTEN_FDS ?? null, NOTIFY_SOCKET: process.env.NOTIFY_SOCKET ?? null
    }))
  : render(req, res)
`

// Requests the pool's balancer has given its workers since the pool started (its /metrics).
async function requestsGiven (statsPort) {
  const { body } = await request(`http://127.0.0.1:${statsPort}/metrics`)
  return body.split('\n').filter((l) => l.startsWith('pool_worker_requests_total{'))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0)
}

// A child whose stdout is JSON lines, kept in `lines`; `until(pred)` waits for one.
function watched (child) {
  child.lines = []
  child.output = ''
  child.stderr?.setEncoding('utf8').on('data', (d) => { child.output = (child.output + d).slice(-4000) })
  onJsonLines(child.stdout, (rec) => child.lines.push(rec))
  child.until = (pred, what, { timeout = 20000, from = 0 } = {}) => waitFor(() => {
    const found = child.lines.slice(from).find(pred)
    if (found) return found
    if (child.exitCode !== null) throw new Error(`${what}: exited (${child.exitCode}) ${child.output}`)
  }, { timeout, what })
  t.teardown(() => stopChild(child, { grace: 15000 }))
  return child
}

t.test('a pool restarted on sockets handed over (LISTEN_FDS) refuses no connection and fails no ' +
  'request', { skip: missing }, async (t) => {
  const dir = tempDir(t, 'pool-activation-', { openToOthers: true })
  const app = path.join(dir, 'env-app.js')
  fs.writeFileSync(app, ENV_APP)
  const [port, statsPort, workerPort] = await freePorts(6)
  const poolArgs = ['start', app, '-n', '2', '--port', String(port), '--stats-port', String(statsPort), '--worker-port',
    String(workerPort),
    '--control', path.join(dir, 'pool.sock'), '--log-format', 'json']
  const manager = watched(spawn(ACTIVATE,
    ['-l', `127.0.0.1:${port}`, '-l', `127.0.0.1:${statsPort}`, '--fdname=port:stats-port', process.execPath, MANAGER,
      BIN, ...poolArgs],
    { env: cleanEnv({ FLEET_HOST: 'activated' }), stdio: ['ignore', 'pipe', 'pipe'] }))
  // Seen by `ss`: a connection, or a bind to try the port, would race systemd-socket-activate.
  await waitFor(() => spawnSync('ss', ['-Hltn', `( sport = :${port} )`], { encoding: 'utf8' }).stdout.trim() !== '',
    { timeout: 5000, what: 'systemd-socket-activate to listen' })
  // systemd-socket-activate execs the manager at the first connection; that request waits in the
  // backlog until the pool has started, and is answered.
  const first = await request(`http://127.0.0.1:${port}/?ms=1`, { timeout: 20000 })
  t.equal(first.status, 200, 'the connection that started the service was answered')
  const inherited = await manager.until((l) => l.event === 'sockets-inherited', 'the pool to adopt the sockets')
  t.same(inherited.sockets, [{ fd: 3, name: 'port' }, { fd: 4, name: 'stats-port' }])
  await manager.until((l) => l.event === 'started', 'the pool to start')
  t.match((await request(`http://127.0.0.1:${statsPort}/status`)).body, /"phase": "running"/,
    'the stats listener serves on its inherited socket')
  const envSeen = JSON.parse((await request(`http://127.0.0.1:${port}/env`)).body)
  t.same(envSeen, { LISTEN_FDS: null, NOTIFY_SOCKET: null }, 'workers do not inherit LISTEN_FDS')

  const load = spawn(process.execPath,
    [LOAD,
      JSON.stringify({
        url: `http://127.0.0.1:${port}`,
        concurrency: 4,
        count: 100000,
        maxMs: 30000,
        timeout: 20000,
        ms: [5, 20]
      })], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  load.stdout.setEncoding('utf8').on('data', (d) => { out += d })
  t.teardown(() => stopChild(load))
  const results = new Promise((resolve) => load.once('exit', () => resolve(loadResults(out) ?? [])))
  await waitFor(async () => await requestsGiven(statsPort) >= 25, { what: 'the load under way' })
  const restarts = []
  for (let i = 1; i <= 2; i++) {
    const from = manager.lines.length
    const at = Date.now()
    manager.kill('SIGHUP')
    const exited = await manager.until((l) => l.manager === 'exited', `pool ${i} to stop`, { from })
    t.equal(exited.code, 0, `restart ${i}: the old pool stopped cleanly`)
    await manager.until((l) => l.event === 'started', `the pool after restart ${i} to start`,
      { from: manager.lines.indexOf(exited) })
    restarts.push({ at, ms: Date.now() - at })
    await waitFor(async () => await requestsGiven(statsPort) >= 25, { what: `the load on the pool after restart ${i}` })
  }
  load.kill('SIGTERM')
  const requests = await results
  const failed = requests.filter((r) => r.status !== 200)
  const during = requests.filter((r) => restarts.some((x) => r.end >= x.at && r.start <= x.at + x.ms))
  t.ok(requests.length > 50, `${requests.length} requests sent through the restarts`)
  t.equal(failed.length, 0,
    `refused or failed: ${failed.length} (${failed.slice(0, 3).map((r) => `${r.status} ${r.host}`).join(', ')})`)
  t.ok(during.length > 0,
    `${during.length} requests were in flight or waiting while a pool was down ` +
      `(restarts took ${restarts.map((x) => x.ms).join(', ')} ms), all answered`)
})

t.test('Type=notify: READY=1 once the workers are ready, STATUS=, ' +
  'STOPPING=1 on SIGTERM', { skip: missing }, async (t) => {
  const dir = tempDir(t, 'pool-notify-', { openToOthers: true })
  const socket = path.join(dir, 'notify.sock')
  const app = path.join(dir, 'env-app.js')
  fs.writeFileSync(app, ENV_APP)
  const receiver = watched(spawn(ACTIVATE, ['--datagram', '-l', socket, process.execPath, RECEIVER],
    { stdio: ['ignore', 'pipe', 'pipe'] }))
  await waitFor(() => fs.existsSync(socket), { what: 'the notify socket' })
  const [port, workerPort] = await freePorts(4)
  const pool = watched(spawn(process.execPath, [BIN, 'start', app, '-n', '2', '--port', String(port), '--stats-port',
    '0', '--worker-port', String(workerPort),
    '--control', path.join(dir, 'pool.sock'), '--log-format', 'json'],
  { env: cleanEnv({ NOTIFY_SOCKET: socket }), stdio: ['ignore', 'pipe', 'pipe'] }))
  const started = await pool.until((l) => l.event === 'started', 'the pool to start')
  const ready = await receiver.until((l) => /^READY=1$/m.test(l.message), 'READY=1')
  t.ok(ready.at >= started.time - 5, 'READY=1 came once the pool said it had started')
  t.match(ready.message, /^STATUS=2 of 2 workers serving$/m, 'with a STATUS for systemctl status')
  t.same(JSON.parse((await request(`http://127.0.0.1:${port}/env`)).body), { LISTEN_FDS: null, NOTIFY_SOCKET: null },
    'a worker does not inherit NOTIFY_SOCKET: its app cannot speak for the pool')
  pool.kill('SIGTERM')
  await pool.until((l) => l.event === 'stopped', 'the pool to stop')
  const stopping = await receiver.until((l) => /^STOPPING=1$/m.test(l.message), 'STOPPING=1')
  t.ok(stopping.at > ready.at, 'STOPPING=1 after READY=1')
  t.notOk(receiver.lines.some((l) => /READY=1/.test(l.message) && l !== ready), 'READY=1 once')
})
