'use strict'
// The app runs inside the worker and can write well-framed messages to the pool channel itself:
// no message it sends can crash the supervisor or corrupt what it believes about the worker
// (what breaks the framing: test/protocol/channel.test.js).
const t = require('tap')
const path = require('node:path')
const pino = require('pino')
const { Pool } = require('../..')
const msg = require('../../lib/protocol/messages')
const { FIXTURES, freePorts, request, waitFor } = require('../helpers')

t.test('malformed and misleading messages from an app are ignored; the pool serves on', async (t) => {
  const [workerPort] = await freePorts(1)
  const pool = new Pool({
    app: path.join(FIXTURES, 'ipc-liar.js'),
    workers: 1,
    workerPort,
    logger: pino({ level: 'silent' }),
    logLevel: 'silent'
  })
  const errors = []
  pool.on('error', (err) => errors.push(err))
  t.teardown(() => pool.kill())
  await pool.start()
  const pid = pool.workers()[0].pid
  for (let i = 0; i < 3; i++) t.equal((await request(`http://127.0.0.1:${workerPort}/lie`)).status, 200)
  await waitFor(() => pool.workers()[0].requests === 3 && pool.workers()[0].open === 0,
    { what: 'the third request counted' })
  const w = pool.workers()[0]
  t.equal(w.pid, pid, 'the same worker: nothing made the supervisor kill or restart it')
  t.equal(w.restarts, 0)
  t.equal(w.queued, 0, 'no made-up "request found me busy" was counted')
  t.ok(w.rss === null || Number.isFinite(w.rss), 'its RSS stays a number')
  t.same([w.tunnels, w.tunnelsOpened], [0, 0], 'no made-up tunnels')
  t.equal(pool.phase, 'running')
  t.same(errors, [])
  t.same(await pool.stop(), { clean: true })
})

t.test('tunnels in a check-in and in left-port: counts, or 0; a STOP\'s reason is a known one, or none', async (t) => {
  const parse = (m) => msg.parseWorkerMessage({ v: 1, ...m })
  const counts = { open: 1, tunnels: 20, tunnelsOpened: 31 }
  t.match(parse({ type: 'check-in', ...counts }), counts)
  for (const bad of [-1, 1.5, '20', null, Infinity, 2 ** 60]) {
    const none = { tunnels: 0, tunnelsOpened: 0 }
    t.match(parse({ type: 'check-in', tunnels: bad, tunnelsOpened: bad }), none, `${bad}: none`)
  }
  t.match(parse({ type: 'check-in' }), { tunnels: 0, tunnelsOpened: 0 }, 'an older worker says none')
  t.same(parse({ type: 'left-port', open: 2, tunnels: 5, x: 1 }), { v: 1, type: 'left-port', open: 2, tunnels: 5 })
  t.same(parse({ type: 'left-port', open: 2, tunnels: 'x' }), { v: 1, type: 'left-port', open: 2, tunnels: 0 })
  for (const reason of ['stop', 'reload', 'scale-down', 'max-requests', 'max-rss', 'recycle', 'listener-closed']) {
    t.equal(msg.drainReason(reason), reason)
  }
  for (const bad of [undefined, null, 'STOP', '__proto__', 'x'.repeat(1000), 7]) t.equal(msg.drainReason(bad), null)
})
