'use strict'
// Out of file descriptors, the real `pool start`: a fork that fails with EMFILE is retried with
// the slot's backoff and never gives the slot up, and idle clients holding connections to the
// front cannot take the descriptors a respawn needs. The supervisor's limit is lowered while it
// runs (`prlimit --pid`, the soft limit only: any user may, and may raise it back).
const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { FIXTURES, freePorts, startPool, waitFor } = require('../helpers')
const { DescriptorBudget, guardAccept } = require('../../lib/net/descriptors')

const app = path.join(FIXTURES, 'handler.js')

function hasPrlimit () {
  try { execFileSync('prlimit', ['--version'], { stdio: 'ignore' }); return true } catch { return false }
}
const noPrlimit = hasPrlimit() ? false : 'needs prlimit (util-linux) to lower the running pool\'s descriptor limit'

// The soft limit of `pid`'s open files; the hard limit stays as it was.
function setSoftLimit (pid, soft) {
  const hard = execFileSync('prlimit', ['--pid', String(pid), '--nofile', '--raw', '--noheadings', '--output', 'HARD'],
    { encoding: 'utf8' }).trim()
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${soft}:${hard}`])
}

async function startedPool (t, workers, args = []) {
  const ports = await freePorts(workers + 1)
  const pool = startPool(['start', app, '-n', String(workers), '--port', String(ports[0]), '--worker-port',
    String(ports[1]), '--log-format', 'json', ...args])
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started', 30000)
  return { pool, port: ports[0] }
}

// How many connections wait in the kernel's accept queue of what listens on `port` (a listening
// socket's rx_queue in /proc/net/tcp and tcp6); 0 once the pool has accepted, or refused, them all.
function acceptQueue (port) {
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`
  let waiting = 0
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
      const [, address, , state, queues] = line.trim().split(/\s+/)
      if (state === '0A' && address.endsWith(local)) waiting += parseInt(queues.split(':')[1], 16)
    }
  }
  return waiting
}

// SIGKILL every worker now running (and its process group).
function killWorkers (pool, workers) {
  const pids = pool.logs.filter((l) => l.event === 'spawn').slice(-workers).map((l) => l.pid)
  for (const pid of pids) process.kill(-pid, 'SIGKILL')
  return pids
}

const readyAfter = (pool, index) => new Set(pool.logs.slice(index).filter((l) => l.event === 'ready')
  .map((l) => l.slot))

t.test('a fork that fails with EMFILE: logged with its errno, retried with backoff, ' +
  'the slot never given up', { skip: noPrlimit }, async (t) => {
  const { pool } = await startedPool(t, 2, ['--max-boot-failures', '2'])
  setSoftLimit(pool.pid, 12) // below what the supervisor holds: no new descriptor at all
  const mark = pool.logs.length
  killWorkers(pool, 2)
  // More failed forks than --max-boot-failures, for each slot.
  await waitFor(() => [1, 2].every((slot) => pool.logs.slice(mark)
    .filter((l) => l.event === 'spawn-error' && l.slot === slot).length >= 3),
  { timeout: 20000, what: 'three failed forks in each slot' })
  setSoftLimit(pool.pid, 4096)
  await waitFor(() => readyAfter(pool, mark).size === 2, { timeout: 30000, what: 'both slots ready again' })
  const failed = pool.logs.slice(mark).filter((l) => l.event === 'spawn-error')
  t.ok(failed.every((l) => l.code === 'EMFILE' && l.errno === -24), 'each failed fork is logged with its errno')
  t.match(failed[0].msg, /^worker \d could not be forked: EMFILE \(too many open files\); trying again in \d+ ms$/)
  const delays = failed.filter((l) => l.slot === 1).map((l) => l.delay)
  t.ok(delays.every((d, i) => i === 0 || d > delays[i - 1]), `with a growing backoff: ${delays.join(', ')} ms`)
  t.same(pool.logs.filter((l) => l.event === 'give-up'), [], 'no slot given up')
  t.same(await pool.stop(), { code: 0, signal: null }, 'a clean stop')
})

t.test('idle clients cannot take the descriptors a respawn needs', { skip: noPrlimit }, async (t) => {
  const { pool, port } = await startedPool(t, 4)
  setSoftLimit(pool.pid, 96)
  // 150 idle connections, more than the limit: the front keeps what it may and refuses the rest.
  const clients = []
  t.teardown(() => { for (const c of clients) c.destroy() })
  let settled = 0
  for (let i = 0; i < 150; i++) {
    const c = net.connect(port, '127.0.0.1', () => settled++)
    c.on('error', () => {})
    clients.push(c)
  }
  await waitFor(() => settled === 150, { what: '150 connections made' })
  await waitFor(() => acceptQueue(port) === 0 && pool.logs.some((l) => l.event === 'connection-refused'),
    { what: 'each connection accepted, or refused, by the pool' })
  const mark = pool.logs.length
  killWorkers(pool, 4)
  // Every slot comes back while the clients still hold their connections.
  await waitFor(() => readyAfter(pool, mark).size === 4 || pool.logs.slice(mark).some((l) => l.event === 'give-up'),
    { timeout: 30000, what: 'all four slots ready again' })
  const after = pool.logs.slice(mark)
  t.same(after.filter((l) => l.event === 'give-up' || l.event === 'spawn-error').map((l) => l.msg), [],
    'no failed fork, no slot given up')
  t.equal(readyAfter(pool, mark).size, 4, 'all four slots ready again, the clients still connected')
  t.ok(clients.filter((c) => !c.destroyed).length > 0, 'some clients are still connected')
  const refused = pool.logs.find((l) => l.event === 'connection-refused')
  t.match(refused, { listener: 'balancer', reason: 'out-of-descriptors', limit: 96 })
  t.match(refused.msg,
    /^balancer: refused (a connection|\d+ connections): \d+ of 96 file descriptors open, \d+ kept for the workers/)
  for (const c of clients) c.destroy()
  t.same(await pool.stop(), { code: 0, signal: null }, 'a clean stop')
})

// The budget itself, on a fake descriptor table.
t.test('the budget: a reserve for each slot without a process, ' +
  'the control socket may use the housekeeping part', async (t) => {
  let open = 40
  const budget = new DescriptorBudget({ limit: () => 100, count: () => open, now: () => 0 })
  const pool = { slotsWithoutProcess: 0 }
  const release = budget.reserveForWorkers(() => pool.slotsWithoutProcess)
  t.equal(budget.reserve(), 24, 'a fork\'s peak and the supervisor\'s own')
  pool.slotsWithoutProcess = 4
  t.equal(budget.reserve(), 40, 'and 4 more for each slot whose process is still to come')
  t.equal(budget.reserve({ priority: true }), 24, 'the control socket may use the housekeeping part')
  // count() includes the connection just accepted.
  open = 60
  t.ok(budget.admit(), '60 open + 40 kept: the 60th descriptor may go to a client')
  open = 61
  t.notOk(budget.admit(), 'not the 61st')
  open = 61
  t.ok(budget.admit({ priority: true }), 'but the control socket may still be reached')
  release()
  open = 62
  t.ok(budget.admit(), 'a stopped pool keeps nothing')
})

t.test('a failed accept (EMFILE) is logged and survived, not thrown', async (t) => {
  const http = require('node:http')
  const lines = []
  const logger = { warn: (fields, msg) => lines.push({ ...fields, msg }) }
  const server = http.createServer((req, res) => res.end('ok'))
  let refused = 0
  guardAccept(server, { name: 'test listener', logger, onRefused: () => refused++, descriptors: { admit: () => true } })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const emfile = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', errno: -24, syscall: 'accept' })
  server.emit('error', emfile)
  server.emit('error', emfile)
  t.equal(refused, 2, 'counted')
  t.match(lines,
    [{
      event: 'accept-failed',
      listener: 'test listener',
      code: 'EMFILE',
      msg: 'test listener: accept failed once: EMFILE (out of file descriptors); idle connections closed'
    }], 'said once per interval')
  t.ok(server.listening, 'still listening')
})

// Node's spawn() returns early on EMFILE without closing the three stdio pipes' handles it made.
// In a process of its own whose descriptors are all taken: 50 failed forks of a worker.
t.test('a fork that fails with EMFILE leaves no stdio pipe handle behind', async (t) => {
  const { execFile } = require('node:child_process')
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(FIXTURES, 'failed-forks.js'), '50'], { timeout: 30000 },
      (err, stdout) => err ? reject(err) : resolve(stdout))
  })
  const { codes, before, after } = JSON.parse(out)
  t.same(codes, { EMFILE: 50 }, 'each fork failed with EMFILE')
  t.equal(after, before, `no pipe handle left open (${after - before} after 50 failed forks)`)
})
