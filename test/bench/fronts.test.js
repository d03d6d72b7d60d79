'use strict'
// The benchmark's peers of the pool, as their users run them: PM2 in a temp PM2_HOME of its
// own, stopped with nothing left behind (also when a part fails: stopAll), and cluster's rolling
// restart replacing every worker. Real processes on loopback.
const t = require('tap')
const fs = require('node:fs')
const { request, waitFor } = require('../helpers')
const { startFront } = require('../../bench/lib/fronts')
const { stopAll } = require('../../bench/lib/procs')
const pm2 = require('../../bench/lib/pm2')

const alive = (pid) => { try { process.kill(pid, 0); return true } catch { return false } }
const gone = (pids) => waitFor(() => pids.every((pid) => !alive(pid)), { timeout: 10000, what: 'processes gone' })

const pm2Skip = pm2.available() ? false : 'pm2 is not installed (npm install: a devDependency)'
t.test('PM2 cluster mode: serves, reloads every worker, ' +
  'and leaves no daemon nor PM2_HOME', { skip: pm2Skip }, async (t) => {
  const front = await startFront('pm2', { workers: 2 })
  t.teardown(() => front.stop())
  const before = (await front.serving()).map((w) => w.pid)
  t.equal(before.length, 2)
  t.equal((await request(`${front.url}/?ms=1`)).status, 200)
  const reload = await front.reload()
  t.equal(reload.code, 0, 'pm2 reload succeeded')
  await front.settle()
  const after = (await front.serving()).map((w) => w.pid)
  t.equal(after.filter((pid) => before.includes(pid)).length, 0, 'every worker replaced')
  const { front: [daemon] } = await front.processes()
  t.ok(daemon && alive(daemon), 'the daemon runs')
  await front.stop()
  await gone([daemon, ...after])
  t.pass('daemon and workers gone after stop')
  // A second stop (a teardown after the part's own) must not talk to PM2: its CLI starts a
  // daemon when none runs, which would be left behind.
  await front.stop()
  t.same(await front.serving(), [], 'nothing serves')
  t.notOk(fs.existsSync(front.home), 'no PM2_HOME, so no daemon, came back')
})

t.test('a part that fails still stops PM2: ' +
  'stopAll', { skip: pm2.available() ? false : 'pm2 is not installed' }, async (t) => {
  const front = await startFront('pm2', { workers: 1 })
  const { front: [daemon], workers } = await front.processes()
  t.ok(fs.existsSync(front.home), 'a PM2_HOME of its own')
  await stopAll()
  await gone([daemon, ...workers])
  t.notOk(fs.existsSync(front.home), 'its PM2_HOME removed')
})

t.test("cluster's rolling restart replaces every worker, one at a time", async (t) => {
  const front = await startFront('cluster', { workers: 2 })
  t.teardown(() => front.stop())
  const before = (await front.serving()).map((w) => w.pid)
  const reload = await front.reload()
  t.equal(reload.code, 0)
  const after = (await front.serving()).map((w) => w.pid)
  t.equal(after.length, 2)
  t.equal(after.filter((pid) => before.includes(pid)).length, 0, 'every worker replaced')
  t.equal((await request(`${front.url}/?ms=1`)).status, 200)
})
