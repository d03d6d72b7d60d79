'use strict'
// One poison request costs its own retries, not its neighbours' (issue 38, row 2): a GET whose
// worker dies a second after it arrives, among 20 GETs awaiting data, 8 POSTs and 4 streams, on
// four workers of K=16 (the default). What the first death takes is lost whoever the poison is
// (the POSTs and streams it held may have run or begun: never replayed); the GETs it held are
// replayed, each alone on a worker rendering nothing, taking nothing else until its head comes,
// so the poison's replay dies alone and every innocent GET is answered.
// On main the replays went together to the one fresh worker, the poison killed it again, and
// 8 or 9 innocent GETs got 502 worker_died_twice.
const t = require('tap')
const path = require('node:path')
const { FIXTURES, freePorts, request, startPool } = require('../helpers')

const APP = path.join(FIXTURES, 'long-lived.js')

t.test('a poison GET at K=16: its replay dies alone; every innocent GET is answered; ' +
  'only what the first death held is lost', async (t) => {
  const [port, workerPort] = await freePorts(5)
  const pool = startPool(['start', APP, '-n', '4', '--port', String(port), '--worker-port', String(workerPort),
    '--log-format', 'json'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started', 20000)
  const url = `http://127.0.0.1:${port}`
  const get = (id, route) => request(`${url}${route}${route.includes('?') ? '&' : '?'}id=${id}&log=1`,
    { timeout: 60000 })
  const sent = [
    ...Array.from({ length: 10 }, (_, i) => ['get', `g${i}`, get(`g${i}`, '/wait?ms=1500')]),
    ['poison', 'p', get('p', '/poison?after=1000')],
    ...Array.from({ length: 10 }, (_, i) => ['get', `g${10 + i}`, get(`g${10 + i}`, '/wait?ms=1500')]),
    ...Array.from({ length: 8 },
      (_, i) => ['post', `w${i}`,
        request(`${url}/wait?ms=1500&id=w${i}&log=1`, { method: 'POST', body: 'x', timeout: 60000 })]),
    ...Array.from({ length: 4 }, (_, i) => ['stream', `s${i}`, get(`s${i}`, '/stream?ms=3000&every=200')])
  ]
  const answers = await Promise.all(sent.map(([, , p]) => p.then((r) => r,
    (err) => ({ status: null, error: err.message }))))
  const byId = new Map(sent.map(([kind, id], i) => [id, { kind, ...answers[i] }]))
  const started = (id) => pool.logs.filter((l) => l.event === 'app-log' && typeof l.msg === 'string' &&
    l.msg.includes('app-started'))
    .map((l) => JSON.parse(l.msg)).filter((m) => m.id === id).map((m) => m.pid)
  const [firstPid, replayPid] = started('p')
  t.ok(firstPid && replayPid && firstPid !== replayPid, 'the poison ran twice, on two workers')
  t.equal(byId.get('p').status, 502, 'the poison itself gets 502 (worker_died_twice), and is not tried a third time')
  t.equal(started('p').length, 2)
  const gets = [...byId].filter(([, a]) => a.kind === 'get')
  t.same(gets.filter(([, a]) => a.status !== 200).map(([id]) => id), [],
    'every innocent GET answered 200, those replayed too')
  const replayed = gets.filter(([id]) => started(id).length === 2).map(([id]) => id)
  t.ok(replayed.length > 0, `${replayed.length} GETs died with the poison and were replayed`)
  const lost = [...byId].filter(([, a]) => a.status !== 200 && a.kind !== 'poison').map(([id]) => id)
  t.same(lost.filter((id) => started(id)[0] !== firstPid), [],
    `what failed (${lost.join(', ') || 'nothing'}) was all on the worker the poison killed first`)
  const exits = pool.logs.filter((l) => l.event === 'exit' && l.reason !== 'stop')
  t.equal(exits.length, 2, 'two workers died: the poison\'s, and its replay\'s')
})
