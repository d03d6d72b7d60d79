'use strict'

// The server on the slot's port: which of the app's listen() calls the worker takes over, how it
// listens with that server (the in-process guard, the limits no front enforces, the timeouts the
// balancer needs, low fds), and what it reports of it to the supervisor (a listener that closed,
// the end of a request it was asked to watch; its requests' and tunnels' counts go with each
// check-in).

const fs = require('node:fs')
const net = require('node:net')
const msg = require('../protocol/messages')
const { guardRequests } = require('./guard')
const { RequestLimits } = require('./limits')
const { servingOf, protocolOf, unservableError, appError } = require('./servable')
const { interceptListen, requestedPort } = require('./adopt')
const { Tunnels } = require('./tunnels')

class SlotServer {
  // `link`: the supervisor's. `logger()`: the worker's. `concurrency`: requests rendered at once
  // (--worker-concurrency); `limits`: { read, total } (limits.js). The runtime's side:
  // `failBoot(err)`, `booted()` and `stopping()` (its state), `onReady()` once the server
  // listens, `onDrained()` once nothing is open or waits, `onTunnels(open)` as tunnels open and close.
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
    this.otherPorts = new Set() // ports the app listened on that are not the slot's: the waiting hint names them
    this.listen = net.Server.prototype.listen // the original, once interceptListen has replaced it
    this.guard = null
    this.listenerReported = false // told the supervisor that the server no longer listens
    this.tunnels = new Tunnels({
      onChange: (open) => {
        onTunnels(open)
        this.drainedSoon()
      }
    })
  }

  // From now on every listen() in the process asks decideListen() first.
  intercept () {
    this.listen = interceptListen({
      decide: (server, args) => this.decideListen(server, args),
      adopt: (server, callback) => this.adopt(server, callback)
    })
  }

  // Whether the worker has its server, or is getting one ready.
  get claimed () { return this.server !== null || this.preparing !== null }

  // Whether a request runs or waits, or a tunnel is open.
  get busy () { return this.tunnels.open > 0 || (this.guard !== null && (this.guard.busy || this.guard.waiting > 0)) }

  // A stopping worker leaves once nothing is open any more.
  drainedSoon () {
    if (this.stopping() && !this.busy) setImmediate(this.onDrained)
  }

  // A reload's canary has no slot and is forked with PORT=0. It takes a free port of its own, so
  // that an app reading PORT (`parseInt(process.env.PORT) || 3000`, as Next's standalone server
  // does) listens where the worker adopts it, not on its default.
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

  // Every listen() in the worker asks here first. The first server to listen on the slot's port
  // is the app's: the worker takes it over (adopt() fails the boot if it is no HTTP/1.1 server).
  // Once it has one, the port is the pool's: another server asking for it gets EADDRINUSE, even
  // on another address (Fastify's second binding of `localhost`, on ::1), so that none serves
  // beside the render guard (guard.js).
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
  // must still not end up serving on the slot's port beside the render guard: such a server
  // is closed as it starts listening, and the boot fails saying why.
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
    if (this.claimed) {
      throw new Error('listen() was called twice in one worker, or after the app listened on PORT itself')
    }
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
  // render guard, the timeouts the balancer needs, low fds, ready. `callback` is the app's
  // own listen() callback, called once it listens, before the supervisor hears of it.
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
      // Every request it holds awaits I/O: the balancer may give it another. `last` names the
      // request started last, so that a word sent before the balancer's next request arrived is
      // known as old news.
      onAwaiting: (open, last) => this.link.send(msg.AWAITING, { open, last: idOf(last) })
    }, { concurrency: this.concurrency })
    // Outlive the balancer's idle keep-alive sockets so it rarely reuses one being closed.
    server.keepAliveTimeout = 65000
    server.headersTimeout = 66000
    server.on('error', (err) => this.booted() ? this.reportListenerClosed(err) : this.failBoot(err))
    this.tunnels.track(server)
    this.watchListener(server)
    this.link.hold() // the app's wait let go of it; from now on the server keeps the worker alive anyway
    const reserved = reserveLowFds()
    server.once('listening', () => releaseFds(reserved))
    const args = [{ port: this.port, host: this.host }]
    if (callback) args.push(callback)
    this.listen.apply(server, args)
    server.once('listening', () => this.onReady(this.server.address().port))
    return server
  }

  // What each check-in says of the requests and tunnels.
  counts () {
    const tunnels = this.tunnels.counts()
    if (!this.guard) return { open: 0, answered: 0, oldest: null, ...tunnels }
    const first = this.guard.entries().next().value
    const oldest = first
      ? { method: first.req.method, url: first.req.url, age: performance.now() - first.startedAt }
      : null
    return { open: this.guard.open, answered: this.guard.answered, oldest, ...tunnels }
  }

  // The supervisor asks when the request of this exchange (X-Pool-Request) ends (its front gave up reading
  // the answer while the app may still run it): said at once if it is not here.
  watch (id) {
    const said = () => this.link.send(msg.REQUEST_ENDED, { id })
    if (!this.guard || !this.guard.whenEnded(id, said)) said()
  }

  // After ready, a server that no longer listens leaves a worker that heartbeats, looks ready,
  // and refuses every connection: the supervisor must hear of it, and replaces the worker. Node
  // emits 'close' only once every open connection has ended (the balancer keeps some alive for
  // a minute), while the port refuses connections from the moment close() is called: so close()
  // itself is watched, and each check-in looks at `listening`, for a close that went round it.
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

  // The server closed (`err` absent), or failed: an error after listening is an accept that
  // failed (out of file descriptors: the connections a worker holds are bounded, so most likely
  // its app leaks them), or one the app emitted. Either way the worker is replaced rather than
  // left to refuse connections; handled here, so it is not thrown as an unhandled 'error'. Said
  // once; the worker's own close on a stop says nothing.
  reportListenerClosed (err) {
    if (this.stopping() || this.listenerReported) return
    this.listenerReported = true
    this.link.send(msg.LISTENER_CLOSED, err ? { error: msg.serializeError(err) } : {})
  }

  // The app has not listened after a while: say what the worker waits for.
  hintWaiting () {
    const ports = [...this.otherPorts]
    const message = ports.length > 0
      ? `the app listens on port ${ports.join(', ')}, not on PORT (${this.port}): listen on process.env.PORT, or ` +
        'export the app'
      : 'the app exported no request listener or server and has not called listen() yet'
    this.logger().warn({ event: 'waiting-for-listen', ports }, message)
  }

  // EADDRINUSE, said for the slot's port or one the app chose itself: a fixed port, say, which
  // only one worker can have.
  describePortInUse (err) {
    if (err.port === undefined || err.port === this.port) {
      return `port ${this.port} (slot ${this.slot}) is already in use`
    }
    return `port ${err.port} is already in use (the app listens on it itself, not on PORT, ${this.port})`
  }

  // New connections are refused from now on (the port is free for the slot's next process); those
  // idle are closed. The supervisor hears it, and how many requests and tunnels are still open.
  stopListening () {
    this.server.close()
    this.server.closeIdleConnections()
    const { open, tunnels } = this.counts()
    this.link.send(msg.LEFT_PORT, { open, tunnels })
  }

  // The port is let go at once, and every connection with it.
  close () {
    this.server?.close()
    this.server?.closeAllConnections()
  }

  // Every connection goes, a running request's with it.
  closeAll () {
    this.server?.closeAllConnections()
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

// The exchange a request came in (X-Pool-Request: the embedded balancer's id of it).
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
