'use strict'

// A pool driving a real HAProxy, for the `--balancer haproxy` tests: HAProxy from the generated
// config (lib/generate/haproxy.js) in a temp directory on free loopback ports, and `pool start`
// as a child with JSON logs. Both are stopped at teardown.

const path = require('node:path')
const { haproxyConfig } = require('../../lib/generate/haproxy')
const { HaproxyClient } = require('../../lib/haproxy/client')
const { FIXTURES, freePorts, startPool, request, sleep, waitFor, tempDir } = require('../helpers')
const { startHaproxy } = require('./haproxy')

const CONTROL_APP = path.join(FIXTURES, 'control.js')

// HAProxy for `workers` servers (plus spares up to maxWorkers). `edit` changes the config text;
// `extraGlobal` adds lines to its global section; `stateFile` has it load server states from
// lab.stateFile (`pool config haproxy --state-file`). `options`: more of `pool config haproxy`'s.
// `platform`: whose haproxy (helpers/haproxy.js).
async function startLabHaproxy (t, {
  workers = 2, maxWorkers, edit = (cfg) => cfg, extraGlobal = () => [], nginxUser, log = 'none',
  stateFile = false, masterWorker = false, options = {}, platform
} = {}) {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const ports = await freePorts(2 + (maxWorkers ?? workers))
  const [port, statsPort] = ports
  const workerPort = ports[2]
  const stateFilePath = stateFile ? path.join(dir, 'haproxy.state') : undefined
  let cfg = haproxyConfig({
    workers,
    maxWorkers,
    port,
    statsPort,
    workerPort,
    prefix: dir,
    log,
    httpSocketUser: nginxUser,
    stateFile: stateFilePath,
    ...options
  })
  const extra = extraGlobal({ dir }).map((line) => `    ${line}\n`).join('')
  cfg = edit(cfg.replace('global\n', 'global\n' + extra))
  const haproxy = await startHaproxy({ cfg, dir, t, masterWorker, platform })
  const lab = {
    dir,
    platform,
    cfg,
    port,
    statsPort,
    workerPort,
    stateFile: stateFilePath,
    url: `http://127.0.0.1:${port}`,
    socket: haproxy.socket,
    haproxy,
    client: new HaproxyClient({ socket: haproxy.socket, timeout: 1000 }),
    // Stop this HAProxy and start a new one from the same config: every runtime state is lost.
    async restartHaproxy ({ downMs = 0 } = {}) {
      await lab.haproxy.stop()
      if (downMs > 0) await sleep(downMs)
      lab.haproxy = await startHaproxy({ cfg, dir, t, masterWorker, platform })
      return lab.haproxy
    },
    // `systemctl reload haproxy` (masterWorker only): resolves with the new worker's pid once
    // it answers on the runtime API.
    async reloadHaproxy () {
      const before = (await lab.client.info()).Pid
      lab.haproxy.child.kill('SIGUSR2')
      return waitFor(async () => {
        const pid = (await lab.client.info().catch(() => ({}))).Pid
        return pid !== undefined && pid !== before && pid
      }, { timeout: 10000, interval: 5, what: 'a new HAProxy worker after SIGUSR2' })
    }
  }
  return lab
}

// `pool start APP --balancer haproxy` against `lab`; resolves once `ready` workers are ready
// and the pool logged 'started'.
async function startHaproxyPool (t, lab, { workers = 2, app = CONTROL_APP, args = [], env } = {}) {
  const pool = startPool(['start', app, '-n', String(workers),
    '--balancer', 'haproxy', '--haproxy-socket', lab.socket, '--haproxy-backend', 'pool',
    '--worker-port', String(lab.workerPort), '--control', path.join(lab.dir, 'control.sock'),
    '--log-format', 'json', ...args], { env })
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started', 20000)
  return pool
}

// For waitFor: resolves true once every server of backend `pool` is UP.
const allUp = (client) => async () => Object.values(await statuses(client)).every((s) => s === 'UP')

// The `status` column of every server of backend `pool`: { worker1: 'UP', ... }.
async function statuses (client) {
  const out = {}
  for (const [name, row] of Object.entries(await client.servers('pool'))) out[name] = row.status
  return out
}

// The pid that answers a request through HAProxy (the control fixture replies with it).
async function servedBy (url, pathname = '/') {
  const r = await request(url + pathname, { timeout: 5000 })
  if (r.status !== 200) throw new Error(`${pathname}: status ${r.status}`)
  return JSON.parse(r.body)
}

// The latest pid of every slot, from the pool's 'spawn' log lines.
function pidsBySlot (pool) {
  const pids = {}
  for (const l of pool.logs) if (l.event === 'spawn') pids[l.slot] = l.pid
  return pids
}

module.exports = { CONTROL_APP, startLabHaproxy, startHaproxyPool, statuses, servedBy, pidsBySlot, allUp }
