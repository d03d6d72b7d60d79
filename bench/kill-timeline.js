'use strict'

// The kill timeline: answered and failed requests per second, over time, while one worker is
// SIGKILLed every second, with and without the pool driving HAProxy. It is the seed experiment
// of this project (what HAProxy alone does to its queue when a worker dies) as a picture; the
// counts per configuration are bench/haproxy-kill.js's.
//
//   node bench/kill-timeline.js [--quick] [--configs pool-haproxy,pool-haproxy-3.0,haproxy-observe,haproxy-check,haproxy-alone,embedded]
//                               [--duration 12] [--results DIR]
//
// Each configuration: `pool start -n 4` of the bench app, 12 closed-loop keep-alive clients
// sending GET /?ms=20 (20 ms renders, Atomics.wait), a worker SIGKILLed every second from 2 s on
// (slots in turn, serving ones only), and the requests' outcomes counted in 250 ms bins.
//   pool-haproxy    HAProxy from `pool config haproxy`, driven by `pool start --balancer haproxy`
//                   (READY when a worker is ready, MAINT the moment it exits)
//   pool-haproxy-3.0 the same on Debian 13's HAProxy 3.0 (the generated nbthread 1)
//   haproxy-observe the same HAProxy config (checks every 2 s and `observe layer4`, which marks
//                   a server down at its first failed connection), nobody driving it: every
//                   server set READY once, as a static config
//   haproxy-check   the same without `observe layer4` (health checks every 2 s only)
//   haproxy-alone   neither checks nor anyone driving it: what HAProxy knows by itself
//   embedded        the embedded balancer (`pool start`), for comparison
// Loopback only; every process is stopped after each configuration and on Ctrl-C.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { freePorts } = require('./lib/procs')
const { startPoolProcess } = require('./lib/pool-process')
const { startGeneratedHaproxy, has, HAPROXY, HAPROXY_30 } = require('./lib/stack')
const { closedLoop } = require('./lib/closed-loop')
const { runPart, progress, sleep, round, log } = require('./lib/part')

const WORKERS = 4
const CLIENTS = 12
const RENDER_MS = 20
const BIN_MS = 250
const OBSERVE = ' observe layer4 error-limit 1 on-error mark-down'

const CONFIGS = {
  'pool-haproxy': { haproxy: (cfg) => cfg, drive: true },
  'pool-haproxy-3.0': { haproxy: (cfg) => cfg, drive: true, bin: HAPROXY_30 },
  'haproxy-observe': { haproxy: (cfg) => cfg, drive: false },
  'haproxy-check': { haproxy: (cfg) => cfg.replace(OBSERVE, ''), drive: false },
  'haproxy-alone': { haproxy: (cfg) => cfg.replace(/ check inter \S+ fall \d+ rise \d+/, '').replace(OBSERVE, ''), drive: false },
  embedded: { haproxy: null }
}

const defaults = { configs: Object.keys(CONFIGS), duration: 12 }
const quick = { configs: ['pool-haproxy', 'haproxy-observe', 'haproxy-alone'], duration: 6 }

async function startConfig (name) {
  const spec = CONFIGS[name]
  const ports = await freePorts(WORKERS)
  const [port, statsPort] = await freePorts(2)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-timeline-'))
  const common = ['-n', String(WORKERS), '--worker-port', String(ports[0]), '--control', path.join(dir, 'control.sock')]
  if (!spec.haproxy) {
    const pool = startPoolProcess([...common, '--port', String(port), '--no-access-log'])
    await pool.started
    return {
      url: `http://127.0.0.1:${port}`,
      pool,
      async stop () {
        await pool.stop({ grace: 5000 })
        fs.rmSync(dir, { recursive: true, force: true })
      }
    }
  }
  const haproxy = await startGeneratedHaproxy({ workers: WORKERS, workerPort: ports[0], port, statsPort, edit: spec.haproxy, bin: spec.bin })
  const front = spec.drive ? ['--balancer', 'haproxy', '--haproxy-socket', haproxy.socket, '--haproxy-backend', 'pool'] : ['--balancer', 'none']
  const pool = startPoolProcess([...common, ...front])
  await pool.started
  // Nobody drives HAProxy: every server READY once, as in a static config.
  if (!spec.drive) for (let slot = 1; slot <= WORKERS; slot++) await haproxy.client.setServerState('pool', `worker${slot}`, 'ready')
  await sleep(300)
  return {
    url: haproxy.url,
    pool,
    haproxy: haproxy.version,
    async stop () {
      await pool.stop({ grace: 5000 })
      haproxy.child.kill('SIGKILL')
      await haproxy.child.exited
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

// SIGKILL a serving worker every second from 2 s on, slots in turn, until `until` ms.
async function killEverySecond (pool, t0, untilMs) {
  const kills = []
  let slot = 0
  await sleep(2000)
  while (performance.now() - t0 < untilMs) {
    for (let tries = 0; tries < WORKERS; tries++) {
      slot = (slot % WORKERS) + 1
      const pid = pool.pids[slot]
      if (pool.ready.has(pid)) {
        try { process.kill(pid, 'SIGKILL'); kills.push(round((performance.now() - t0) / 1000, 2)) } catch {}
        break
      }
    }
    await sleep(1000)
  }
  return kills
}

// Outcomes per bin, by the time each request ended; those that ended after the load stopped
// sending (the last ones in flight) fall in no bin.
function bins (load, durationS) {
  const out = Array.from({ length: Math.floor(durationS * 1000 / BIN_MS) }, (_, i) => ({ t: (i * BIN_MS) / 1000, ok: 0, failed: 0 }))
  const at = (ms) => out[Math.floor(ms / BIN_MS)] ?? { ok: 0, failed: 0 }
  for (const r of load.responses) at(r.end)[r.status >= 200 && r.status < 300 ? 'ok' : 'failed']++
  for (const f of load.failures) at(f.end).failed++
  return out
}

async function main (args) {
  const configs = args.configs.filter((c) => CONFIGS[c])
  const binOf = (c) => CONFIGS[c].haproxy && (CONFIGS[c].bin ?? HAPROXY)
  const runnable = configs.filter((c) => !binOf(c) || has(binOf(c)))
  const skipped = configs.filter((c) => !runnable.includes(c)).map((c) => ({ config: c, reason: `${binOf(c)} not found` }))
  const rows = []
  for (const [i, name] of runnable.entries()) {
    progress(i, runnable.length, name)
    const setup = await startConfig(name)
    try {
      const t0 = performance.now()
      const killing = killEverySecond(setup.pool, t0, (args.duration - 1) * 1000)
      const load = await closedLoop({ url: setup.url, connections: CLIENTS, durationS: args.duration, timeoutS: 10, service: { ms: RENDER_MS } })
      const kills = await killing
      const s = load.summary
      rows.push({ config: name, haproxy: setup.haproxy, kills, ok: s.ok, failed: s.failed, failedByKind: s.failedByKind, p99: round(s.p99), bins: bins(load, args.duration) })
      log(`  ${name.padEnd(14)} ${kills.length} kills: ${s.ok} answered, ${s.failed} failed ${JSON.stringify(s.failedByKind)}`)
    } finally {
      await setup.stop()
    }
  }
  progress(runnable.length, runnable.length, 'done')
  return { workers: WORKERS, clients: CLIENTS, renderMs: RENDER_MS, binMs: BIN_MS, rows, skipped }
}

runPart('kill-timeline', { defaults, quick, main })
