'use strict'

// The pool's side of a worker process: load the app, listen on the slot's port, and report to
// the supervisor over the pool channel (lib/channel.js: ready, busy, idle, heartbeat). The worker only reports; the supervisor
// decides, because a worker whose event loop is blocked cannot decide anything.

const fs = require('node:fs')
const { pathToFileURL } = require('node:url')
const msg = require('../messages')
const channel = require('../channel')
const { createLogger } = require('../logger')
const { serializeRequests } = require('./serial')
const { isServable, toServer, unwrapDefault } = require('./servable')

// The runtime lives on globalThis so that an app requiring its own copy of `pool` (say, from its
// own node_modules) still finds the runtime that forked it.
const RUNTIME_KEY = Symbol.for('pool.worker.runtime')

class WorkerRuntime {
  constructor (env = process.env) {
    this.slot = Number(env.POOL_WORKER_ID)
    this.port = Number(env.PORT)
    this.host = env.POOL_WORKER_HOST || '127.0.0.1'
    this.heartbeatInterval = Number(env.POOL_HEARTBEAT_INTERVAL) || 1000
    // JSON lines, which the supervisor reading this worker's stdout passes on as they are or
    // renders readably (lib/app-output.js). Through process.stdout, the stream console.log
    // writes to: one queue, so a line of ours never lands inside one of the app's, and never
    // blocks this process when the pipe is full (a write to fd 1 directly would do both).
    this.logger = createLogger({
      level: env.POOL_LOG_LEVEL || 'info',
      format: 'json',
      base: { pid: process.pid, slot: this.slot, port: this.port },
      destination: process.stdout
    })
    this.server = null
    this.guard = null
    this.requests = 0
    this.stopping = false
    this.booted = false
    this.channel = null // the pool channel's worker end (null when not forked by a pool)
    this.onBootFailure = (err) => this.failBoot(err)
  }

  // Returns whether the message went out; `done` is called once it has (or could not).
  send (type, fields, done) {
    try {
      return channel.sendFrame(this.channel, msg.message(type, fields), done)
    } catch (err) { // a message too large for a frame: a bug of ours, not a reason to crash
      this.logger.error({ event: 'channel-send-failed', err }, err.message)
      return false
    }
  }

  install () {
    globalThis[RUNTIME_KEY] = this
    this.channel = channel.workerEnd()
    if (this.channel) {
      channel.readFrames(this.channel, {
        onMessage: (m) => { if (msg.isPoolMessage(m) && m.type === msg.STOP) this.stop() },
        onError: () => {} // the supervisor frames what it sends: nothing to do but ignore it
      })
      // No supervisor, no reason to live: never leave an orphan holding the port. The
      // channel closes when the supervisor's end does, however it died.
      this.channel.on('close', () => this.orphaned())
    }
    // Until the worker is ready, any throw is a failed boot the supervisor must hear about.
    process.on('uncaughtException', this.onBootFailure)
    process.on('unhandledRejection', this.onBootFailure)
    setInterval(() => this.send(msg.HEARTBEAT, { rss: process.memoryUsage.rss() }), this.heartbeatInterval).unref()
  }

  async boot (appPath) {
    this.install()
    let exported
    try {
      exported = await loadModule(appPath)
    } catch (err) {
      return this.failBoot(err)
    }
    if (this.server) return // form (c): the app called listen() while loading
    exported = unwrapDefault(exported)
    if (exported && typeof exported.then === 'function') exported = await exported
    if (this.server) return
    if (isServable(exported)) return this.serve(exported)
    // Form (c) with asynchronous set-up calls listen() later; the supervisor's boot timeout
    // bounds the wait, and this line tells the operator what the worker is waiting for.
    const hint = setTimeout(() => this.logger.warn({ event: 'waiting-for-listen' }, 'the app exported no request listener or server and has not called listen() yet'), 5000)
    hint.unref()
  }

  serve (target) {
    if (this.server) throw new Error('listen() was called twice in one worker')
    const server = toServer(target)
    this.server = server
    this.guard = serializeRequests(server, {
      onStart: (req) => this.send(msg.BUSY, { method: req.method, url: req.url.slice(0, msg.MAX_TEXT) }),
      onEnd: () => this.requestEnded(),
      onIdle: () => { if (this.stopping) setImmediate(() => this.exit()) },
      onQueued: (waiting) => {
        this.send(msg.QUEUED, { waiting })
        this.logger.warn({ event: 'request-queued', waiting }, `a request reached a busy worker; ${waiting} waiting in-process (one request at a time)`)
      }
    })
    // Outlive the balancer's idle keep-alive sockets so it rarely reuses one being closed.
    server.keepAliveTimeout = 65000
    server.headersTimeout = 66000
    server.once('error', (err) => { if (!this.booted) this.failBoot(err) })
    const reserved = reserveLowFds()
    server.listen({ port: this.port, host: this.host }, () => {
      releaseFds(reserved)
      this.becomeReady()
    })
    return server
  }

  becomeReady () {
    this.booted = true
    process.off('uncaughtException', this.onBootFailure)
    process.off('unhandledRejection', this.onBootFailure)
    this.send(msg.READY, { port: this.server.address().port })
  }

  requestEnded () {
    this.requests++
    this.send(msg.IDLE, { rss: process.memoryUsage.rss(), requests: this.requests })
  }

  failBoot (err) {
    const error = msg.serializeError(err)
    if (err && err.code === 'EADDRINUSE') error.message = `port ${this.port} (slot ${this.slot}) is already in use`
    const leave = () => afterOutput(() => process.exit(1))
    if (!this.send(msg.BOOT_ERROR, { error }, leave)) return leave()
    setTimeout(() => process.exit(1), 1000 + OUTPUT_WAIT).unref()
  }

  // Finish what is running and queued, then leave. New connections are refused from now on.
  stop () {
    if (this.stopping) return
    this.stopping = true
    if (!this.server) return this.exit()
    this.server.close()
    this.server.closeIdleConnections()
    if (!this.guard.busy && this.guard.waiting === 0) this.exit()
  }

  exit () {
    this.server?.closeAllConnections()
    afterOutput(() => process.exit(0))
  }

  // The supervisor died without stopping us (SIGKILL, say): take down the processes the app
  // started in this worker's process group too, as the supervisor would have. The group is
  // numbered by our pid, so while we run it can only be our own (or none, and kill fails).
  // The SIGTERM reaches this process too: caught, so that it still leaves through exit(), which
  // joins Node's threads before the process ends, rather than dying of the signal with its
  // port possibly still open for a moment after it shows as gone.
  orphaned () {
    process.on('SIGTERM', () => {})
    try { process.kill(-process.pid, 'SIGTERM') } catch { /* not a group leader: nothing of ours to stop */ }
    process.exit(0)
  }
}

// When a worker is SIGKILLed, the kernel releases its files last-opened-fd first. If the
// listening socket has a higher fd than the connection of the request dying with the worker, it
// is released first: the balancer's next connect is refused and redispatched at once, instead of
// being accepted into the backlog of a process that is already dead and failing after the
// request was sent. Holding a few low fds while the listener is created puts it above the
// connections accepted later. Measured with HAProxy (bench/haproxy-kill.js): 1.0 instead of
// 1.3 failed requests per kill.
const RESERVED_FDS = 16

function reserveLowFds () {
  const fds = []
  try {
    for (let i = 0; i < RESERVED_FDS; i++) fds.push(fs.openSync('/dev/null', 'r'))
  } catch { /* out of fds: the ordering is an optimisation, not a requirement */ }
  return fds
}

function releaseFds (fds) {
  for (const fd of fds) { try { fs.closeSync(fd) } catch {} }
}

// stdout and stderr are pipes to the supervisor, and a write the pipe cannot take at once waits
// in this process: process.exit() would drop it. Leave once both have written out what they
// hold, or after OUTPUT_WAIT ms if the supervisor is not reading (the pool is stopping anyway).
const OUTPUT_WAIT = 1000

function afterOutput (fn) {
  let left = 2
  const timer = setTimeout(fn, OUTPUT_WAIT)
  const once = () => { if (--left === 0) { clearTimeout(timer); fn() } }
  for (const stream of [process.stdout, process.stderr]) {
    if (stream.writableLength === 0 || stream.destroyed || !stream.writable) once()
    else stream.write('', once)
  }
}

async function loadModule (file) {
  try {
    return require(file)
  } catch (err) {
    if (err.code !== 'ERR_REQUIRE_ESM' && err.code !== 'ERR_REQUIRE_ASYNC_MODULE') throw err
    return import(pathToFileURL(file).href)
  }
}

function currentRuntime () {
  return globalThis[RUNTIME_KEY] || null
}

module.exports = { WorkerRuntime, currentRuntime }
