'use strict'

// The response budget (issue 24, item 2): the bytes the balancer holds for clients slower than
// their workers are bounded over all of them (--response-budget, by default 1/16 of RAM, at
// most 256 MiB): past it the balancer stops reading workers rather than grow, and --send-timeout
// cuts the clients that take nothing. On main, 40 clients asking for 8 MiB and reading nothing
// took the supervisor from 66 to 707 MiB, kept it there after they left, and --send-timeout cut
// none of them.

const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { request, waitFor, freePorts, startPool, FIXTURES } = require('../../helpers')
const { createBalancer } = require('../../../lib/fronts/balancer')
const { ResponseBudget, READ_BYTES } = require('../../../lib/fronts/balancer/response-budget')
const { availableMemory } = require('../../../lib/fronts/balancer/budget')

const MiB = 1024 * 1024

function memoryOf (pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)[1]) * 1024
  return { rss: kb('VmRSS'), peak: kb('VmHWM') }
}

const metric = (text, name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)[1])

t.test('options: a response budget by default', async (t) => {
  const o = createBalancer({}).options
  t.equal(o.responseBudget, Math.max(8 * MiB, Math.min(256 * MiB, Math.floor(availableMemory() / 16))),
    '1/16 of RAM, at most 256 MiB, at least --max-response-buffer')
  t.equal(createBalancer({ maxResponseBuffer: 512 * MiB }).options.responseBudget, 512 * MiB,
    'never below one response of --max-response-buffer')
  t.equal(createBalancer({ responseBudget: 0 }).options.responseBudget, 0, '0: no limit')
})

t.test('the budget wakes the relays waiting for room once under half of it, oldest first, ' +
  'one read of room each', async (t) => {
  const budget = new ResponseBudget(4 * READ_BYTES)
  const woken = []
  const relay = (name) => ({ roomAgain () { woken.push(name) } })
  budget.take(4 * READ_BYTES)
  t.ok(budget.full)
  for (const name of ['a', 'b', 'c', 'd']) budget.wait(relay(name))
  budget.giveBack(READ_BYTES)
  t.same(woken, [],
    'still past half the budget: nobody held back reads again (clients that take nothing would refill it)')
  budget.giveBack(2 * READ_BYTES)
  t.same(woken, ['a', 'b', 'c'], 'under half: room for three reads, the three that waited longest')
  budget.giveBack(READ_BYTES)
  t.same(woken, ['a', 'b', 'c', 'd'], 'and the last, counted from what is held now')
  t.equal(budget.waiting.size, 0)
  const unlimited = new ResponseBudget(0)
  unlimited.take(1024 * MiB)
  t.notOk(unlimited.full, '0: never full')
  t.notOk(unlimited.overShare(1024 * MiB), '0: nobody is held back')
})

t.test('past half the budget, the relays holding an even share of that half stop; past all of it, ' +
  'any holding a read', async (t) => {
  const budget = new ResponseBudget(64 * READ_BYTES) // half: 32 reads
  for (let i = 0; i < 4; i++) budget.holding(true)
  budget.take(31 * READ_BYTES)
  t.notOk(budget.overShare(30 * READ_BYTES), 'under half the budget, nobody is held back')
  budget.take(READ_BYTES)
  t.ok(budget.overShare(8 * READ_BYTES),
    'past half: a relay holding 8 reads, the even share of 32 over 4 holders, stops')
  t.notOk(budget.overShare(8 * READ_BYTES - 1), 'one holding less goes on: a client that reads keeps its pace')
  t.notOk(budget.overShare(0), 'one holding nothing always reads')
  budget.take(32 * READ_BYTES)
  t.ok(budget.full)
  t.ok(budget.overShare(READ_BYTES), 'past the whole budget: any relay holding a read stops')
  t.notOk(budget.overShare(READ_BYTES - 1), 'one holding less than a read still reads (its client takes what it has)')
})

t.test('many clients that read nothing: the supervisor holds at most the budget, ' +
  'and --send-timeout cuts them off', async (t) => {
  const BUDGET = 16 * MiB
  const CLIENTS = 24
  const [port, statsPort, workerPort] = await freePorts(3)
  const pool = startPool(['start', path.join(FIXTURES, 'large-answer.js'), '-n', '4', '--port', String(port),
    '--stats-port', String(statsPort),
    '--worker-port', String(workerPort), '--log-format', 'json', '--access-log', 'false', '--response-budget',
    String(BUDGET), '--send-timeout', '1s'])
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started')
  const before = memoryOf(pool.pid).rss

  // 8 MiB each, 192 MiB in all, and not a byte read.
  const clients = Array.from({ length: CLIENTS }, (_, i) => {
    const socket = net.connect(port, '127.0.0.1')
    socket.pause()
    socket.on('error', () => {})
    socket.write(`GET /?kb=8192&i=${i} HTTP/1.1\r\nHost: x\r\n\r\n`)
    return socket
  })
  t.teardown(() => { for (const c of clients) c.destroy() })
  const metrics = async () => (await request(`http://127.0.0.1:${statsPort}/metrics`)).body
  await waitFor(async () => metric(await metrics(),
    'pool_failures_total\\{reason="client_send_timeout"\\}') === CLIENTS,
  { timeout: 30000, interval: 200, what: `all ${CLIENTS} clients cut off by --send-timeout` })
  // Besides the budget, the peak holds what passed through on its way to the clients' kernel
  // buffers: garbage until V8's next collection, which it starts by itself once some 64 MiB
  // outside its heap have been allocated since the last one.
  const peak = memoryOf(pool.pid).peak
  t.ok(peak - before < BUDGET + 96 * MiB,
    `peak RSS grew by ${Math.round((peak - before) / MiB)} MiB for ${CLIENTS * 8} MiB of answers nobody read ` +
      `(budget ${BUDGET / MiB} MiB)`)
  const after = await metrics()
  t.equal(metric(after, 'pool_response_bytes'), 0, 'nothing held once they are cut off')
  t.equal(metric(after, 'pool_response_budget_bytes'), BUDGET)
  // A cut-off request's place is freed once its worker says the request ended (the app may still
  // run it): a word that comes a moment later on a loaded machine.
  const status = await waitFor(async () => {
    const s = JSON.parse((await request(`http://127.0.0.1:${statsPort}/status`)).body)
    return s.front.inFlight === 0 && s
  }, { timeout: 5000, interval: 50, what: 'every worker free' })
  t.equal(status.front.inFlight, 0, 'every worker free')
  t.equal(status.front.responseBytes, 0)
  t.equal((await request(`http://127.0.0.1:${port}/?kb=4`)).status, 200, 'and serving')
})
