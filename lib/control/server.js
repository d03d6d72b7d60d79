'use strict'

// The control socket a running pool answers on, claimed before any worker starts (a second `pool start`
// refuses before touching a port). Mode 0600 without a window: bound in a fresh 0700 directory, chmod-ed,
// then hard-linked to its name (link(2) fails if the name exists: one of two racing pools wins); dev/ino
// checked before unlinking it. Another user's socket is neither probed nor removed.

const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { poolError, codes } = require('../errors')
const { MAX_SOCKET_PATH, myUid, describeUser } = require('./path')
const { serializeError, parseRequest } = require('./protocol')
const { ControlConnection } = require('./connection')
const { sendCommand } = require('./client')
const { guardAccept } = require('../net/descriptors')

const PROBE_TIMEOUT = 2000 // ms a live pool has to answer `ping` before its socket counts as taken anyway
const CLOSE_GRACE = 4000 // ms close() waits for the commands in flight to be answered before it cuts them
// Open at once (each costs a descriptor); a deploy script may fan out to many.
const MAX_CONNECTIONS = 128

// A throw or a rejection becomes an error response.
const HANDLERS = {
  ping: (pool) => ({ pid: process.pid, phase: pool.phase }),
  status: (pool) => pool.status(),
  reload: (pool) => pool.reload(),
  scale: (pool, args) => pool.scale(args.workers),
  recycle: (pool, args) => pool.recycle(args.slot),
  stop: async (pool) => ({ ...(await pool.stop()), pid: process.pid })
}

class ControlServer {
  // `connection`: { idleTimeout, maxPending, maxLine } (./connection.js). `uid`: whose socket may be replaced.
  constructor ({ path: socketPath, pool, logger, maxConnections = MAX_CONNECTIONS, connection = {}, uid = myUid() }) {
    this.path = path.resolve(socketPath)
    this.uid = uid
    this.pool = pool
    this.logger = logger
    this.connectionLimits = connection
    // Half-open: `echo ... | socat` shuts its side and still gets a long reload's answer.
    this.server = net.createServer({ allowHalfOpen: true }, (socket) => this.onConnection(socket))
    this.server.maxConnections = maxConnections
    // Out of descriptors, refused rather than fatal; it may use the supervisor's own share.
    guardAccept(this.server,
      { name: 'control socket', logger, priority: true, onRefused: () => pool?.metrics?.failed('out_of_descriptors') })
    this.connections = new Set()
    this.owned = null // { dev, ino } of the file we linked, once claimed
    this.closing = null
    this.removeOnExit = () => this.unlinkIfOurs()
  }

  // Claims the path (refusing if a live pool has it, replacing a stale file) and listens.
  async listen () {
    checkPathLength(this.path)
    await this.ensureFree()
    const dir = makePrivateDir(this.path)
    const staging = path.join(dir, 's')
    try {
      await new Promise((resolve, reject) => {
        this.server.once('error', reject)
        this.server.listen(staging, () => { this.server.removeListener('error', reject); resolve() })
      })
      fs.chmodSync(staging, 0o600)
      await this.publish(staging)
    } catch (err) {
      await new Promise((resolve) => this.server.close(() => resolve()))
      throw err
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
    const st = fs.statSync(this.path)
    this.owned = { dev: st.dev, ino: st.ino }
    // An exit that skips close() (printError, a fatal error) still leaves no stale file.
    process.once('exit', this.removeOnExit)
    this.logger?.info({ event: 'control-listening', path: this.path }, `control socket ${this.path}`)
    return this
  }

  async publish (staging) {
    for (let attempt = 0; ; attempt++) {
      try {
        return fs.linkSync(staging, this.path)
      } catch (err) {
        // Another pool started between our check and our link: check again (it refuses if live).
        if (err.code === 'EEXIST' && attempt === 0) { await this.ensureFree(); continue }
        // A filesystem without hard links: the check above is the best we can do, then rename.
        if (err.code === 'EPERM' || err.code === 'ENOTSUP' || err.code === 'EOPNOTSUPP') {
          return fs.renameSync(staging, this.path)
        }
        throw claimError(this.path, err)
      }
    }
  }

  // Removes a socket nobody listens on (a SIGKILLed pool); refuses a live pool or what it cannot judge.
  async ensureFree () {
    let st
    try { st = fs.lstatSync(this.path) } catch (err) {
      if (err.code === 'ENOENT') return
      throw claimError(this.path, err)
    }
    if (!st.isSocket()) {
      throw poolError(codes.BAD_OPTION,
        `control socket path ${this.path} exists and is not a socket; refusing to replace it`)
    }
    if (st.uid !== this.uid) {
      throw poolError(codes.CONTROL_IN_USE,
        `control socket ${this.path} belongs to ${describeUser(st.uid)}; refusing to use or replace another user's ` +
          'socket: choose another --control path')
    }
    try {
      const { pid } = await sendCommand(this.path, 'ping', {}, { timeout: PROBE_TIMEOUT, uid: this.uid })
      throw poolError(codes.CONTROL_IN_USE, `another pool is running on control socket ${this.path} (pid ${pid})`)
    } catch (err) {
      if (err.code === codes.CONTROL_IN_USE) throw err
      const reason = err.details?.reason
      if (err.remote) throw poolError(codes.CONTROL_IN_USE, `another pool is running on control socket ${this.path}`)
      if (reason === 'missing') return
      if (reason === 'refused') {
        try { fs.unlinkSync(this.path) } catch (e) { if (e.code !== 'ENOENT') throw claimError(this.path, e) }
        this.logger?.info({ event: 'control-stale', path: this.path }, `removed a stale control socket ${this.path}`)
        return
      }
      if (reason === 'denied') {
        throw poolError(codes.CONTROL_IN_USE,
          `permission denied on control socket ${this.path}; refusing to replace it: choose another --control path`)
      }
      throw poolError(codes.CONTROL_IN_USE,
        `control socket ${this.path} is in use by a process that does not answer as a pool (${err.message})`)
    }
  }

  onConnection (socket) {
    const connection = new ControlConnection(socket, (line) => this.respond(line), this.connectionLimits)
    this.connections.add(connection)
    socket.on('close', () => this.connections.delete(connection))
  }

  // Never rejects: whatever the line holds becomes an error answer.
  respond (line) {
    let id = null
    return Promise.resolve()
      .then(() => {
        const req = parseRequest(line)
        id = req.id
        this.logCommand(req)
        if (typeof this.pool[req.command] !== 'function' && req.command !== 'ping') {
          throw poolError(codes.BAD_OPTION, `this pool does not support '${req.command}'`)
        }
        return HANDLERS[req.command](this.pool, req.args)
      })
      .then((result) => ({ id, ok: true, result }),
        (err) => ({ id: id ?? err.requestId ?? null, ok: false, error: serializeError(err) }))
  }

  logCommand ({ command, args }) {
    if (command === 'ping' || command === 'status') return
    // Only a plain number: the rest of `args` may be a megabyte of anything.
    const logged = command === 'scale' && typeof args.workers === 'number'
      ? { workers: args.workers }
      : command === 'recycle' && typeof args.slot === 'number' ? { slot: args.slot } : {}
    this.logger?.info({ event: 'control-command', command, args: logged }, `control: ${command}`)
  }

  // Removes the file, answers what is in flight (the `stop` that led here), then hangs up. Idempotent.
  close () {
    if (this.closing) return this.closing
    this.closing = (async () => {
      this.unlinkIfOurs()
      process.removeListener('exit', this.removeOnExit)
      const listening = new Promise((resolve) => this.server.close(() => resolve()))
      const hungUp = [...this.connections].map((c) => new Promise((resolve) => {
        c.socket.once('close', resolve)
        c.end()
      }))
      await withTimeout(Promise.all(hungUp), CLOSE_GRACE)
      for (const c of this.connections) c.socket.destroy()
      await listening
    })()
    return this.closing
  }

  unlinkIfOurs () {
    if (!this.owned) return
    try {
      const st = fs.lstatSync(this.path)
      if (st.dev === this.owned.dev && st.ino === this.owned.ino) fs.unlinkSync(this.path)
    } catch {}
    this.owned = null
  }
}

function checkPathLength (socketPath) {
  const bytes = Buffer.byteLength(socketPath)
  if (bytes > MAX_SOCKET_PATH) {
    throw poolError(codes.BAD_OPTION,
      `control socket path ${socketPath} is too long (${bytes} bytes; unix sockets allow ${MAX_SOCKET_PATH}); choose ` +
        'a shorter --control path')
  }
}

// A 0700 directory beside the final path (same filesystem, so link/rename work).
function makePrivateDir (socketPath) {
  try {
    return fs.mkdtempSync(path.join(path.dirname(socketPath), '.pool-'))
  } catch (err) {
    throw claimError(socketPath, err)
  }
}

function claimError (socketPath, err) {
  const dir = path.dirname(socketPath)
  const why = err.code === 'ENOENT'
    ? `directory ${dir} does not exist`
    : err.code === 'EACCES' || err.code === 'EPERM'
      ? `permission denied in ${dir}`
      : err.message
  return poolError(codes.BAD_OPTION, `cannot create control socket ${socketPath}: ${why}`, { cause: err })
}

function withTimeout (promise, ms) {
  let timer
  return Promise.race([promise, new Promise((resolve) => { timer = setTimeout(resolve, ms); timer.unref() })])
    .finally(() => clearTimeout(timer))
}

async function createControlServer (options) {
  return new ControlServer(options).listen()
}

module.exports = { ControlServer, createControlServer }
