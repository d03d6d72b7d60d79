'use strict'

// The production fronts from the configs `pool config haproxy` and `pool config nginx` generate,
// in a temp directory on free loopback ports, for the benches that measure them: HAProxy
// (maxconn 1, balance first, the generated timeouts and checks) and nginx in front of it over
// HAProxy's unix socket. Both run in the foreground as children registered with procs.js, so
// the bench's stopAll() ends them on every path; their temp directory goes with them.
//
// Two HAProxy builds: the system's (HAPROXY, /usr/sbin/haproxy: Debian 12's 2.6) and Debian 13's
// 3.0 (HAPROXY_30: the root scripts/setup builds, scripts/platforms.sh), for the parts that run a
// front or a configuration on each. Each started HAProxy says which version it is.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { poolConfig, HaproxyClient } = require('./internals')
const { spawnTracked, waitForPort } = require('./procs')

const HAPROXY = process.env.HAPROXY || '/usr/sbin/haproxy'
const DEBIAN13_DIR = process.env.POOL_DEBIAN13_DIR ||
  path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'pool-supervisor', 'debian13')
const HAPROXY_30 = process.env.HAPROXY_30 || path.join(DEBIAN13_DIR, 'bin', 'haproxy')
const NGINX = process.env.NGINX || '/usr/sbin/nginx'
// As root, nginx's workers run as 'nobody' (nginx's default user), and must be let into
// HAProxy's unix socket.
const NGINX_WORKER_USER = process.getuid?.() === 0 ? 'nobody' : undefined

const has = (bin) => spawnSync(bin, ['-v'], { stdio: 'ignore' }).status === 0

// 'HAProxy 3.0.11', as `bin -v` names it; null when it does not run.
const versions = new Map()
function haproxyVersion (bin = HAPROXY) {
  if (!versions.has(bin)) {
    const r = spawnSync(bin, ['-v'], { encoding: 'utf8' })
    const m = r.status === 0 && /^HAProxy version (\d+(?:\.\d+)+)/.exec(r.stdout)
    versions.set(bin, m ? `HAProxy ${m[1]}` : null)
  }
  return versions.get(bin)
}

// A temp directory that is removed once `child` exits; 0755 so nginx's workers can reach it.
function tempDirFor (label) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `pool-bench-${label}-`))
  fs.chmodSync(dir, 0o755)
  return dir
}

async function until (fn, { timeout = 5000, what }) {
  const deadline = Date.now() + timeout
  for (;;) {
    try { if (await fn()) return } catch {}
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

// `ready`, or an error as soon as the child exits (a config it refused) rather than at a timeout.
function startedOrExited (child, ready, what) {
  return Promise.race([ready, child.exited.then(() => { throw new Error(`${what} exited before it was ready (see its output above)`) })])
}

// HAProxy from the generated config. `edit(cfg)` may change the text (the kill timeline removes
// the health-check line). `ready: true` sets every server READY at once, for workers that no
// pool drives (the config starts them in MAINT). `bin`: which HAProxy (HAPROXY, HAPROXY_30).
// Returns { url, socket, httpSocket, client, dir, child, cfg, version }.
async function startGeneratedHaproxy ({ workers, workerPort, port, statsPort, timeout, queueTimeout, maxQueue, edit = (c) => c, ready = false, bin = HAPROXY }) {
  const dir = tempDirFor('haproxy')
  let cfg = poolConfig('haproxy', ['-n', workers, '--worker-port', workerPort, '--port', port, '--stats-port', statsPort, '--prefix', dir, '--log', 'none',
    ...(timeout ? ['--timeout', `${timeout}ms`] : []), ...(queueTimeout ? ['--queue-timeout', `${queueTimeout}ms`] : []),
    ...(maxQueue !== undefined ? ['--max-queue', maxQueue] : []),
    ...(NGINX_WORKER_USER ? ['--http-socket-user', NGINX_WORKER_USER] : [])])
  cfg = edit(cfg)
  const file = path.join(dir, 'haproxy.cfg')
  fs.writeFileSync(file, cfg)
  // -q: HAProxy's warnings (a server going DOWN...) are what the benches cause on purpose.
  const child = spawnTracked(bin, ['-db', '-q', '-f', file], { stdio: ['ignore', 'ignore', 'inherit'] })
  child.exited.then(() => fs.rmSync(dir, { recursive: true, force: true }))
  const socket = path.join(dir, 'haproxy-admin.sock')
  const client = new HaproxyClient({ socket, timeout: 1000 })
  await startedOrExited(child, until(async () => (await client.level()) !== '', { what: `HAProxy's socket ${socket}` }), 'HAProxy')
  await waitForPort(port)
  if (ready) {
    for (let i = 1; i <= workers; i++) await client.setServerState('pool', `worker${i}`, 'ready')
  }
  return { url: `http://127.0.0.1:${port}`, socket, httpSocket: path.join(dir, 'haproxy-http.sock'), client, dir, child, cfg, version: haproxyVersion(bin) }
}

// Resolves once every server of the backend is UP (after READY, the first check must pass).
async function allServersUp (client, { timeout = 10000 } = {}) {
  await until(async () => Object.values(await client.servers('pool')).every((s) => s.status === 'UP' || s.status === 'no check'), { timeout, what: 'every HAProxy server UP' })
}

// nginx from the generated config, in front of HAProxy's unix socket `haproxySocket`. `edit(cfg)`
// may change the text (the body-budget bench leaves client_body_buffer_size at nginx's default).
async function startGeneratedNginx ({ port, haproxySocket, edit = (c) => c }) {
  const dir = tempDirFor('nginx')
  fs.mkdirSync(path.join(dir, 'logs'))
  const cfg = edit(poolConfig('nginx', ['--prefix', dir, '--host', '127.0.0.1', '--port', port, '--haproxy-http-socket', haproxySocket])
    // The access log is not what is measured; writing it would cost the same on every request.
    .replace(/access_log \S+;/, 'access_log off;'))
  fs.writeFileSync(path.join(dir, 'nginx.conf'), cfg)
  const args = ['-p', dir + '/', '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'logs', 'error.log'), '-g', 'daemon off;']
  const child = spawnTracked(NGINX, args, { stdio: ['ignore', 'ignore', 'inherit'] })
  child.stopSignal = 'SIGTERM' // the master stops its workers; SIGKILL would orphan them
  child.exited.then(() => fs.rmSync(dir, { recursive: true, force: true }))
  await startedOrExited(child, waitForPort(port), 'nginx')
  return { url: `http://127.0.0.1:${port}`, dir, child, cfg }
}

module.exports = { startGeneratedHaproxy, startGeneratedNginx, allServersUp, has, haproxyVersion, HAPROXY, HAPROXY_30, NGINX }
