'use strict'

// The pool's side of a worker process: load the app, listen on the slot's port, and report to
// the supervisor over the pool channel (lib/protocol/channel.js: ready, busy, idle, heartbeat, a
// listener that closed). The worker only reports; the supervisor decides, because a worker whose
// event loop is blocked cannot decide anything.

const fs = require('node:fs')
const net = require('node:net')
const { pathToFileURL } = require('node:url')
const msg = require('../protocol/messages')
const channel = require('../protocol/channel')
const { serializeRequests } = require('./serial')
const { isServable, isThenable, servingOf, unwrapDefault, noListenError, protocolOf, unservableError, appError } = require('./servable')
const { interceptListen, requestedPort } = require('./adopt')
const { endAppProcesses, signalAppProcesses } = require('./app-processes')

// The runtime lives on globalThis so that an app requiring its own copy of `pool` (say, from its
// own node_modules) still finds the runtime that forked it.
const RUNTIME_KEY = Symbol.for('pool.worker.runtime')

// The pool's variables that only the runtime reads, all read by the time it installs: removed
// from the environment then, so that no process the app starts inherits them. A child told
// POOL_CHANNEL_FD would take its own fd 3, whatever that is there (Node's cluster channel, in a
// cluster worker), for the pool channel. PORT, POOL_WORKER_ID and POOL_WORKERS are the app's.
// POOL_SUPERVISOR stays: the app's processes inherit it, which is how a later pool finds what
// this one left running (lib/supervisor/leftovers.js).
const RUNTIME_ENV = [channel.CHANNEL_ENV, 'POOL_APP', 'POOL_WORKER_HOST', 'POOL_LOG_LEVEL', 'POOL_HEARTBEAT_INTERVAL', 'POOL_KILL_TIMEOUT']

class WorkerRuntime {
  constructor (env = process.env) {
    this.slot = Number(env.POOL_WORKER_ID)
    this.workers = Number(env.POOL_WORKERS)
    this.port = Number(env.PORT)
    this.host = env.POOL_WORKER_HOST || '127.0.0.1'
    this.heartbeatInterval = Number(env.POOL_HEARTBEAT_INTERVAL) || 1000
    // Who forked this worker ("pid:start time"), and how long the app's processes get between
    // SIGTERM and SIGKILL (the pool's --kill-timeout).
    this.supervisorPid = Number(String(env.POOL_SUPERVISOR || '').split(':')[0]) || null
    this.killTimeout = Number(env.POOL_KILL_TIMEOUT) || 5000
    this.logLevel = env.POOL_LOG_LEVEL || 'info'
    this.log = null // made when first needed (the logger)
    this.server = null // the server on the slot's port, once the runtime has taken it
    this.preparing = null // an app's server while the app gets ready to serve (Fastify's ready())
    this.otherPorts = new Set() // ports the app listened on that are not the slot's: the waiting hint names them
    this.listen = net.Server.prototype.listen // the original, once interceptListen has replaced it
    this.guard = null
    this.requests = 0
    this.stopping = false
    this.booted = false
    this.failed = false
    this.channel = null // the pool channel's worker end (null when not forked by a pool)
    this.listenerReported = false // told the supervisor that the server no longer listens
    this.onBootFailure = (err) => this.failBoot(err)
    this.exiting = false
  }

  // JSON lines, which the supervisor reading this worker's stdout passes on as they are or
  // renders readably (lib/supervisor/app-output.js). Through process.stdout, the stream
  // console.log writes to: one queue, so a line of ours never lands inside one of the app's, and
  // never blocks this process when the pipe is full (a write to fd 1 directly would do both).
  // Made, and pino loaded, at the first line: most workers never write one, and pino would cost
  // each some 7 MB.
  get logger () {
    this.log ??= require('../logger').createLogger({
      level: this.logLevel,
      format: 'json',
      base: { pid: process.pid, slot: this.slot, port: this.port },
      destination: process.stdout
    })
    return this.log
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
      // The channel closes when the supervisor's end does, however it died. No supervisor, no
      // reason to live; a worker whose loop is stuck for good cannot hear it, and the pool's
      // reaper ends it (lib/supervisor/reaper.js).
      this.channel.on('close', () => this.orphaned())
    }
    for (const name of RUNTIME_ENV) delete process.env[name]
    this.forbidCluster()
    // Leaving in a hurry (a crash, the app's own process.exit()): the app's processes get SIGTERM
    // on the way out, and the supervisor SIGKILLs what ignores it
    // (lib/supervisor/process-group.js); with the supervisor gone: SIGKILL at once.
    process.on('exit', () => signalAppProcesses(this.supervisorGone() ? 'SIGKILL' : 'SIGTERM'))
    // stdout and stderr are pipes the supervisor reads: a write failing there (EPIPE) means it is
    // gone. Thrown, that error would end this worker on the spot, in the middle of ending the
    // app's processes, and leave one that ignores SIGTERM running.
    for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})
    // Until the worker is ready, any throw is a failed boot the supervisor must hear about.
    process.on('uncaughtException', this.onBootFailure)
    process.on('unhandledRejection', this.onBootFailure)
    // Each heartbeat wakes this process: every --heartbeat-interval, and only for a supervisor.
    if (this.channel) {
      setInterval(() => {
        this.checkListener()
        this.send(msg.HEARTBEAT, { rss: process.memoryUsage.rss() })
      }, this.heartbeatInterval).unref()
    }
    this.listen = interceptListen({
      decide: (server, args) => this.decideListen(server, args),
      adopt: (server, callback) => this.adopt(server, callback)
    })
  }

  // cluster.fork() would fork this worker's bootstrap (process.argv[1]) again, a process the
  // supervisor never hears from, and the worker would wait for a listen() that never comes. The
  // pool is the cluster: the app says so at once, in its boot failure, or as a throw once ready.
  forbidCluster () {
    const cluster = require('node:cluster')
    cluster.fork = () => {
      const err = appError(`the app uses cluster (cluster.fork()), and pool already runs ${this.workers || 'N'} single-request worker${this.workers === 1 ? '' : 's'}, one process each: drop cluster.fork() and serve from this process (pool start -n sets how many)`)
      if (!this.booted) this.failBoot(err)
      throw err
    }
  }

  // Whether the worker has its server, or is getting one ready.
  get claimed () { return this.server !== null || this.preparing !== null }

  async boot (appPath) {
    this.install()
    let exported
    try {
      if (this.port === 0) await this.pickPort()
      exported = await loadModule(appPath)
    } catch (err) {
      return this.failBoot(err)
    }
    if (this.claimed) return // the app listened while loading: through pool's listen(), or on PORT itself
    let app = unwrapDefault(exported)
    if (!isServable(app) && isThenable(app)) app = unwrapDefault(await app) // a promise of an app
    if (this.claimed) return
    if (isServable(app)) return this.serve(app)
    this.awaitListen(app)
  }

  // A reload's canary has no slot and is forked with PORT=0. It takes a free port of its own, so
  // that an app reading PORT (`parseInt(process.env.PORT) || 3000`, as Next's standalone server
  // does) listens where the runtime adopts it, not on its default.
  async pickPort () {
    const probe = net.createServer()
    await new Promise((resolve, reject) => {
      probe.once('error', reject)
      this.listen.call(probe, { port: 0, host: this.host }, resolve)
    })
    this.port = probe.address().port
    await new Promise((resolve) => probe.close(resolve))
    process.env.PORT = String(this.port)
  }

  // The module exported nothing to serve: the app may still listen, through pool's listen() or
  // on PORT itself, after asynchronous set-up (Next's prepare(), hapi's start()). The worker
  // waits as long as the app has work in progress, bounded by the supervisor's boot timeout.
  // Once its event loop is empty (the pool channel does not count), no listen() can come any
  // more: the boot fails at once, saying what the module exported.
  awaitListen (app) {
    this.channel?.unref()
    process.on('beforeExit', () => {
      if (this.claimed) return
      this.channel?.ref()
      this.failBoot(noListenError(app))
    })
    const hint = setTimeout(() => this.hintWaiting(), 5000)
    hint.unref()
  }

  hintWaiting () {
    if (this.claimed) return
    const ports = [...this.otherPorts]
    const message = ports.length > 0
      ? `the app listens on port ${ports.join(', ')}, not on PORT (${this.port}): listen on process.env.PORT, or export the app`
      : 'the app exported no request listener or server and has not called listen() yet'
    this.logger.warn({ event: 'waiting-for-listen', ports }, message)
  }

  // Every listen() in the worker asks here first (adopt.js). The first server to listen on the
  // slot's port is the app's: the runtime takes it over (adopt() fails the boot if it is no
  // HTTP/1.1 server). Once it has one, the port is the pool's: another server asking for it
  // gets EADDRINUSE, even on another address (Fastify's second binding of `localhost`, on ::1),
  // so that none serves beside the one-request guard.
  decideListen (server, args) {
    const port = requestedPort(args)
    if (port !== this.port) {
      if (port) this.otherPorts.add(port)
      this.guardPassed(server)
      return 'pass'
    }
    if (server === this.server) return 'pass' // a second listen() of the same server: Node's own error
    if (this.server !== null) return 'refuse'
    if (protocolOf(server) === 'tcp') {
      this.failUnlessProbe(server)
      return 'pass'
    }
    return 'adopt'
  }

  // Whatever an app listens with that is not a TCP listen on PORT (a handle, a file descriptor)
  // must still not end up serving on the slot's port beside the one-request guard: such a server
  // is closed as it starts listening, and the boot fails saying why.
  guardPassed (server) {
    server.once('listening', () => {
      const address = server.address()
      if (server === this.server || address === null || typeof address !== 'object' || address.port !== this.port) return
      server.close()
      const err = appError(`the app listens on the slot's port (${this.port}) through a handle or a file descriptor (listen(handle), listen({ fd })), which the pool cannot take over to serve one request at a time: listen on process.env.PORT as a port, or export the app`)
      if (this.booted) this.logger.error({ event: 'unguarded-listener', err }, err.message)
      else this.failBoot(err)
    })
  }

  // A port probe (get-port, detect-port) checks that PORT is free with a net.Server it closes in
  // its listening callback: it may. One still listening once its callbacks have run is the app's
  // server, and speaks no HTTP: the boot fails at once rather than at --boot-timeout.
  failUnlessProbe (server) {
    server.once('listening', () => setImmediate(() => {
      if (server.listening) this.failBoot(unservableError(server, this.port))
    }))
  }

  // An app handed over by the module's export or pool's listen(): its server, listened with as
  // soon as the app is ready to serve.
  serve (target) {
    if (this.claimed) throw new Error('listen() was called twice in one worker, or after the app listened on PORT itself')
    const { server, prepare } = servingOf(target)
    if (!prepare) return this.adopt(server)
    this.preparing = server
    new Promise((resolve) => resolve(prepare())).then(() => {
      this.preparing = null
      // The app may have listened on PORT itself meanwhile: then that server is the one.
      if (this.server === null) this.adopt(server)
    }, (err) => this.failBoot(err))
    return server
  }

  // Take `server` over and listen with it on the slot's port and host, whoever asked: the
  // one-request guard, the timeouts the balancer needs, low fds, ready. `callback` is the app's
  // own listen() callback, called once it listens, before the supervisor hears of it.
  adopt (server, callback = null) {
    const unservable = unservableError(server, this.port)
    if (unservable) {
      this.failBoot(unservable)
      return server
    }
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
    server.on('error', (err) => this.booted ? this.reportListenerClosed(err) : this.failBoot(err))
    this.watchListener(server)
    this.channel?.ref() // awaitListen let go of it; from now on the server keeps the worker alive anyway
    const reserved = reserveLowFds()
    server.once('listening', () => releaseFds(reserved))
    const args = [{ port: this.port, host: this.host }]
    if (callback) args.push(callback)
    this.listen.apply(server, args)
    server.once('listening', () => this.becomeReady())
    return server
  }

  // After ready, a server that no longer listens leaves a worker that heartbeats, looks ready,
  // and refuses every connection: the supervisor must hear of it, and replaces the worker. Node
  // emits 'close' only once every open connection has ended (the balancer keeps some alive for
  // a minute), while the port refuses connections from the moment close() is called: so close()
  // itself is watched, and each heartbeat checks `listening`, for a close that went round it.
  watchListener (server) {
    const close = server.close
    const runtime = this
    server.close = function (...args) {
      const result = close.apply(this, args)
      runtime.checkListener()
      return result
    }
    server.on('close', () => this.checkListener())
  }

  checkListener () {
    if (this.booted && this.server && !this.server.listening) this.reportListenerClosed()
  }

  // The server closed (`err` absent), or failed: an error after listening is an accept that
  // failed (out of file descriptors: a worker that serves one request at a time holds few, so
  // its app leaks them), or one the app emitted. Either way the worker is replaced rather than
  // left to refuse connections; handled here, so it is not thrown as an unhandled 'error'. Said
  // once; the runtime's own close on a stop says nothing.
  reportListenerClosed (err) {
    if (this.stopping || this.listenerReported) return
    this.listenerReported = true
    this.send(msg.LISTENER_CLOSED, err ? { error: msg.serializeError(err) } : {})
  }

  // Until the supervisor has been told, a throw (in the app's listen() callback, say) is still a
  // failed boot, reported with its stack, not a crash the supervisor hears nothing about.
  becomeReady () {
    const { port } = this.server.address()
    this.booted = true
    process.off('uncaughtException', this.onBootFailure)
    process.off('unhandledRejection', this.onBootFailure)
    this.send(msg.READY, { port })
  }

  requestEnded () {
    this.requests++
    this.send(msg.IDLE, { rss: process.memoryUsage.rss(), requests: this.requests })
  }

  failBoot (err) {
    if (this.failed) return
    this.failed = true
    const error = msg.serializeError(err)
    if (err && err.code === 'EADDRINUSE') error.message = this.portInUse(err)
    const leave = () => afterOutput(() => process.exit(1))
    if (!this.send(msg.BOOT_ERROR, { error }, leave)) return leave()
    setTimeout(() => process.exit(1), 1000 + OUTPUT_WAIT).unref()
  }

  // The slot's port, or one the app chose itself: a fixed port, say, which only one worker can have.
  portInUse (err) {
    if (err.port === undefined || err.port === this.port) return `port ${this.port} (slot ${this.slot}) is already in use`
    return `port ${err.port} is already in use (the app listens on it itself, not on PORT, ${this.port})`
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

  // The drain is over. The app's processes go first, and the worker exits once they are gone:
  // left to the supervisor, they would outlive it if it died meanwhile.
  async exit () {
    if (this.exiting) return
    this.exiting = true
    this.server?.closeAllConnections()
    const { terminated, killed } = await endAppProcesses({ grace: this.killTimeout }).catch(() => ({ terminated: [], killed: [] }))
    if (terminated.length > 0) this.logger.info({ event: 'leftovers', processes: terminated }, `${processes(terminated.length)} the app started still ran as the worker left; SIGTERM`)
    if (killed.length > 0) this.logger.warn({ event: 'leftovers-killed', processes: killed }, `${processes(killed.length)} the app started still ran ${this.killTimeout} ms after SIGTERM; SIGKILL`)
    afterOutput(() => process.exit(0))
  }

  // The process that forked this worker is no longer its parent (a pool forked it).
  supervisorGone () {
    return this.supervisorPid !== null && process.ppid !== this.supervisorPid
  }

  closeServer () {
    this.server?.close()
    this.server?.closeAllConnections()
  }

  // The supervisor died without stopping us (SIGKILL, say): the port is let go at once, the
  // running request with it, and the worker leaves as at the end of a drain, the app's
  // processes first. The pool's reaper is at the same work (lib/supervisor/reaper.js): its
  // signals are the same, and this process is among those it ends.
  orphaned () {
    this.stopping = true
    this.closeServer()
    this.exit()
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

function processes (n) { return n === 1 ? '1 process' : `${n} processes` }

module.exports = { WorkerRuntime, currentRuntime }
