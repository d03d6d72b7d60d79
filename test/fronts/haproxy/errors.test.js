'use strict'

// `pool start --balancer haproxy` refuses to start, with one line on stderr and exit 2, when
// it cannot drive HAProxy: no socket, a socket below level admin, a backend without the
// servers the pool needs, servers pointing at other ports. `pool scale` checks the same.

const t = require('tap')
const path = require('node:path')
const { freePorts, runPool, waitFor, tempDir } = require('../../helpers')
const { onPlatforms } = require('../../helpers/haproxy')
const { CONTROL_APP, startLabHaproxy, startHaproxyPool, statuses } = require('../../helpers/haproxy-pool')

// `pool start -n WORKERS` that is expected to fail before forking anything. The worker ports
// are the lab's (HAProxy's servers point there) or free ones.
async function refusedStart (t, { workers = 1, lab, args }) {
  const workerPort = lab ? lab.workerPort : (await freePorts(workers))[0]
  const r = await runPool(['start', CONTROL_APP, '-n', String(workers), '--balancer', 'haproxy', '--worker-port',
    String(workerPort), '--log-format', 'json', ...args], { timeout: 15000 })
  t.equal(r.code, 2, `exit 2 (stderr: ${r.stderr.trim()})`)
  const lines = r.stderr.trim().split('\n')
  t.equal(lines.length, 1, 'one line on stderr')
  t.notMatch(r.stdout, /"event":"spawn"/, 'no worker was forked')
  return lines[0]
}

t.test('no --haproxy-socket, or a socket that does not exist', async (t) => {
  const none = await refusedStart(t, { args: [] })
  t.equal(none,
    'pool: the HAProxy front needs haproxySocket (--haproxy-socket): the path ' +
      '(or host:port) of HAProxy\'s "stats socket ... level admin"')

  const missing = path.join(tempDir(t, 'pool-haproxy-', { openToOthers: true }), 'haproxy-admin.sock')
  const line = await refusedStart(t, { args: ['--haproxy-socket', missing] })
  t.equal(line,
    `pool: HAProxy socket ${missing} does not exist: is HAProxy running with "stats socket ${missing} mode 600 level ` +
      'admin"?')
})

onPlatforms(t, 'a socket at level operator', async (t, platform) => {
  const lab = await startLabHaproxy(t,
    {
      platform,
      workers: 2,
      extraGlobal: ({ dir }) => [`stats socket ${path.join(dir, 'operator.sock')} mode 600 level operator`]
    })
  const operator = path.join(lab.dir, 'operator.sock')
  const line = await refusedStart(t, { workers: 2, lab, args: ['--haproxy-socket', operator] })
  t.equal(line,
    `pool: HAProxy socket ${operator} is not at level admin (its level is 'operator'); ` +
      `declare it as "stats socket ${operator} mode 600 level admin"`)
  t.same(await statuses(lab.client), { worker1: 'MAINT', worker2: 'MAINT' }, 'nothing was changed in HAProxy')
})

onPlatforms(t, 'a backend without the servers the pool needs, or no such backend', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2 })
  const line = await refusedStart(t, { workers: 4, lab, args: ['--haproxy-socket', lab.socket] })
  t.equal(line,
    'pool: ' +
      'HAProxy backend ' +
      `'pool' (socket ${lab.socket}) has no servers 'worker3', 'worker4': ` +
      'the pool needs worker1..worker4 (4 servers); add them (`pool config haproxy -n 4` prints a matching config)')

  const noBackend = await refusedStart(t,
    { workers: 2, lab, args: ['--haproxy-socket', lab.socket, '--haproxy-backend', 'ssr'] })
  t.equal(noBackend,
    `pool: HAProxy has no backend 'ssr' (socket ${lab.socket}); check --haproxy-backend and the config's 'backend' ` +
      'section')

  const badName = await refusedStart(t,
    { workers: 2, lab, args: ['--haproxy-socket', lab.socket, '--haproxy-backend', 'a;b'] })
  t.match(badName, /haproxyBackend \(--haproxy-backend\) must be a HAProxy name/)
})

onPlatforms(t, 'servers that send to other ports than the pool listens on', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2 })
  const [otherPort] = await freePorts(2)
  const r = await runPool(['start', CONTROL_APP, '-n', '2', '--balancer', 'haproxy', '--haproxy-socket', lab.socket,
    '--worker-port', String(otherPort), '--log-format', 'json'], { timeout: 15000 })
  t.equal(r.code, 2)
  t.equal(r.stderr.trim(), `pool: HAProxy backend 'pool' sends worker1 to port ${lab.workerPort}, ` +
    `worker2 to port ${lab.workerPort + 1}, but the pool's slot 1 listens on ${otherPort}: ` +
    `start the pool with --worker-port ${lab.workerPort}, or regenerate the config with \`pool config haproxy -n 2 ` +
    `--worker-port ${otherPort} --backend pool\``)
})

onPlatforms(t, 'pool scale: refused for slots HAProxy has no server for, done for spares', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2, maxWorkers: 3 })
  const pool = await startHaproxyPool(t, lab, { workers: 2 })
  const control = path.join(lab.dir, 'control.sock')
  // Run without blocking this process, so the pool's log lines keep arriving while it runs.
  const scale = (n) => runPool(['scale', String(n), '--control', control])

  const refused = await scale(4)
  t.not(refused.code, 0, 'scale 4 fails')
  t.match(refused.stderr, /HAProxy backend 'pool' \(socket [^)]+\) has no server 'worker4'/, refused.stderr.trim())
  t.equal(pool.logs.filter((l) => l.event === 'scale').length, 0, 'the pool did not start scaling')

  const done = await scale(3)
  t.equal(done.code, 0, done.stderr)
  await waitFor(async () => (await statuses(lab.client)).worker3 === 'UP', { timeout: 3000, what: 'worker3 UP' })
  t.same(await statuses(lab.client), { worker1: 'UP', worker2: 'UP', worker3: 'UP' },
    'the spare server is READY once its worker is')
})
