'use strict'

// How many CPUs this process's cgroup may use, from its CPU quota: what a container's `--cpus`,
// a Kubernetes CPU limit or a systemd unit's CPUQuota= set. Node 20's availableParallelism()
// counts the CPUs the process may run on, not the time it may have on them, so a container
// limited to 2 CPUs on a 64-core host would get 64 workers, each throttled in turn.
//
// cgroup v2: cpu.max ("max 100000", or "QUOTA PERIOD" in µs); v1: cpu.cfs_quota_us (-1: none)
// over cpu.cfs_period_us. Every cgroup from the process's own up to the root of its mount can
// hold one and each bounds what is below it, so the lowest counts. QUOTA ÷ PERIOD is rounded
// down, at least 1 (as Rust's standard library and newer libuv do): a worker per whole CPU, and a
// fraction of one is not enough for another render. null: no quota anywhere (or no cgroup
// readable, as on macOS).

const fs = require('node:fs')
const path = require('node:path')

// Each line of /proc/self/cgroup: "ID:CONTROLLERS:PATH" (v2: "0::PATH").
function ownCgroups (text) {
  return text.split('\n').filter(Boolean).map((line) => {
    const [id, controllers, ...rest] = line.split(':')
    return { id, controllers: controllers ? controllers.split(',') : [], path: rest.join(':') }
  })
}

// The cgroup mounts of /proc/self/mountinfo: { root, mountPoint, version, controllers }.
function cgroupMounts (text) {
  const mounts = []
  for (const line of text.split('\n')) {
    const [before, after] = line.split(' - ')
    if (!after) continue
    const fields = before.split(' ')
    const [type, , superOptions = ''] = after.split(' ')
    if (type !== 'cgroup' && type !== 'cgroup2') continue
    mounts.push({
      root: unescape(fields[3]),
      mountPoint: unescape(fields[4]),
      version: type === 'cgroup2' ? 2 : 1,
      controllers: superOptions.split(',')
    })
  }
  return mounts
}

// mountinfo writes a space in a path as \040, and so on.
function unescape (field) {
  return field.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8)))
}

// The directories of the cgroup at `cgroupPath`, from its own up to the mount's root.
function directories (mount, cgroupPath) {
  const relative = path.posix.relative(mount.root, cgroupPath)
  if (relative.startsWith('..')) return [] // not under this mount (another namespace's view)
  const dirs = []
  let dir = path.join(mount.mountPoint, relative)
  for (;;) {
    dirs.push(dir)
    if (dir === mount.mountPoint || dir === path.dirname(dir)) return dirs
    dir = path.dirname(dir)
  }
}

function read (file) {
  try { return fs.readFileSync(file, 'utf8').trim() } catch { return null }
}

// The quota of one cgroup directory in CPUs (a fraction), or null.
function quotaIn (dir, version) {
  if (version === 2) {
    const [quota, period] = (read(path.join(dir, 'cpu.max')) ?? 'max').split(/\s+/)
    return quota === 'max' ? null : ratio(quota, period)
  }
  const quota = read(path.join(dir, 'cpu.cfs_quota_us'))
  if (quota === null || Number(quota) < 0) return null
  return ratio(quota, read(path.join(dir, 'cpu.cfs_period_us')))
}

function ratio (quota, period) {
  const q = Number(quota)
  const p = Number(period)
  return q > 0 && p > 0 ? q / p : null
}

// Whole CPUs the cgroup quota allows (at least 1), or null. `proc`: where to read
// self/cgroup and self/mountinfo (tests give a fake tree).
function cgroupCpuQuota ({ proc = '/proc' } = {}) {
  const cgroups = read(path.join(proc, 'self', 'cgroup'))
  const mountinfo = read(path.join(proc, 'self', 'mountinfo'))
  if (cgroups === null || mountinfo === null) return null
  let lowest = null
  for (const mount of cgroupMounts(mountinfo)) {
    const own = mount.version === 2
      ? ownCgroups(cgroups).find((c) => c.id === '0' && c.controllers.length === 0)
      : ownCgroups(cgroups).find((c) => c.controllers.includes('cpu') && mount.controllers.includes('cpu'))
    if (!own) continue
    for (const dir of directories(mount, own.path)) {
      const cpus = quotaIn(dir, mount.version)
      if (cpus !== null && (lowest === null || cpus < lowest)) lowest = cpus
    }
  }
  return lowest === null ? null : Math.max(1, Math.floor(lowest))
}

module.exports = { cgroupCpuQuota, cgroupMounts }
