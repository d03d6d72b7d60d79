'use strict'

// Where a pool's control socket lives when `--control` is not given, and who may be trusted
// there.
//
// The name carries the pool's "front port", so two pools on one host get two sockets:
// - a front that listens for clients itself (the embedded balancer): its `--port` (default
//   9001), the port clients use;
// - any other (none, HAProxy): the port of slot 1 (`--worker-port`, default 9002). The pool
//   owns no front port then (HAProxy's listener belongs to HAProxy), but it does own its
//   worker ports, and two pools can never share slot 1's port, so the name is unique among
//   pools that can run at the same time.
// `pool status|reload|scale|stop --port P` computes the same name, so the operator passes the
// same port they passed to `pool start` (the worker port for none/haproxy).
//
// The directory must be one no other user can write to: in a shared one (/tmp) another user
// could plant a socket first, and `pool start` would refuse to start while `pool stop` talked
// to the impostor. So it is $XDG_RUNTIME_DIR when that is set and private (per-user by spec,
// checked anyway), else our own directory in the temp dir, TMP/pool-UID, mode 0700, made by
// `pool start` and refused if it exists but is not ours alone (the way tmux keeps
// /tmp/tmux-UID). A client looks in both, because the pool and the operator's shell do not
// always share an environment (systemd units often have no XDG_RUNTIME_DIR).
//
// The same rule holds for root: a socket or directory owned by another user is not trusted,
// since that user's process could answer anything.
//
// "Our" uid is process.geteuid() unless a caller passes `uid`: the checks take it as an
// argument so that a test can make a file it owns count as another user's, without root.

const fs = require('node:fs')
const path = require('node:path')
const { poolError, codes } = require('../errors')

// sun_path is 108 bytes on Linux (104 on macOS) including the final NUL.
const MAX_SOCKET_PATH = process.platform === 'linux' ? 107 : 103

// `listener`: where the pool's front listens for clients ({ port }), or null.
function frontPortOf ({ listener, workerPort }) {
  return listener ? listener.port : workerPort
}

function socketName (frontPort) {
  return `pool-${frontPort}.sock`
}

function myUid () {
  return process.geteuid()
}

// The name /etc/passwd gives `uid`, or null.
function userName (uid) {
  try {
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const [name, , id] = line.split(':')
      if (name && id !== '' && Number(id) === uid) return name
    }
  } catch {}
  return null
}

// "user nobody (uid 65534)", or "uid 1234" for a uid without a name.
function describeUser (uid) {
  const name = userName(uid)
  return name ? `user ${name} (uid ${uid})` : `uid ${uid}`
}

// os.tmpdir()'s rule on POSIX, read from `env` so that a caller (a test) can pass its own.
function tempRoot (env) {
  return path.resolve(env.TMPDIR || env.TMP || env.TEMP || '/tmp')
}

function privateTempDir (env, uid = myUid()) {
  return path.join(tempRoot(env), `pool-${uid}`)
}

// $XDG_RUNTIME_DIR, resolved, when it is set, ours, and writable by nobody else; else null
// (then the private temp dir is used: a session without a proper runtime dir is common).
function runtimeDir (env, uid = myUid()) {
  const dir = env.XDG_RUNTIME_DIR
  if (!dir || !path.isAbsolute(dir)) return null
  try {
    const st = fs.statSync(dir)
    if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) return null
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK)
    return path.resolve(dir)
  } catch {
    return null
  }
}

// What is wrong with `dir` as our private directory (a phrase to follow its name), or null
// when it is a real directory, ours, with no permission for group or others. lstat: a
// symlink planted in the temp dir must not lead us elsewhere.
function privateDirProblem (dir, uid = myUid()) {
  const st = fs.lstatSync(dir)
  if (st.isSymbolicLink()) return 'is a symbolic link'
  if (!st.isDirectory()) return 'is not a directory'
  if (st.uid !== uid) return `is owned by ${describeUser(st.uid)}, not by ${describeUser(uid)}`
  if ((st.mode & 0o077) !== 0) {
    return `has mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}: group or others may use it (it must be 0700)`
  }
  return null
}

function badDirError (dir, problem) {
  return poolError(codes.BAD_OPTION,
    `control socket directory ${dir} ${problem}; refusing to use it (remove it, or pass --control PATH)`)
}

// true when `dir` is our private directory, false when it does not exist; throws when it
// exists and is not private.
function checkPrivateDir (dir, uid = myUid()) {
  let problem
  try { problem = privateDirProblem(dir, uid) } catch (err) {
    if (err.code === 'ENOENT') return false
    throw poolError(codes.BAD_OPTION, `cannot check control socket directory ${dir}: ${err.message}`, { cause: err })
  }
  if (problem) throw badDirError(dir, problem)
  return true
}

// The private temp dir, made 0700 if missing (chmod as well: the umask may have taken bits
// the owner needs), checked if it was there.
function ensurePrivateDir (dir, uid = myUid()) {
  try {
    fs.mkdirSync(dir, { mode: 0o700 })
    fs.chmodSync(dir, 0o700)
  } catch (err) {
    if (err.code !== 'EEXIST') {
      throw poolError(codes.BAD_OPTION, `cannot create control socket directory ${dir}: ${err.message}`, { cause: err })
    }
  }
  checkPrivateDir(dir, uid)
  return dir
}

// The path `pool start` binds when no --control is given.
function defaultControlPath (frontPort, env = process.env, uid = myUid()) {
  const dir = runtimeDir(env, uid) ?? ensurePrivateDir(privateTempDir(env, uid), uid)
  return path.join(dir, socketName(frontPort))
}

// The path a client connects to: --control as given, else the first default that exists
// (else the preferred one, so the error names where the pool would be).
function clientControlPath ({ control, frontPort, env = process.env, uid = myUid() }) {
  if (control) return path.resolve(control)
  const runtime = runtimeDir(env, uid)
  const inRuntime = runtime && path.join(runtime, socketName(frontPort))
  if (inRuntime && fs.existsSync(inRuntime)) return inRuntime
  const temp = privateTempDir(env, uid)
  const inTemp = path.join(temp, socketName(frontPort))
  if (checkPrivateDir(temp, uid) && fs.existsSync(inTemp)) return inTemp
  return inRuntime || inTemp
}

// The uid owning the file at `socketPath` (the socket itself: connect follows symlinks), or
// null when it cannot be known (no file, no access: connecting then fails and says why).
function ownerOf (socketPath) {
  try {
    return fs.statSync(socketPath).uid
  } catch {
    return null
  }
}

// Our pools' sockets in the default directories: named in "no pool is running" errors so an
// operator who forgot --port sees which ports have a pool. A temp dir that is not private is
// skipped (the command itself reports it), and so is another user's socket.
function otherControlSockets (env = process.env) {
  const temp = privateTempDir(env)
  const dirs = [runtimeDir(env), isPrivateDir(temp) ? temp : null].filter(Boolean)
  const found = []
  for (const dir of dirs) {
    let names = []
    try { names = fs.readdirSync(dir) } catch { continue }
    for (const name of names) {
      const m = /^pool-(\d+)\.sock$/.exec(name)
      const file = path.join(dir, name)
      if (m && isOurSocket(file)) found.push({ path: file, port: Number(m[1]) })
    }
  }
  return found
}

function isPrivateDir (dir) {
  try {
    return privateDirProblem(dir) === null
  } catch {
    return false
  }
}

function isOurSocket (file) {
  try {
    const st = fs.lstatSync(file)
    return st.isSocket() && st.uid === myUid()
  } catch {
    return false
  }
}

module.exports = {
  MAX_SOCKET_PATH,
  frontPortOf,
  socketName,
  userName,
  describeUser,
  myUid,
  privateTempDir,
  defaultControlPath,
  clientControlPath,
  ownerOf,
  otherControlSockets
}
