'use strict'
// Operating a pool behind a real HAProxy under load (issue: operating a running pool): a rolling
// reload and scaling up and down fail no request, because each slot is DRAINed in HAProxy before
// its worker stops and set READY only once the new worker listens.
const t = require('tap')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { BIN, cleanEnv, waitFor } = require('../../helpers')
const { startLoad, moreAnswers } = require('../../helpers/load')
const { onPlatforms } = require('../../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool, statuses, pidsBySlot, allUp } = require('../../helpers/haproxy-pool')

// `pool CMD --control SOCK`, to completion, bounded.
function control (args, lab) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args, '--control', path.join(lab.dir, 'control.sock')],
      { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { out += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), 60000)
    child.on('exit', (code) => { clearTimeout(timer); resolve({ code, out }) })
  })
}

onPlatforms(t, 'pool reload under load through HAProxy: zero failed requests, every pid replaced, ' +
  'DRAIN before stop', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 3 })
  const pool = await startHaproxyPool(t, lab, { workers: 3, args: ['--log-level', 'debug'] })
  await waitFor(allUp(lab.client), { timeout: 5000, what: 'all servers UP' })
  const before = Object.values(pidsBySlot(pool))
  const load = startLoad(lab.url, { concurrency: 6, maxMs: 30000, path: (i) => `/block?ms=15&id=${i}` })
  t.teardown(() => load.stop())
  await moreAnswers(load, 30)
  const r = await control(['reload'], lab)
  await moreAnswers(load, 30)
  const stats = await load.stop()
  t.equal(r.code, 0, r.out)
  t.match(r.out, /^reloaded 3 workers in/)
  t.equal(stats.failed, 0, `no failed request (${stats.ok} ok): ${[...new Set(stats.failures)].join('; ')}`)
  t.ok(stats.ok > 50, 'the load ran')
  const after = Object.values(pidsBySlot(pool))
  t.ok(before.every((pid) => !after.includes(pid)), 'every pid replaced')
  for (const pid of before) {
    const drained = pool.logs.find((l) => l.event === 'draining' && l.pid === pid)
    t.equal(drained?.reason, 'reload', `pid ${pid} drained for the reload`)
  }
  for (const slot of [1, 2, 3]) {
    const drained = pool.logs.findIndex((l) => l.event === 'haproxy-drained' && l.slot === slot)
    const maint = pool.logs.findIndex((l) => l.event === 'haproxy-maint' && l.slot === slot && before.includes(l.pid))
    const stopped = pool.logs.findIndex((l) => l.event === 'exit' && l.slot === slot && before.includes(l.pid))
    t.ok(drained >= 0 && drained < stopped, `worker${slot}: HAProxy had no session on it before its worker stopped`)
    t.ok(maint > drained && maint < stopped, `worker${slot}: MAINT once drained, before its worker stopped`)
  }
})

onPlatforms(t, 'pool scale up and down under load through HAProxy: zero failed requests', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2, maxWorkers: 4 })
  await startHaproxyPool(t, lab, { workers: 2 })
  await waitFor(async () => { const s = await statuses(lab.client); return s.worker1 === 'UP' && s.worker2 === 'UP' },
    { timeout: 5000, what: 'two servers UP' })
  const load = startLoad(lab.url, { concurrency: 5, maxMs: 30000, path: (i) => `/block?ms=10&id=${i}` })
  t.teardown(() => load.stop())
  const up = await control(['scale', '4'], lab)
  t.equal(up.code, 0, up.out)
  await waitFor(async () => (await statuses(lab.client)).worker4 === 'UP', { timeout: 5000, what: 'worker4 UP' })
  await moreAnswers(load)
  const down = await control(['scale', '1'], lab)
  t.equal(down.code, 0, down.out)
  await moreAnswers(load)
  const stats = await load.stop()
  t.equal(stats.failed, 0, `no failed request (${stats.ok} ok): ${[...new Set(stats.failures)].join('; ')}`)
  const s = await statuses(lab.client)
  t.equal(s.worker1, 'UP')
  t.same([s.worker2, s.worker3, s.worker4], ['MAINT', 'MAINT', 'MAINT'], 'the removed slots are back in MAINT')
})
