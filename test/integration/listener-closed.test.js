'use strict'
// A worker whose port refuses connections while its process lives on, heartbeating: its app
// closed the server, the server failed, or the listening socket went away without a word. The
// worker must leave 'ready' (so /status and the agent stop counting it), be replaced, and the
// requests sent meanwhile must recover instead of getting 502 for ever.
const t = require('tap')
const net = require('node:net')
const path = require('node:path')
const { FIXTURES, freePorts, request, startPool, waitFor } = require('../helpers')
const { startLabHaproxy, startHaproxyPool, pidsBySlot } = require('../helpers/haproxy-pool')

const APP = path.join(FIXTURES, 'closes-listener.js')

// The agent's one line, as an edge HAProxy reads it.
function agentLine (port) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' })
    let data = ''
    socket.setEncoding('utf8')
    socket.on('data', (d) => { data += d })
    socket.on('error', reject)
    socket.on('close', () => resolve(data.trim()))
    socket.setTimeout(5000, () => socket.destroy(new Error('no line from the agent')))
  })
}

async function status (statsPort) {
  return JSON.parse((await request(`http://127.0.0.1:${statsPort}/status`)).body)
}

const serving = (w) => w.state === 'ready' || w.state === 'busy'

// A pool of `n` workers with its stats and agent listeners; a replaced worker comes back only
// `restartDelay` after its exit, which holds open the moment when it is out and not yet back.
async function startClosingPool (t, { n, restartDelay }) {
  const [port, statsPort, agentPort] = await freePorts(3)
  const workerPorts = await freePorts(n)
  const pool = startPool(['start', APP, '-n', String(n), '--port', String(port), '--worker-port',
    String(workerPorts[0]),
    '--stats-port', String(statsPort), '--agent-port', String(agentPort), '--restart-delay', restartDelay])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  return { pool, url: `http://127.0.0.1:${port}`, statsPort, agentPort, workerPort: (slot) => workerPorts[slot - 1] }
}

async function pidOf (p, slot) {
  return JSON.parse((await request(`http://127.0.0.1:${p.workerPort(slot)}/`)).body).pid
}

// The app refuses from now on; its worker's port really does.
async function refuses (port) {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' })
    s.on('connect', () => { s.destroy(); resolve(false) })
    s.on('error', (err) => resolve(err.code === 'ECONNREFUSED'))
  })
}

t.test('server.close() and a server error after ready: reported by the runtime, ' +
  'out of /status and the agent at once, replaced', async (t) => {
  const p = await startClosingPool(t, { n: 3, restartDelay: '3s' })
  const closing = await pidOf(p, 1)
  const failing = await pidOf(p, 2)
  t.equal(await agentLine(p.agentPort), 'up ready maxconn:3')
  await request(`http://127.0.0.1:${p.workerPort(1)}/close`)
  await request(`http://127.0.0.1:${p.workerPort(2)}/error`)
  t.ok(await refuses(p.workerPort(1)), 'slot 1 refuses connections, its process still running')
  const closed = await p.pool.waitLog((l) => l.event === 'listener-closed' && l.pid === closing)
  t.match(closed,
    { level: 50, slot: 1, by: 'worker', msg: /no longer accepts connections: the app closed its server; replacing it/ })
  const failed = await p.pool.waitLog((l) => l.event === 'listener-closed' && l.pid === failing)
  t.match(failed, { slot: 2, by: 'worker', err: { code: 'EMFILE' }, msg: /its server failed: accept EMFILE/ })
  // From the log line on (the same tick took them out of 'ready'), neither is counted, and they
  // stay out until replaced (--restart-delay 3s holds that moment open).
  const now = await status(p.statsPort)
  t.same(now.workers.filter(serving).map((w) => w.slot), [3], '/status counts only the worker that still listens')
  t.equal(await agentLine(p.agentPort), 'up ready maxconn:1', 'and so does the agent')
  t.equal((await request(`${p.url}/`)).status, 200, 'the balancer sends requests to the one left')
  const exit = await p.pool.waitLog((l) => l.event === 'exit' && l.pid === closing)
  t.equal(exit.reason, 'listener-closed', 'drained and stopped')
  t.equal(p.pool.logs.filter((l) => l.event === 'listener-closed').length, 2, 'one line per worker')
  for (const slot of [1, 2]) {
    await p.pool.waitLog((l) => l.event === 'ready' && l.slot === slot && l.pid !== closing && l.pid !== failing, 15000)
  }
  const after = await status(p.statsPort)
  t.same(after.workers.filter(serving).map((w) => w.slot), [1, 2, 3], 'replaced')
  t.notOk(after.workers.some((w) => w.pid === closing || w.pid === failing), 'by new processes')
  t.not(await pidOf(p, 1), closing, 'slot 1 listens again')
  t.equal(await agentLine(p.agentPort), 'up ready maxconn:3')
})

t.test('every worker refuses without a word (its listening socket closed under Node): the balancer reports, ' +
  'the workers are replaced, requests recover', async (t) => {
  const p = await startClosingPool(t, { n: 2, restartDelay: '3s' })
  const old = [await pidOf(p, 1), await pidOf(p, 2)]
  for (const slot of [1, 2]) await request(`http://127.0.0.1:${p.workerPort(slot)}/close-silently`)
  for (const slot of [1, 2]) t.ok(await refuses(p.workerPort(slot)), `slot ${slot} refuses connections`)
  t.same((await status(p.statsPort)).workers.filter(serving).length, 2,
    'the runtime cannot tell: both still look ready')
  // Requests one after the other, as a client retrying would, until two in a row are answered.
  const statuses = []
  let answered = 0
  const recovered = waitFor(async () => {
    const res = await request(`${p.url}/`, { timeout: 10000 })
    statuses.push(res.status)
    answered = res.status === 200 ? answered + 1 : 0
    return answered >= 2
  }, { timeout: 30000, interval: 100, what: 'requests answered again' })
  recovered.catch(() => {})
  for (const pid of old) {
    const report = await p.pool.waitLog((l) => l.event === 'listener-closed' && l.pid === pid, 20000)
    t.match(report,
      {
        by: 'embedded',
        refusals: 3,
        msg: /3 connections in a row refused \(seen by the embedded front\); replacing it/
      })
  }
  // Reported: out of /status and the agent's count (read first: a replacement can only add).
  const line = await agentLine(p.agentPort)
  const now = await status(p.statsPort)
  t.notOk(now.workers.some((w) => old.includes(w.pid) && serving(w)), '/status counts no refusing worker')
  const counted = Number((/maxconn:(\d+)/.exec(line) || [0, 0])[1])
  t.ok(counted <= now.workers.filter(serving).length, `the agent counts no refusing worker (${line})`)
  await recovered
  t.ok(statuses.every((s) => s === 200 || s === 502), `meanwhile only the balancer's own 502 (${statuses.join(' ')})`)
  t.equal(p.pool.logs.filter((l) => l.event === 'listener-closed').length, 2, 'each refusing worker reported once')
  await waitFor(async () => (await status(p.statsPort)).workers.filter((w) => serving(w) && !old.includes(w.pid))
    .length === 2, { timeout: 15000, what: 'both slots replaced' })
})

t.test('behind HAProxy: the server of a worker that closed its listener leaves READY, ' +
  'and is READY again with the replacement', async (t) => {
  const lab = await startLabHaproxy(t, { workers: 2 })
  const pool = await startHaproxyPool(t, lab, { workers: 2, app: APP, args: ['--restart-delay', '2s'] })
  const admin = async () => (await lab.client.serversState('pool')).worker1.admin
  await waitFor(async () => (await admin()) === 'ready', { timeout: 5000, what: 'worker1 READY' })
  const old = pidsBySlot(pool)[1]
  await request(`http://127.0.0.1:${lab.workerPort}/close`)
  await pool.waitLog((l) => l.event === 'listener-closed' && l.pid === old)
  // Drained (DRAIN until HAProxy holds nothing for it), then MAINT before the worker is stopped.
  await waitFor(async () => (await admin()) === 'maint', { timeout: 5000, what: 'worker1 MAINT' })
  const ready = await pool.waitLog((l) => l.event === 'ready' && l.slot === 1 && l.pid !== old, 15000)
  await waitFor(async () => (await admin()) === 'ready', { timeout: 5000, what: 'worker1 READY again' })
  const served = JSON.parse((await request(`${lab.url}/`)).body)
  t.equal(served.pid, ready.pid, 'HAProxy sends requests to the replacement (balance first: worker1)')
})
