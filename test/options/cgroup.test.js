'use strict'

// -n's default and the worker ceiling follow the cgroup's CPU quota when it is lower than the
// CPU count (lib/options/cgroup.js): cgroup v2 (cpu.max) and v1 (cpu.cfs_quota_us), the lowest
// quota from the process's cgroup up to its mount's root, rounded down, at least 1. On fake
// /proc and /sys trees, then for real: `pool start` in a cgroup of its own with a quota of 1 CPU.

const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { cgroupCpuQuota, cgroupMounts } = require('../../lib/options/cgroup')
const { BIN, FIXTURES, cleanEnv, freePorts, onJsonLines, waitFor, tempDir } = require('../helpers')

// A fake /proc/self (cgroup, mountinfo) and cgroup tree under a temp dir. `files`: path under the
// mount → content.
function fakeTree (t, { version, own, mountRoot = '/', files }) {
  const dir = tempDir(t, 'pool-cgroup-')
  const mount = path.join(dir, 'sys fs cgroup') // a space: mountinfo writes it \040
  fs.mkdirSync(path.join(dir, 'proc', 'self'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'proc', 'self', 'cgroup'),
    version === 2 ? `0::${own}\n` : `4:memory:/other\n3:cpu,cpuacct:${own}\n`)
  const type = version === 2 ? 'cgroup2 cgroup2 rw,nsdelegate' : 'cgroup cgroup rw,cpu,cpuacct'
  fs.writeFileSync(path.join(dir, 'proc', 'self', 'mountinfo'), [
    '23 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw',
    `31 23 0:28 ${mountRoot} ${mount.replace(/ /g, '\\040')} rw,relatime - ${type}`,
    ''
  ].join('\n'))
  for (const [file, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(mount, file)), { recursive: true })
    fs.writeFileSync(path.join(mount, file), content + '\n')
  }
  return path.join(dir, 'proc')
}

t.test('cgroup v2 cpu.max: the lowest quota up the tree, in whole CPUs, at least 1', async (t) => {
  const quota = (files, own = '/kubepods/pod1/c1') => cgroupCpuQuota({ proc: fakeTree(t, { version: 2, own, files }) })
  t.equal(quota({ 'kubepods/pod1/c1/cpu.max': '250000 100000', 'kubepods/pod1/cpu.max': 'max 100000' }), 2,
    '2.5 CPUs: 2 workers\' worth')
  t.equal(quota({ 'kubepods/pod1/c1/cpu.max': '400000 100000', 'kubepods/cpu.max': '150000 100000' }), 1,
    'a parent\'s lower quota bounds its children')
  t.equal(quota({ 'kubepods/pod1/c1/cpu.max': '20000 100000' }), 1, 'a fifth of a CPU is still one worker')
  t.equal(quota({ 'kubepods/pod1/c1/cpu.max': 'max 100000' }), null, 'max: no quota')
  t.equal(quota({}), null, 'no cpu.max files (the cpu controller is off): no quota')
  // In a container with its own cgroup namespace, its cgroup is '/' and is the mount itself.
  t.equal(quota({ 'cpu.max': '300000 100000' }, '/'), 3, 'a container\'s own view')
})

t.test('cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us', async (t) => {
  const quota = (files, options = {}) =>
    cgroupCpuQuota({ proc: fakeTree(t, { version: 1, own: '/docker/abc', files, ...options }) })
  t.equal(quota({ 'docker/abc/cpu.cfs_quota_us': '200000', 'docker/abc/cpu.cfs_period_us': '100000' }), 2)
  t.equal(quota({ 'docker/abc/cpu.cfs_quota_us': '-1', 'docker/abc/cpu.cfs_period_us': '100000' }), null,
    '-1: no quota')
  // Docker without a cgroup namespace: the mount's root is the container's own cgroup.
  t.equal(quota({ 'cpu.cfs_quota_us': '100000', 'cpu.cfs_period_us': '50000' }, { mountRoot: '/docker/abc' }), 2,
    'a mount rooted at the container\'s cgroup')
  t.equal(cgroupCpuQuota({ proc: path.join(os.tmpdir(), 'no-such-proc') }), null, 'nothing readable: no quota')
})

// Where a real cgroup with a CPU quota can be made here: { dir, set(cpus) }, or a reason not.
function realCgroup () {
  if (process.getuid?.() !== 0) return { problem: 'not root: cannot make a cgroup' }
  const mounts = cgroupMounts(fs.readFileSync('/proc/self/mountinfo', 'utf8'))
  const v1 = mounts.find((m) => m.version === 1 && m.controllers.includes('cpu'))
  const v2 = mounts.find((m) => m.version === 2 &&
    (readOr(path.join(m.mountPoint, 'cgroup.subtree_control')) ?? '').split(' ').includes('cpu'))
  const mount = v1 ?? v2
  if (!mount) return { problem: 'no cgroup with the cpu controller to make a child in' }
  const dir = path.join(mount.mountPoint, `pool-test-${process.pid}`)
  try { fs.mkdirSync(dir) } catch (err) { return { problem: `cannot make ${dir}: ${err.code}` } }
  const set = (cpus) => v1
    ? fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(cpus * 100000))
    : fs.writeFileSync(path.join(dir, 'cpu.max'), `${cpus * 100000} 100000`)
  return { dir, set, version: v1 ? 1 : 2 }
}

function readOr (file) { try { return fs.readFileSync(file, 'utf8').trim() } catch { return null } }

t.test('pool start in a cgroup with a quota of 1 CPU: one worker by default, a ceiling of 8', async (t) => {
  const online = os.availableParallelism()
  if (online < 2) return t.skip(`this machine has ${online} CPU: a quota of 1 would change nothing`)
  const cgroup = realCgroup()
  if (cgroup.problem) return t.skip(cgroup.problem)
  t.teardown(() => waitFor(() => { try { fs.rmdirSync(cgroup.dir); return true } catch { return false } },
    { what: 'the test cgroup to empty' }))
  cgroup.set(1)
  const inCgroup = (args) => ['/bin/sh',
    ['-c', `echo $$ > ${cgroup.dir}/cgroup.procs && exec "$@"`, 'sh', process.execPath, BIN, ...args]]
  const env = cleanEnv()
  delete env.WEB_CONCURRENCY
  const [port, workerPort] = await freePorts(10)
  const child = spawn(...inCgroup(['start', path.join(FIXTURES, 'handler.js'), '--port', String(port), '--worker-port',
    String(workerPort), '--stats-port', '0', '--log-format', 'json', '--control',
    path.join(os.tmpdir(), `pool-cgroup-${process.pid}.sock`)]), { env, stdio: ['ignore', 'pipe', 'pipe'] })
  const logs = []
  onJsonLines(child.stdout, (l) => logs.push(l))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const starting = await waitFor(() => logs.find((l) => l.event === 'starting'), { what: 'the pool to start' })
  t.equal(starting.workers, 1,
    `-n's default: 1 worker in a cgroup of 1 CPU (cgroup v${cgroup.version}), on a machine of ${online}`)
  await waitFor(() => logs.find((l) => l.event === 'started'), { what: 'the worker to be ready' })
  child.kill('SIGTERM')
  t.equal(await exited, 0)

  // The ceiling: 8 × 1 CPU, refused above it before anything starts.
  const over = await new Promise((resolve) => {
    const c = spawn(...inCgroup(['start', path.join(FIXTURES, 'handler.js'), '-n', '9', '--port', String(port),
      '--worker-port', String(workerPort), '--stats-port', '0']), { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    c.stderr.on('data', (d) => { stderr += d })
    c.once('exit', (code) => resolve({ code, stderr }))
  })
  t.equal(over.code, 2, '-n 9 is refused')
  t.match(over.stderr, /above the default ceiling of 8 \(min\(8 × 1 CPUs/, `one line saying why: ${over.stderr.trim()}`)
})
