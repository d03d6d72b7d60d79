'use strict'

// Where the control socket lives without `--control`, and who is trusted there. Its name carries the front
// port (the balancer's --port, else slot 1's --worker-port), unique among running pools; clients compute it
// from the same --port. The directory must be writable by us alone (in /tmp another user could plant an
// impostor): a private $XDG_RUNTIME_DIR, else TMP/pool-UID, 0700, as tmux does. Clients look in both (systemd
// units often lack XDG_RUNTIME_DIR). Another user's socket or directory is never trusted, even by root.
// `uid` parameters let a test make its own file count as another user's.

const fs = require('node:fs')
const path = require('node:path')
const { poolError, codes } = require('../errors')

// sun_path is 108 bytes on Linux (104 on macOS) including the final NUL.
const MAX_SOCKET_PATH = process.platform === 'linux' ? 107 : 103

function frontPortOf ({ listener, workerPort }) {
  return listener ? listener.port : workerPort
}

function socketName (frontPort) {
  return `pool-${frontPort}.sock`
}

function myUid () {
  return process.geteuid()
}

function userName (uid) {
  try {
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const [name, , id] = line.split(':')
      if (name && id !== '' && Number(id) === uid) return name
    }
  } catch {}
  return null
}

// "user nobody (uid 65534)", or "uid 1234".
function describeUser (uid) {
  const name = userName(uid)
  return name ? `user ${name} (uid ${uid})` : `uid ${uid}`
}

// os.tmpdir()'s rule on POSIX, from a given `env`.
function tempRoot (env) {
  return path.resolve(env.TMPDIR || env.TMP || env.TEMP || '/tmp')
}

function privateTempDir (env, uid = myUid()) {
  return path.join(tempRoot(env), `pool-${uid}`)
}

// $XDG_RUNTIME_DIR when set, ours, and writable by nobody else; else null.
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

// What is wrong with `dir` as our private directory (a phrase after its name), or null. lstat: a planted
// symlink must not lead us elsewhere.
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

// false when `dir` does not exist; throws when it is not private.
function checkPrivateDir (dir, uid = myUid()) {
  let problem
  try { problem = privateDirProblem(dir, uid) } catch (err) {
    if (err.code === 'ENOENT') return false
    throw poolError(codes.BAD_OPTION, `cannot check control socket directory ${dir}: ${err.message}`, { cause: err })
  }
  if (problem) throw badDirError(dir, problem)
  return true
}

// Made 0700 if missing (chmod too: the umask may take bits), checked either way.
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

function defaultControlPath (frontPort, env = process.env, uid = myUid()) {
  const dir = runtimeDir(env, uid) ?? ensurePrivateDir(privateTempDir(env, uid), uid)
  return path.join(dir, socketName(frontPort))
}

// --control, else the first default that exists, else the preferred one (for the error to name).
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

// stat, not lstat: connect follows symlinks. Null when unknown (connecting then says why).
function ownerOf (socketPath) {
  try {
    return fs.statSync(socketPath).uid
  } catch {
    return null
  }
}

// Our sockets in the default directories, for "no pool is running" errors to name their ports; a
// non-private temp dir and another user's socket are skipped.
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
