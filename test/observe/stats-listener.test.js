'use strict'

// The stats listener is the pool's, in every mode: /metrics (the pool's registry) and /status
// (what `pool status --json` shows) with --balancer none, on by default on the command line
// just below the pool's ports, off by default in the library, never on a worker's port.

const t = require('tap')
const path = require('node:path')
const pino = require('pino')
const { FIXTURES, freePorts, startPool, runPool, request, canBind, waitFor } = require('../helpers')
const { Pool } = require('../../lib/supervisor/pool')

const APP = path.join(FIXTURES, 'handler.js')

t.test('--balancer none: /metrics and /status from the pool, at --worker-port − 2 by default', async (t) => {
  // Four free ports: stats (W − 2), one left for a HAProxy (W − 1), two workers (W, W + 1).
  const [stats, , workerPort] = await freePorts(4)
  const pool = startPool(['start', APP, '-n', '2', '--balancer', 'none', '--worker-port', String(workerPort),
    '--log-format', 'json'], { stats: true })
  t.teardown(() => pool.stop('SIGKILL'))
  const starting = await pool.waitLog((l) => l.event === 'starting')
  t.equal(starting.stats, `http://127.0.0.1:${stats}`, 'the starting line says where')
  t.equal(starting.supervisorPid, pool.pid, 'and carries the supervisor\'s pid')
  await pool.waitLog((l) => l.event === 'started')

  const metrics = await request(`http://127.0.0.1:${stats}/metrics`)
  t.equal(metrics.status, 200)
  t.match(metrics.body, /pool_worker_process_state\{worker="worker2",slot="2",state="ready"\} 1/,
    'the pool\'s own series, without the embedded balancer')
  t.match(metrics.body, /pool_worker_restarts_total\{worker="worker1"\} 0/)
  t.notMatch(metrics.body, /pool_queue_length/, 'no balancer series without a balancer')

  const status = JSON.parse((await request(`http://127.0.0.1:${stats}/status`)).body)
  t.match(status,
    { pid: pool.pid, phase: 'running', target: 2, front: { type: 'none' }, stats: `http://127.0.0.1:${stats}` })
  t.same(status.workers.map((w) => w.state), ['ready', 'ready'])
  t.equal((await request(`http://127.0.0.1:${stats}/status`, { method: 'POST' })).status, 405)

  // Worker lines carry the worker's pid, once (no supervisor pid beside it).
  const readyLine = pool.stdoutText.split('\n').find((l) => l.includes('"event":"ready"'))
  t.equal(readyLine.match(/"pid":/g).length, 1, 'one pid key on a worker line')
  t.equal(JSON.parse(readyLine).pid, status.workers.find((w) => w.slot === JSON.parse(readyLine).slot).pid,
    'and it is the worker\'s')

  t.equal((await pool.stop()).code, 0)
  t.ok(await canBind(stats), 'the stats port is free once the pool stopped')
})

t.test('the library: off unless asked; never on a worker\'s port', async (t) => {
  const [workerPort] = await freePorts(3)
  const logger = pino({ level: 'silent' })
  const quiet = new Pool({ app: APP, workers: 1, workerPort, logger })
  t.equal(quiet.listeners.stats, null, 'no stats listener by default')
  t.throws(() => new Pool({ app: APP, workers: 2, workerPort, statsPort: workerPort + 1, logger }),
    { code: 'POOL_E_BAD_OPTION', message: /statsPort \(--stats-port\) \d+ is one of the workers' ports/ })
  t.throws(() => new Pool({ app: APP, workers: 2, workerPort, statsPort: 70000, logger }),
    { code: 'POOL_E_BAD_OPTION', message: /1-65535, or 0 for off/ })
  const r = await runPool(['start', APP, '-n', '2', '--balancer', 'none', '--worker-port', String(workerPort),
    '--stats-port', String(workerPort)])
  t.equal(r.code, 2)
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line on stderr')
  t.match(r.stderr, /is one of the workers' ports/)
})

t.test('a taken stats port: the start fails naming it, and leaves nothing running', async (t) => {
  const [stats, workerPort] = await freePorts(3)
  const blocker = require('node:net').createServer().listen(stats, '127.0.0.1')
  t.teardown(() => blocker.close())
  await new Promise((resolve) => blocker.once('listening', resolve))
  const pool = new Pool({ app: APP, workers: 1, workerPort, statsPort: stats, logger: pino({ level: 'silent' }) })
  await t.rejects(pool.start(), { code: 'POOL_E_PORT_IN_USE', message: new RegExp(`port ${stats} .*--stats-port`) })
  t.same(pool.workers(), [], 'no worker was started')
  await waitFor(() => canBind(workerPort))
})

t.test('HAProxy mode: the pool\'s facts reach Prometheus (HAProxy reachability, wanted and seen states, CPU, RSS, ' +
  'event-loop lag)', async (t) => {
  const { startLabHaproxy, startHaproxyPool, allUp } = require('../helpers/haproxy-pool')
  const lab = await startLabHaproxy(t, { workers: 2 })
  const [stats] = await freePorts(1)
  await startHaproxyPool(t, lab, { workers: 2, args: ['--stats-port', String(stats)] })
  await waitFor(allUp(lab.client), { timeout: 5000, what: 'both servers UP' })
  const scrape = async () => (await request(`http://127.0.0.1:${stats}/metrics`)).body
  const m = await waitFor(async () => { const body = await scrape(); return /pool_haproxy_server_state\{server="worker2",kind="seen",state="ready"\} 1/.test(body) && /pool_worker_rss_bytes\{worker="worker2"\} [1-9]/.test(body) && body }, {
    timeout: 8000,
    what: 'HAProxy seen as ready and the RSS reported'
  })
  t.match(m, /\npool_haproxy_up 1\n/, 'HAProxy reachable')
  t.match(m, /pool_haproxy_server_state\{server="worker1",kind="wanted",state="ready"\} 1/, 'the state the pool wants')
  t.match(m, /pool_haproxy_server_state\{server="worker1",kind="seen",state="ready"\} 1/,
    'and the one HAProxy reported')
  t.match(m, /pool_haproxy_queue_length 0/)
  t.match(m, /pool_worker_cpu_seconds\{worker="worker1"\} \d/, 'CPU time per worker')
  t.match(m, /pool_supervisor_nodejs_eventloop_lag_seconds \d/, 'the supervisor\'s event-loop lag')
})
