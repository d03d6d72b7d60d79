'use strict'

// The fronts the matrix, the reload and the cost measurements compare, each as its users run it,
// behind one interface:
//   embedded   `pool start` (the supervisor's embedded balancer)
//   haproxy    `pool start --balancer haproxy` driving HAProxy from `pool config haproxy`
//   haproxy-3.0  the same on Debian 13's HAProxy 3.0 (./stack.js HAPROXY_30), a row beside it
//              where a part asks for it
//   cluster    Node's cluster: round-robin, a primary that respawns workers, the rolling restart
//              of the cluster docs (bench/lib/cluster-managed.js)
//   pm2        PM2 cluster mode, `pm2 reload` (bench/lib/pm2.js)
//   minimal    the floor of a Node balancer for the pool's rule (bench/lib/minimal-balancer.js),
//              before plain bench workers; the costs part's yardstick, not a peer: it only
//              serves and stops (no reload, no respawn). `cap`: requests per worker (1); the
//              concurrency part's plain relay at K
// Each serves the bench app (bench/lib/app.js), or `app` (a pool app that also runs on its own,
// on $PORT: the SSR demo), on `workers` workers and has:
//   url, workerUrl (the pool's: slot 1's worker on its own port),
//   serving() → [{ slot, pid }] of the workers serving now, settle() → once all serve again,
//   reload() → { ms, code } once a rolling reload is done, processes() → { front: [pid], workers:
//   [pid] } (what its CPU and memory are measured on), stop().

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { forkReady, freePorts, sleep } = require('./procs')
const { startPoolProcess, BIN } = require('./pool-process')
const { startGeneratedHaproxy, allServersUp, has, HAPROXY, HAPROXY_30 } = require('./stack')
const pm2 = require('./pm2')

// The peers of the pool; the minimal balancer is only a yardstick.
const KINDS = ['embedded', 'haproxy', 'cluster', 'pm2']
// The HAProxy each HAProxy-mode kind runs.
const HAPROXY_OF = { haproxy: HAPROXY, 'haproxy-3.0': HAPROXY_30 }

// Why a kind cannot run here, or null.
function unavailable (kind) {
  const haproxy = HAPROXY_OF[kind]
  if (haproxy && !has(haproxy)) return `${haproxy} not found${kind === 'haproxy-3.0' ? ' (scripts/setup builds it)' : ''}`
  if (kind === 'pm2' && !pm2.available()) return 'pm2 not installed (a devDependency: npm install)'
  return null
}

// `timeout` (ms): the pool's --timeout and --heartbeat-timeout, so that a hung worker is ended
// within a run. `poolArgs`: more `pool start` flags (the embedded balancer's options...).
// `queueTimeout` (ms) and `maxQueue` (HAProxy mode): the generated config's --queue-timeout
// and --max-queue. `accessLog`: the embedded balancer's access log, as by default (the other
// parts turn it off). `bin`: another checkout's bin/pool.js, for `pool start` and `pool reload`.
async function startPoolFront (kind, { workers, timeout = 30000, queueTimeout, maxQueue, poolArgs = [], app, accessLog = false, bin = BIN }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-front-'))
  const workerPorts = await freePorts(workers)
  const [port, statsPort] = await freePorts(2)
  const control = path.join(dir, 'control.sock')
  const common = ['-n', String(workers), '--worker-port', String(workerPorts[0]), '--control', control,
    '--timeout', `${timeout}ms`, '--heartbeat-timeout', `${timeout}ms`]
  let haproxy = null
  let front
  if (HAPROXY_OF[kind]) {
    haproxy = await startGeneratedHaproxy({ workers, workerPort: workerPorts[0], port, statsPort, timeout, queueTimeout, maxQueue, bin: HAPROXY_OF[kind] })
    front = ['--balancer', 'haproxy', '--haproxy-socket', haproxy.socket, '--haproxy-backend', 'pool']
  } else {
    front = ['--port', String(port), ...(accessLog ? [] : ['--no-access-log'])]
  }
  const pool = startPoolProcess([...common, ...front, ...poolArgs], { ...(app ? { app } : {}), bin })
  // However the pool ends (stop(), or stopAll() on Ctrl-C or a failure), its temp dir goes.
  pool.child.exited.then(() => fs.rmSync(dir, { recursive: true, force: true }))
  try {
    await pool.started
    if (haproxy) await allServersUp(haproxy.client)
  } catch (err) {
    // Nothing of a failed start is left running: the caller may try again on new ports.
    await pool.stop({ grace: 2000 })
    if (haproxy) { haproxy.child.kill('SIGKILL'); await haproxy.child.exited }
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  }
  const serving = () => Object.entries(pool.pids).filter(([, pid]) => pool.ready.has(pid)).map(([slot, pid]) => ({ slot: Number(slot), pid }))
  return {
    kind,
    url: `http://127.0.0.1:${port}`,
    // Slot 1's worker, reached on its own port without the front.
    workerUrl: `http://127.0.0.1:${workerPorts[0]}`,
    pool,
    haproxy,
    serving,
    async settle () {
      const deadline = Date.now() + 30000
      while (serving().length < workers && Date.now() < deadline) await sleep(100)
      if (haproxy) await allServersUp(haproxy.client, { timeout: 10000 }).catch(() => {})
      return serving().length === workers
    },
    reload () {
      const started = performance.now()
      return new Promise((resolve) => {
        execFile(process.execPath, [bin, 'reload', '--control', control, '--timeout', '60s'], { timeout: 70000 }, (err) => {
          resolve({ ms: Math.round(performance.now() - started), code: err ? err.code ?? 1 : 0 })
        })
      })
    },
    processes: () => ({ front: [pool.child.pid, ...(haproxy ? [haproxy.child.pid] : [])], workers: serving().map((w) => w.pid) }),
    async stop () {
      await pool.stop({ grace: 5000 })
      if (haproxy) { haproxy.child.kill('SIGKILL'); await haproxy.child.exited }
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

async function startClusterFront ({ workers, app }) {
  const [port] = await freePorts(1)
  const child = await forkReady('cluster-managed.js', { PORT: String(port), WORKERS: String(workers), ...(app ? { APP: app } : {}) }, { timeout: 60000 })
  // One answer to `message`, or `fallback` if the primary says nothing within `ms`.
  const ask = (message, key, ms, fallback) => new Promise((resolve) => {
    const timer = setTimeout(() => { child.removeListener('message', onMessage); resolve(fallback) }, ms)
    const onMessage = (m) => { if (m && m[key] !== undefined) { clearTimeout(timer); child.removeListener('message', onMessage); resolve(m[key]) } }
    child.on('message', onMessage)
    if (child.connected) child.send(message)
  })
  const pids = () => ask('pids', 'pids', 1000, [])
  return {
    kind: 'cluster',
    url: `http://127.0.0.1:${port}`,
    child,
    serving: async () => (await pids()).map((pid, i) => ({ slot: i + 1, pid })),
    async settle () {
      const deadline = Date.now() + 30000
      while ((await pids()).length < workers && Date.now() < deadline) await sleep(100)
      return true
    },
    async reload () {
      const started = performance.now()
      const r = await ask('reload', 'reloaded', 70000, null)
      return { ms: Math.round(performance.now() - started), code: r ? 0 : 1 }
    },
    processes: async () => ({ front: [child.pid], workers: await pids() }),
    // Disconnecting makes the primary SIGKILL its workers (stopped ones too) and exit.
    async stop () {
      const all = await pids()
      if (child.connected) child.disconnect()
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000)
      await child.exited
      clearTimeout(timer)
      for (const pid of all) { try { process.kill(pid, 'SIGKILL') } catch {} }
    }
  }
}

async function startPm2Front ({ workers, app }) {
  const [port] = await freePorts(1)
  const p = await pm2.startPm2({ workers, port, app })
  const online = async () => (await p.list().catch(() => [])).filter((x) => x.status === 'online' && x.pid > 0)
  return {
    kind: 'pm2',
    url: p.url,
    home: p.home,
    serving: async () => (await online()).map((x) => ({ slot: x.id + 1, pid: x.pid })),
    async settle () {
      const deadline = Date.now() + 30000
      while ((await online()).length < workers && Date.now() < deadline) await sleep(200)
      return true
    },
    async reload () {
      const started = performance.now()
      const code = await p.reload().then(() => 0, () => 1)
      return { ms: Math.round(performance.now() - started), code }
    },
    processes: async () => ({ front: [p.daemonPid()].filter(Boolean), workers: (await online()).map((x) => x.pid) }),
    // `pm2 kill` SIGKILLs whatever does not exit within PM2's kill_timeout (a hung worker).
    async stop () {
      for (const x of await online()) { try { process.kill(x.pid, 'SIGCONT') } catch {} }
      await p.stop()
    }
  }
}

async function startMinimalFront ({ workers, cap = 1 }) {
  const ports = await freePorts(workers + 1)
  const children = await Promise.all(ports.slice(1).map((port) => forkReady('worker.js', { PORT: String(port) })))
  const balancer = await forkReady('minimal-balancer.js', { CONFIG: JSON.stringify({ port: ports[0], workers: ports.slice(1).map((port) => ({ port })), cap }) })
  return {
    kind: 'minimal',
    url: `http://127.0.0.1:${ports[0]}`,
    workerUrl: `http://127.0.0.1:${ports[1]}`,
    serving: () => children.map((c, i) => ({ slot: i + 1, pid: c.pid })),
    settle: async () => true,
    processes: () => ({ front: [balancer.pid], workers: children.map((c) => c.pid) }),
    async stop () {
      for (const child of [balancer, ...children]) child.kill('SIGKILL')
      await Promise.all([balancer, ...children].map((c) => c.exited))
    }
  }
}

function startOnce (kind, options) {
  if (kind === 'minimal') return startMinimalFront(options)
  if (kind === 'cluster') return startClusterFront(options)
  if (kind === 'pm2') return startPm2Front(options)
  return startPoolFront(kind, options)
}

// A start can fail for reasons that are not the front's: a free port taken by another program
// between the check and the bind, a runtime socket busy on a loaded machine. Up to `attempts`
// starts, each on new ports; the last failure is thrown.
async function startFront (kind, options, { attempts = 3 } = {}) {
  for (let i = 1; ; i++) {
    try {
      return await startOnce(kind, options)
    } catch (err) {
      if (i >= attempts) throw err
      console.log(`  ${kind}: start failed (${err.message.split('\n')[0]}); trying again`)
      await sleep(1000)
    }
  }
}

module.exports = { startFront, unavailable, KINDS, HAPROXY_OF }
