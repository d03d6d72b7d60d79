'use strict'

// Where a pool's control socket lives when `--control` is not given.
//
// The name carries the pool's "front port", so two pools on one host get two sockets:
// - embedded balancer: its `--port` (default 9001), the port clients use;
// - `--balancer none` and `--balancer haproxy`: the port of slot 1 (`--worker-port`, default
//   9002). The pool owns no front port then (HAProxy's listener belongs to HAProxy), but it
//   does own its worker ports, and two pools can never share slot 1's port, so the name is
//   unique among pools that can run at the same time.
// `pool status|reload|scale|stop --port P` computes the same name, so the operator passes the
// same port they passed to `pool start` (the worker port for none/haproxy).
//
// The directory is $XDG_RUNTIME_DIR when it is set and writable (per-user, 0700, cleaned at
// logout), else the OS temp dir. A client also looks in the other directory, because the pool
// and the operator's shell do not always share an environment (systemd units often have no
// XDG_RUNTIME_DIR).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

// sun_path is 108 bytes on Linux (104 on macOS) including the final NUL.
const MAX_SOCKET_PATH = process.platform === 'linux' ? 107 : 103

function frontPortOf ({ balancer, port, workerPort }) {
  return balancer === 'embedded' ? port : workerPort
}

function socketName (frontPort) {
  return `pool-${frontPort}.sock`
}

function usableDir (dir) {
  if (!dir || !path.isAbsolute(dir)) return false
  try {
    if (!fs.statSync(dir).isDirectory()) return false
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

// Directories to look in, preferred first.
function candidateDirs (env = process.env) {
  const dirs = []
  if (usableDir(env.XDG_RUNTIME_DIR)) dirs.push(path.resolve(env.XDG_RUNTIME_DIR))
  const tmp = path.resolve(os.tmpdir())
  if (!dirs.includes(tmp)) dirs.push(tmp)
  return dirs
}

// The path `pool start` binds when no --control is given.
function defaultControlPath (frontPort, env = process.env) {
  return path.join(candidateDirs(env)[0], socketName(frontPort))
}

// The path a client connects to: --control as given, else the first default that exists
// (else the preferred one, so the error names where the pool would be).
function clientControlPath ({ control, frontPort, env = process.env }) {
  if (control) return path.resolve(control)
  const candidates = candidateDirs(env).map((dir) => path.join(dir, socketName(frontPort)))
  return candidates.find((p) => fs.existsSync(p)) || candidates[0]
}

// Other pools' sockets in the default directories: named in "no pool is running" errors so an
// operator who forgot --port sees which ports have a pool.
function otherControlSockets (env = process.env) {
  const found = []
  for (const dir of candidateDirs(env)) {
    let names = []
    try { names = fs.readdirSync(dir) } catch { continue }
    for (const name of names) {
      const m = /^pool-(\d+)\.sock$/.exec(name)
      if (m) found.push({ path: path.join(dir, name), port: Number(m[1]) })
    }
  }
  return found
}

module.exports = { MAX_SOCKET_PATH, frontPortOf, socketName, candidateDirs, defaultControlPath, clientControlPath, otherControlSockets }
