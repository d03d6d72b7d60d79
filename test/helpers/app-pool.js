'use strict'

// An app under the real `pool start`, as a user runs it: N workers behind the embedded balancer,
// a control socket in a temp dir, and the two checks every app form must pass: a `pool reload`
// under a bounded load fails no request, and a `pool stop` leaves no process and no port behind.

const path = require('node:path')
const { freePorts, startPool, runPool, waitFor, isAlive, canBind, tempDir } = require('../helpers')
const { startLoad } = require('./load')

// `pool start APP -n workers` with the balancer on a free port; resolves once every worker is
// ready. `env` reaches the workers; `args` are more `pool start` flags. `control: false`: no
// --control, so the pool's socket is the default one `pool status --port` finds.
async function startAppPool (t, app, { workers = 2, env = {}, args = [], startTimeout = 30000, control = true } = {}) {
  const controlPath = control ? path.join(tempDir(t, 'pool-app-'), 'pool.sock') : null
  const ports = await freePorts(workers + 1)
  const child = startPool(['start', app, '-n', String(workers), '--port', String(ports[0]), '--worker-port',
    String(ports[1]), ...(control ? ['--control', controlPath] : []), '--log-format', 'json', ...args], { env })
  t.teardown(() => child.stop('SIGKILL'))
  await child.waitLog((l) => l.event === 'started', startTimeout)
  return {
    child,
    control: controlPath,
    ports,
    port: ports[0],
    url: `http://127.0.0.1:${ports[0]}`,
    ws: `ws://127.0.0.1:${ports[0]}`,
    workerUrl: (slot) => `http://127.0.0.1:${ports[slot]}`
  }
}

// `pool reload` while `concurrency` clients keep requesting `urlPath` through the balancer:
// every worker is replaced (the canary included, it is one more process that must boot), no
// request fails. Bounded: the load stops by itself after maxRequests or maxMs.
async function reloadUnderLoad (t, p, { urlPath = '/', concurrency = 4, timeout = 120000 } = {}) {
  const before = workerPids(p)
  const load = startLoad(p.url, { concurrency, maxRequests: 20000, maxMs: timeout, path: () => urlPath })
  try {
    await waitFor(() => load.stats.ok >= 10, { timeout: 20000, what: 'the load to get answers' })
    const r = await runPool(['reload', '--control', p.control], { timeout })
    t.equal(r.code, 0, `pool reload: ${r.stdout.trim() || r.stderr.trim()}`)
  } finally {
    const stats = await load.stop()
    t.equal(stats.failed, 0,
      `no failed request during the reload (${stats.ok} ok): ${stats.failures.slice(0, 3).join('; ')}`)
  }
  // The pool's log is written in batches, off the request's path: the new workers' `ready`
  // lines may reach us a moment after the reload's answer.
  const replaced = () => workerPids(p).filter((pid) => before.includes(pid)).length === 0
  await waitFor(replaced, { timeout: 2000, what: 'the new workers\' ready lines' }).catch(() => {})
  t.equal(workerPids(p).filter((pid) => before.includes(pid)).length, 0, 'every worker replaced')
}

// The pids of the workers serving now, from the pool's log: the last `ready` of each slot.
function workerPids (p) {
  const bySlot = new Map()
  for (const l of p.child.logs) if (l.event === 'ready') bySlot.set(l.slot, l.pid)
  return [...bySlot.values()]
}

// `pool stop`, then nothing is left: the pool, every worker it ever forked (canaries included),
// and every port it listened on.
async function stopLeavingNothing (t, p) {
  const r = await runPool(['stop', '--control', p.control], { timeout: 60000 })
  t.equal(r.code, 0, `pool stop: ${r.stdout.trim() || r.stderr.trim()}`)
  t.same(await p.child.exited, { code: 0, signal: null }, 'pool start exited 0')
  const pids = p.child.logs.filter((l) => l.event === 'spawn' || l.event === 'reload-canary').map((l) => l.pid)
  t.ok(pids.length > 0, 'workers were forked')
  for (const pid of pids) t.notOk(isAlive(pid), `process ${pid} gone`)
  for (const port of p.ports) t.ok(await canBind(port), `port ${port} is free`)
}

module.exports = { startAppPool, reloadUnderLoad, stopLeavingNothing, workerPids }
