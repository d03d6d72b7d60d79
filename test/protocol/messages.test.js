'use strict'
// The app runs inside the worker and can write well-framed messages to the pool channel itself:
// no message it sends can crash the supervisor or corrupt what it believes about the worker
// (what breaks the framing: test/protocol/channel.test.js).
const t = require('tap')
const path = require('node:path')
const pino = require('pino')
const { Pool } = require('../..')
const { FIXTURES, freePorts, request, waitFor } = require('../helpers')

t.test('malformed and misleading messages from an app are ignored; the pool serves on', async (t) => {
  const [workerPort] = await freePorts(1)
  const pool = new Pool({ app: path.join(FIXTURES, 'ipc-liar.js'), workers: 1, workerPort, logger: pino({ level: 'silent' }), logLevel: 'silent' })
  const errors = []
  pool.on('error', (err) => errors.push(err))
  t.teardown(() => pool.kill())
  await pool.start()
  const pid = pool.workers()[0].pid
  for (let i = 0; i < 3; i++) t.equal((await request(`http://127.0.0.1:${workerPort}/lie`)).status, 200)
  await waitFor(() => pool.workers()[0].requests === 3 && pool.workers()[0].open === 0, { what: 'the third request counted' })
  const w = pool.workers()[0]
  t.equal(w.pid, pid, 'the same worker: nothing made the supervisor kill or restart it')
  t.equal(w.restarts, 0)
  t.equal(w.queued, 0, 'no made-up "request found me busy" was counted')
  t.ok(w.rss === null || Number.isFinite(w.rss), 'its RSS stays a number')
  t.equal(pool.phase, 'running')
  t.same(errors, [])
  t.same(await pool.stop(), { clean: true })
})
