'use strict'

// Real haproxy and nginx for tests, from generated configs in a temp directory. Each runs in
// the foreground as our child (haproxy -db, nginx 'daemon off;') so that stop() — which every
// test registers in t.teardown — always finds and ends it.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { HaproxyClient } = require('../../lib/haproxy/client')
const { waitFor, request } = require('../helpers')

const HAPROXY = '/usr/sbin/haproxy'
const NGINX = '/usr/sbin/nginx'
const IS_ROOT = process.getuid?.() === 0
// As root, nginx's workers run as 'nobody': sockets they must reach are handed to that user.
const NGINX_WORKER_USER = IS_ROOT ? 'nobody' : undefined

// A temp directory removed at teardown. 0755 so that processes running as another user (nginx's
// workers, a client dropped to 'nobody') can reach what is inside, as in production.
function tempDir (t, label = 'pool-haproxy-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), label))
  fs.chmodSync(dir, 0o755)
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

// Stop a child for sure: SIGTERM, then SIGKILL after `grace` ms; resolves once it exited.
function stopChild (child, grace = 3000) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), grace)
    child.once('exit', () => { clearTimeout(timer); resolve() })
    child.kill('SIGTERM')
  })
}

function watchOutput (child) {
  child.output = ''
  const add = (d) => { child.output = (child.output + d).slice(-8000) }
  child.stdout?.on('data', add)
  child.stderr?.on('data', add)
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
}

// `haproxy -c -f FILE`: { ok, output }.
function checkHaproxyConfig (file) {
  const r = spawnSync(HAPROXY, ['-c', '-f', file], { encoding: 'utf8', timeout: 10000 })
  return { ok: r.status === 0, output: (r.stdout || '') + (r.stderr || '') }
}

// `nginx -t` with everything under `prefix`: { ok, output }.
function checkNginxConfig (prefix) {
  fs.mkdirSync(path.join(prefix, 'logs'), { recursive: true })
  const r = spawnSync(NGINX, nginxArgs(prefix, ['-t']), { encoding: 'utf8', timeout: 10000 })
  return { ok: r.status === 0, output: (r.stdout || '') + (r.stderr || '') }
}

function nginxArgs (prefix, extra = []) {
  return ['-p', prefix + '/', '-c', path.join(prefix, 'nginx.conf'), '-e', path.join(prefix, 'logs', 'error.log'), ...extra]
}

// Start haproxy in the foreground with `cfg` (text), written to DIR/haproxy.cfg. Resolves once
// its runtime API answers. `socket` defaults to the config's first `stats socket`.
// `masterWorker`: run as systemd's haproxy.service does (-W), so SIGUSR2 to the child (the
// master) is `systemctl reload haproxy`: a new worker process from the config, the old one
// finishing what it runs.
async function startHaproxy ({ cfg, dir, socket, t, masterWorker = false }) {
  const file = path.join(dir, 'haproxy.cfg')
  fs.writeFileSync(file, cfg)
  socket = socket ?? /^\s*stats socket (\S+)/m.exec(cfg)[1]
  const child = spawn(HAPROXY, [...(masterWorker ? ['-W'] : []), '-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] })
  watchOutput(child)
  const handle = { pid: child.pid, socket, child, file, stop: () => stopChild(child) }
  t?.teardown(handle.stop)
  const client = new HaproxyClient({ socket, timeout: 1000 })
  try {
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`haproxy exited with ${child.exitCode}: ${child.output}`)
      return (await client.level()) !== ''
    }, { timeout: 5000, what: `haproxy's socket ${socket}` })
  } catch (err) {
    await handle.stop()
    throw err
  }
  return handle
}

// Start nginx in the foreground with `cfg`, everything under `prefix`. Resolves once /ping
// answers on `port`.
async function startNginx ({ cfg, prefix, port, t }) {
  fs.mkdirSync(path.join(prefix, 'logs'), { recursive: true })
  fs.writeFileSync(path.join(prefix, 'nginx.conf'), cfg)
  const child = spawn(NGINX, nginxArgs(prefix, ['-g', 'daemon off;']), { stdio: ['ignore', 'pipe', 'pipe'] })
  watchOutput(child)
  const handle = { pid: child.pid, prefix, child, stop: () => stopChild(child) }
  t?.teardown(handle.stop)
  try {
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}: ${child.output}`)
      return (await request(`http://127.0.0.1:${port}/ping`, { timeout: 1000 })).status === 200
    }, { timeout: 5000, what: `nginx on port ${port}` })
  } catch (err) {
    await handle.stop()
    throw err
  }
  return handle
}

module.exports = { HAPROXY, NGINX, IS_ROOT, NGINX_WORKER_USER, tempDir, stopChild, checkHaproxyConfig, checkNginxConfig, startHaproxy, startNginx }
