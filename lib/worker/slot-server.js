'use strict'

// The server on the slot's port: which listen() the worker takes over, how it listens with it (guard, limits,
// timeouts, low fds), and what it reports (a closed listener, a watched request's end, counts).

const fs = require('node:fs')
const net = require('node:net')
const msg = require('../protocol/messages')
const { guardRequests } = require('./guard')
const { RequestLimits } = require('./limits')
const { servingOf, protocolOf, unservableError, appError } = require('./servable')
const { interceptListen, requestedPort } = require('./adopt')
const { Tunnels } = require('./tunnels')

class SlotServer {
  // `limits`: { read, total } (limits.js). `onReady(port)` once it listens, `onDrained()` once nothing is
  // open or waits, `onTunnels(open)` as tunnels open and close.
  constructor ({
    slot, port, host, concurrency = 1, limits = { read: 0, total: 0 }, link, logger,
    failBoot, booted, stopping, onReady, onDrained, onTunnels = () => {}
  }) {
    this.slot = slot
    this.port = port
    this.host = host
    this.concurrency = concurrency
    this.limits = limits
    this.link = link
    this.logger = logger
    this.failBoot = failBoot
    this.booted = booted
    this.stopping = stopping
    this.onReady = onReady
    this.onDrained = onDrained
    this.server = null // the server on the slot's port, once taken
    this.preparing = null // an app's server while the app gets ready to serve (Fastify's ready())
    this.otherPorts = new Set() // other ports the app listened on, for the waiting hint
    this.listen = net.Server.prototype.listen // the original, once interceptListen has replaced it
    this.guard = null
    this.listenerReported = false
    this.tunnels = new Tunnels({
      onChange: (open) => {
        onTunnels(open)
        this.drainedSoon()
      }
    })
  }

  intercept () {
    this.listen = interceptListen({
      decide: (server, args) => this.decideListen(server, args),
      adopt: (server, callback) => this.adopt(server, callback)
    })
  }

  get claimed () { return this.server !== null || this.preparing !== null }

  // Whether a request runs or waits, or a tunnel is open.
  get busy () { return this.tunnels.open > 0 || (this.guard !== null && (this.guard.busy || this.guard.waiting > 0)) }

  drainedSoon () {
    if (this.stopping() && !this.busy) setImmediate(this.onDrained)
  }

  // A reload's canary (PORT=0) takes a free port, so that `parseInt(process.env.PORT) || 3000` finds it.
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

  // The first server on the slot's port is adopted; later ones get EADDRINUSE, even on another address
  // (Fastify's second `localhost` binding, on ::1), so that none serves beside the render guard.
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

  // A server that reaches the slot's port another way (a handle, an fd) is closed, and the boot fails.
  guardPassed (server) {
    server.once('listening', () => {
      const address = server.address()
      if (server === this.server || address === null || typeof address !== 'object' || address.port !== this.port) {
        return
      }
      server.close()
      const err =
        appError(`the app listens on the slot's port (${this.port}) through a handle or a file descriptor ` +
          '(listen(handle), listen({ fd })), which the pool cannot take over to serve behind its render guard: ' +
          'listen on process.env.PORT as a port, or export the app')
      if (this.booted()) this.logger().error({ event: 'unguarded-listener', err }, err.message)
      else this.failBoot(err)
    })
  }

  // A port probe (get-port) closes its net.Server in its listening callback; one still listening after
  // is the app's and speaks no HTTP: the boot fails at once, not at --boot-timeout.
  failUnlessProbe (server) {
    server.once('listening', () => setImmediate(() => {
      if (server.listening) this.failBoot(unservableError(server, this.port))
    }))
  }

  // An app exported or passed to pool's listen(): listened with once it is ready.
  serve (target) {
    if (this.claimed) {
      throw new Error('listen() was called twice in one worker, or after the app listened on PORT itself')
    }
    const { server, prepare } = servingOf(target)
    if (!prepare) return this.adopt(server)
    this.preparing = server
    new Promise((resolve) => resolve(prepare())).then(() => {
      this.preparing = null
      if (this.server === null) this.adopt(server)
    }, (err) => this.failBoot(err))
    return server
  }

  // Listens with `server` on the slot's port and host. `callback`, the app's own, runs before onReady.
  adopt (server, callback = null) {
    const unservable = unservableError(server, this.port)
    if (unservable) {
      this.failBoot(unservable)
      return server
    }
    this.server = server
    const limits = new RequestLimits(this.limits, {
      open: () => this.guard.entries(),
      onCut: (req, which) => this.logger().warn({
        event: 'request-cut',
        limit: which,
        method: req.method,
        url: req.url.slice(0, msg.MAX_TEXT)
      },
        `${req.method} ${req.url.slice(0, 200)} ended by ` +
          `the ${which === 'read' ? 'read timeout' : 'request time limit'}`)
    })
    this.guard = guardRequests(server, {
      onArrive: (req) => this.link.requestArrived(req),
      onStart: limits.enabled ? () => limits.watch() : null,
      onIdle: () => this.drainedSoon(),
      onQueued: (waiting, running) => {
        this.link.send(msg.QUEUED,
          { waiting, running: { method: running.method, url: running.url.slice(0, msg.MAX_TEXT) } })
        this.logger().warn({ event: 'request-queued', waiting },
          `a request found every render place taken; ${waiting} waiting in-process (${this.concurrency} at a time)`)
      },
      // Every request held awaits I/O; `last` lets the balancer tell old news.
      onAwaiting: (open, last) => this.link.send(msg.AWAITING, { open, last: idOf(last) })
    }, { concurrency: this.concurrency })
    // Outlive the balancer's idle keep-alive sockets so it rarely reuses one being closed.
    server.keepAliveTimeout = 65000
    server.headersTimeout = 66000
    server.on('error', (err) => this.booted() ? this.reportListenerClosed(err) : this.failBoot(err))
    this.tunnels.track(server)
    this.watchListener(server)
    this.link.hold() // awaitListen let go of it
    const reserved = reserveLowFds()
    server.once('listening', () => releaseFds(reserved))
    const args = [{ port: this.port, host: this.host }]
    if (callback) args.push(callback)
    this.listen.apply(server, args)
    server.once('listening', () => this.onReady(this.server.address().port))
    return server
  }

  counts () {
    const tunnels = this.tunnels.counts()
    if (!this.guard) return { open: 0, answered: 0, oldest: null, ...tunnels }
    const first = this.guard.entries().next().value
    const oldest = first
      ? { method: first.req.method, url: first.req.url, age: performance.now() - first.startedAt }
      : null
    return { open: this.guard.open, answered: this.guard.answered, oldest, ...tunnels }
  }

  // Says when the request of this X-Pool-Request id ends; at once if it is not here.
  watch (id) {
    const said = () => this.link.send(msg.REQUEST_ENDED, { id })
    if (!this.guard || !this.guard.whenEnded(id, said)) said()
  }

  // A worker whose server stopped listening looks ready and refuses everything. Node's 'close' waits for
  // every connection, so close() itself is watched, and each check-in looks at `listening` too.
  watchListener (server) {
    const close = server.close
    const slotServer = this
    server.close = function (...args) {
      const result = close.apply(this, args)
      slotServer.checkListener()
      return result
    }
    server.on('close', () => this.checkListener())
  }

  checkListener () {
    if (this.booted() && this.server && !this.server.listening) this.reportListenerClosed()
  }

  // Closed (no `err`) or failed after listening (an accept out of fds: the app likely leaks them): the
  // supervisor replaces the worker. Said once, never on a stop.
  reportListenerClosed (err) {
    if (this.stopping() || this.listenerReported) return
    this.listenerReported = true
    this.link.send(msg.LISTENER_CLOSED, err ? { error: msg.serializeError(err) } : {})
  }

  hintWaiting () {
    const ports = [...this.otherPorts]
    const message = ports.length > 0
      ? `the app listens on port ${ports.join(', ')}, not on PORT (${this.port}): listen on process.env.PORT, or ` +
        'export the app'
      : 'the app exported no request listener or server and has not called listen() yet'
    this.logger().warn({ event: 'waiting-for-listen', ports }, message)
  }

  describePortInUse (err) {
    if (err.port === undefined || err.port === this.port) {
      return `port ${this.port} (slot ${this.slot}) is already in use`
    }
    return `port ${err.port} is already in use (the app listens on it itself, not on PORT, ${this.port})`
  }

  // Frees the port for the slot's next process, closes idle connections, and says what is still open.
  stopListening () {
    this.server.close()
    this.server.closeIdleConnections()
    const { open, tunnels } = this.counts()
    this.link.send(msg.LEFT_PORT, { open, tunnels })
  }

  close () {
    this.server?.close()
    this.server?.closeAllConnections()
  }

  closeAll () {
    this.server?.closeAllConnections()
  }
}

// A SIGKILLed process's fds close highest first: a listener above its connections closes first, so the
// balancer's next connect is refused and redispatched rather than lost in a dead backlog (1.0 vs 1.3
// failed requests per kill with HAProxy).
const RESERVED_FDS = 16

function idOf (req) {
  const id = req.headers['x-pool-request']
  return typeof id === 'string' ? id.slice(0, msg.MAX_ID) : ''
}

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

module.exports = { SlotServer }
