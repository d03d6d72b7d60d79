'use strict'

// Real haproxy and nginx for tests, from generated configs in a temp directory. Each runs in
// the foreground as our child (haproxy -db, nginx 'daemon off;') so that stop() — which every
// test registers in t.teardown — always finds and ends it.
//
// Two platforms: the system's HAProxy and nginx (in /usr/sbin: Debian 12's in CI), which every
// test uses, and Debian 13's (scripts/platforms.sh: scripts/setup builds them), which the tests of
// what a new version can change run on as well, through onPlatforms().

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { HaproxyClient } = require('../../lib/haproxy/client')
const { nginxConfig } = require('../../lib/generate/nginx')
const { freePorts, waitFor, request, stopChild } = require('../helpers')

const HAPROXY = '/usr/sbin/haproxy'
const NGINX = '/usr/sbin/nginx'
const DEBIAN13_DIR = process.env.POOL_DEBIAN13_DIR ||
  path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'pool-supervisor', 'debian13')
const IS_ROOT = process.getuid?.() === 0
// As root, nginx's workers run as 'nobody': sockets they must reach are handed to that user.
const NGINX_WORKER_USER = IS_ROOT ? 'nobody' : undefined

function watchOutput (child) {
  child.output = ''
  const add = (d) => { child.output = (child.output + d).slice(-8000) }
  child.stdout?.on('data', add)
  child.stderr?.on('data', add)
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
}

function executable (file) {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

// The upstream version `bin -v` names: '3.0.11', '1.26.3'.
function versionOf (bin) {
  const r = spawnSync(bin, ['-v'], { encoding: 'utf8', timeout: 10000 })
  return /(?:HAProxy version |nginx\/)(\d+(?:\.\d+)+)/.exec((r.stdout || '') + (r.stderr || ''))?.[1] ?? '?'
}

// A platform: where its haproxy and nginx are, why it cannot run (null when it can), and their
// versions (read once, when first asked for).
function makePlatform (name, release, dir, whence) {
  const haproxy = path.join(dir, 'haproxy')
  const nginx = path.join(dir, 'nginx')
  const absent = [haproxy, nginx].filter((bin) => !executable(bin))
  let versions
  return {
    name,
    release,
    dir,
    haproxy,
    nginx,
    missing: absent.length === 0 ? null : `${release}'s ${absent.join(' and ')} not found (${whence})`,
    get versions () { return (versions ??= { haproxy: versionOf(haproxy), nginx: versionOf(nginx) }) }
  }
}

const PLATFORMS = [
  makePlatform('system', 'the system', path.dirname(HAPROXY), 'scripts/setup installs them with apt'),
  makePlatform('debian13', 'Debian 13', path.join(DEBIAN13_DIR, 'bin'),
    `scripts/setup builds them into ${DEBIAN13_DIR}`)
]
const SYSTEM = PLATFORMS[0]

// The platforms to run on: all, or those TEST_PLATFORMS names (system,debian13).
function platforms () {
  const wanted = process.env.TEST_PLATFORMS?.split(',').map((s) => s.trim()).filter(Boolean)
  if (!wanted) return PLATFORMS
  const names = PLATFORMS.map((p) => p.name)
  const unknown = wanted.filter((name) => !names.includes(name))
  if (unknown.length > 0) {
    throw new Error(`TEST_PLATFORMS names ${unknown.join(', ')}: the platforms are ${names.join(', ')}`)
  }
  return PLATFORMS.filter((p) => wanted.includes(p.name))
}

// t.test(`${name} [HAProxy x.y.z]`, fn) once per platform: fn(t, platform). `options` are
// t.test's, and `nginx: true` for a test that runs the platform's nginx too (its version is then
// in the name). A platform that is not installed is skipped, saying why, or fails where it must
// be there (TEST_PLATFORMS_REQUIRED=1, as .ci/run sets).
function onPlatforms (t, name, options, fn) {
  if (typeof options === 'function') [options, fn] = [{}, options]
  const { nginx = false, ...testOptions } = options
  for (const p of platforms()) {
    if (p.missing && process.env.TEST_PLATFORMS_REQUIRED === '1') {
      t.test(`${name} [${p.release}]`, testOptions, async (t) => { t.fail(p.missing) })
    } else if (p.missing) {
      t.test(`${name} [${p.release}]`, { ...testOptions, skip: p.missing })
    } else {
      const label = `HAProxy ${p.versions.haproxy}${nginx ? `, nginx ${p.versions.nginx}` : ''}`
      t.test(`${name} [${label}]`, testOptions, (t) => fn(t, p))
    }
  }
}

// `haproxy -c -f FILE`: { ok, output }.
function checkHaproxyConfig (file, { platform = SYSTEM } = {}) {
  const r = spawnSync(platform.haproxy, ['-c', '-f', file], { encoding: 'utf8', timeout: 10000 })
  return { ok: r.status === 0, output: (r.stdout || '') + (r.stderr || '') }
}

// `nginx -t` with everything under `prefix`: { ok, output }.
function checkNginxConfig (prefix, { platform = SYSTEM } = {}) {
  fs.mkdirSync(path.join(prefix, 'logs'), { recursive: true })
  const r = spawnSync(platform.nginx, nginxArgs(prefix, ['-t']), { encoding: 'utf8', timeout: 10000 })
  return { ok: r.status === 0, output: (r.stdout || '') + (r.stderr || '') }
}

function nginxArgs (prefix, extra = []) {
  return ['-p', prefix + '/', '-c', path.join(prefix, 'nginx.conf'), '-e', path.join(prefix, 'logs', 'error.log'),
    ...extra]
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
  const child = spawn(HAPROXY, [...(masterWorker ? ['-W'] : []), '-db', '-f', file],
    { stdio: ['ignore', 'pipe', 'pipe'] })
  watchOutput(child)
  const handle = { pid: child.pid, socket, child, file, stop: () => stopChild(child, { grace: 3000 }) }
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
async function startNginx ({ cfg, prefix, port, t, platform = SYSTEM }) {
  fs.mkdirSync(path.join(prefix, 'logs'), { recursive: true })
  fs.writeFileSync(path.join(prefix, 'nginx.conf'), cfg)
  const child = spawn(platform.nginx, nginxArgs(prefix, ['-g', 'daemon off;']), { stdio: ['ignore', 'pipe', 'pipe'] })
  watchOutput(child)
  const handle = { pid: child.pid, prefix, child, stop: () => stopChild(child, { grace: 3000 }) }
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

// nginx as `pool config` writes it, in front of the HAProxy whose files are in `dir` (its
// haproxy-http.sock), under dir/nginx, on `port` or a free one; `options` go to nginxConfig.
// Resolves once /ping answers, with its port and URL.
async function startNginxInFront (t, dir, { platform, port, ...options } = {}) {
  const prefix = path.join(dir, 'nginx')
  fs.mkdirSync(prefix)
  port ??= (await freePorts(1))[0]
  const haproxySocket = path.join(dir, 'haproxy-http.sock')
  const cfg = nginxConfig({ prefix, host: '127.0.0.1', port, haproxySocket, ...options })
  const handle = await startNginx({ cfg, prefix, port, t, platform })
  return { ...handle, port, url: `http://127.0.0.1:${port}` }
}

module.exports = {
  HAPROXY,
  NGINX,
  IS_ROOT,
  NGINX_WORKER_USER,
  PLATFORMS,
  SYSTEM,
  platforms,
  onPlatforms,
  checkHaproxyConfig,
  checkNginxConfig,
  startHaproxy,
  startNginx,
  startNginxInFront
}
