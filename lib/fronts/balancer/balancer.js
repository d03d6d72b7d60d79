'use strict'

// The embedded balancer: the Front that `pool start` puts before its workers by default. It
// does HAProxy's job (a render at a time per worker, one FIFO queue for the pool, redispatch) and
// nginx's (request buffering, response read-ahead, /ping, the read timeout, a client's hang-up
// passed on), and learns about workers from the supervisor's hooks rather than from health
// checks. See ../front.js for the interface.
//
// This module is the front adapter: the hooks the supervisor calls, the client-facing listener
// and its stop, the metrics wiring. What happens to each request (admission, its body, the
// queue, the attempts on workers, the answer) is the request pipeline's (pipeline.js).

const { WorkerSet } = require('./workers')
const { RequestPipeline } = require('./pipeline')
const { refuseConnect, isPing } = require('./replies')
const { BalancerMetrics } = require('./metrics')
const { SlotStats } = require('./slots')
const { WorkerGoneError } = require('./upstream')
const { createFrontServer } = require('./server')
const { listen, stopAccepting, closeServer, urlOf } = require('../../net/listen')
const { guardAccept } = require('../../net/descriptors')

// On stop, connections still open this long after the queued requests were answered (a client
// still sending a body, say) are cut.
const STOP_GRACE_MS = 1000
// When the listener closes on a stop, a connection it accepted has this long to bring its first
// request (a client sends it with the connection: this only bounds one that never does).
const ACCEPTED_GRACE_MS = 2000

const SILENT_LOGGER = { trace () {}, debug () {}, info () {}, warn () {}, error () {}, fatal () {} }

class EmbeddedBalancer {
  constructor (options, { logger } = {}) {
    this.name = 'embedded'
    this.options = options
    this.log = logger
      ? (typeof logger.child === 'function' ? logger.child({ component: 'balancer' }) : logger)
      : SILENT_LOGGER
    this.context = null // the pool's FrontContext; null when used alone
    this.poolStopping = false
    this.stopped = false
    this.workers = new WorkerSet({
      maxconn: options.maxconn,
      balance: options.balance,
      maxOpen: options.workerMaxOpen,
      maxOpenTotal: options.maxOpen
    })
    this.slots = new SlotStats({ workers: this.workers }) // counters that outlive each process
    this.pipeline = new RequestPipeline({
      options,
      log: this.log,
      workers: this.workers,
      metrics: () => this.metrics,
      isStopping: () => this.poolStopping,
      isStopped: () => this.stopped,
      // A worker refusing connections while the pool counts it ready (pipeline.js noteRefusal):
      // false when used alone, with nobody to tell.
      reportRefusing: (w, detail) => {
        if (typeof this.context?.workerRefusing !== 'function') return false
        this.context.workerRefusing(w, { ...detail, front: this.name })
        return true
      }
    })
    this.dispatcher = this.pipeline.dispatcher // the queue: drains, benches and releases come from the hooks
    this.bodyBudget = this.pipeline.bodyBudget
    this.responseBudget = this.pipeline.responseBudget
    this.reclaimer = this.pipeline.reclaimer
    this.metrics = this.createMetrics(null)
    this.pingAsked = false // a health check watches the pool: its stop is announced (stopping())
    this.fresh = new Set() // connections accepted whose first request has not arrived yet
    this.clients = 0 // client connections open
    this.server = createFrontServer(options, {
      onRequest: (req, res) => {
        if (this.fresh.size > 0) this.settled(req.socket)
        if (!this.pingAsked && isPing(req, options.pingPath)) this.pingAsked = true
        this.pipeline.onRequest(req, res)
      },
      onCheckContinue: (req, res) => this.pipeline.onCheckContinue(req, res),
      onConnect: (req, socket) => this.onConnect(socket),
      onUpgrade: (req, socket, head) => {
        this.settled(socket)
        this.pipeline.onHandshake(req, socket, head)
      }
    })
    // One listener for every connection, not a closure each: a client may open one per request.
    const balancer = this
    function settledOnClose () { balancer.clients--; balancer.settled(this) }
    this.server.on('connection', (socket) => {
      this.clients++
      this.fresh.add(socket)
      socket.on('close', settledOnClose)
    })
    // A full descriptor table refuses new clients, never the workers' respawns (guardAccept),
    // nor the connections to workers of the clients it has: each client may need one for its
    // request (one at a time per connection), so a new one is let in only with room for it and
    // for every open client's that has none yet.
    guardAccept(this.server, {
      name: 'balancer',
      logger: this.log,
      more: () => 1 + Math.max(0, this.clients - this.workers.open),
      onRefused: () => this.metrics.failures.inc({ reason: 'out_of_descriptors' })
    })
    this.url = urlOf(options.host, options.port)
    this.connectSockets = new Set() // refused CONNECTs not closed yet: Node no longer tracks them
  }

  createMetrics (poolMetrics) {
    return new BalancerMetrics(() => ({
      queued: this.dispatcher.queued,
      workers: this.slots.views(),
      bodyBytes: this.bodyBudget.held,
      bodyBudget: this.bodyBudget.limit,
      responseBytes: this.responseBudget.held,
      responseBudget: this.responseBudget.limit,
      tunnels: this.pipeline.tunnels.size,
      tunnelBytes: this.pipeline.tunnelBytes()
    }), poolMetrics)
  }

  // ---- Front hooks ------------------------------------------------------------------------

  // The address clients reach the balancer on (the Front's `host`).
  get host () { return this.options.host }

  async start (context) {
    this.context = context || null
    // In front of a pool, the balancer's series join the pool's registry, and the workers can be
    // asked about a request the balancer let go of.
    if (this.context?.metrics) this.metrics = this.createMetrics(this.context.metrics)
    if (typeof this.context?.watchRequest === 'function') {
      this.pipeline.watchRequest = (record, id) => this.context.watchRequest({ slot: record.slot, pid: record.pid }, id)
    }
    const bound = await listen(this.server, { port: this.options.port, host: this.options.host, flag: 'port' })
    if (bound.fd !== undefined) this.url = urlOf(bound.address, bound.port) // a socket handed over: where it listens
    this.log.info({
      event: 'balancer-listening',
      url: this.url,
      maxconn: this.options.maxconn,
      balance: this.options.balance,
      overloadControl: this.options.overloadControl
    }, `balancer listening on ${this.url}`)
  }

  workerReady (w) {
    const known = this.workers.get(w.slot)
    if (known && known.pid === w.pid && known.port === w.port && w.pid !== undefined) {
      // The same process again: its requests in flight stay untouched, a bench is lifted.
      return this.dispatcher.unbench(known)
    }
    const record = this.workers.add(w, this.slots.of(w.slot, w.name))
    this.log.debug({ event: 'balancer-worker-up', worker: record.name, port: record.port },
      `${record.name} in rotation`)
    this.dispatcher.pump()
  }

  // With --worker-concurrency above 1: every request `w` holds awaits I/O (workers.js).
  workerAwaiting (w, { open, last }) {
    const record = this.workers.get(w.slot)
    if (!record || !record.byCpu || record.pid !== w.pid) return
    this.dispatcher.awaiting(record, open, last)
  }

  // A request the balancer let go of has ended in `w` (pipeline.js letGo): its place is free.
  workerRequestEnded (w, id) {
    this.workers.find(w.slot, w.pid)?.requestEnded(id)
  }

  workerGone (w) {
    const record = this.workers.remove(w.slot, w.pid, new WorkerGoneError(`worker ${w.name || w.slot} is gone`))
    if (!record) return
    this.pipeline.sessions.forget(record)
    this.log.debug({ event: 'balancer-worker-down', worker: record.name, inFlight: record.inFlight },
      `${record.name} out of rotation`)
    this.dispatcher.checkDrains()
    this.closeIfNoWorker()
  }

  // A stopping pool's worker keeps taking requests until the listener has closed and what it
  // accepted has come in (stopping()), then serves the queue until it is empty; any other drain
  // (reload, scale-down, recycling) gives the worker nothing new from now on.
  drain (w) {
    const record = this.workers.get(w.slot)
    if (!record || (w.pid !== undefined && record.pid !== undefined && w.pid !== record.pid)) return Promise.resolve()
    const accepted = this.poolStopping ? this.acceptedAll : Promise.resolve()
    return accepted
      .then(() => this.dispatcher.drain(record, { untilQueueEmpty: this.poolStopping }))
      .then(() => this.closeIfNoWorker())
  }

  // The pool stops. Whatever balances in front must hear it before this listener closes, or it
  // keeps sending requests here and meets a refused connection (an edge's retries may all come
  // back to the one host with the fewest connections). From now on /ping answers 503 and the
  // pool's agent says `drain`. When something in front watches the pool
  // (a health check has asked /ping, an edge its agent), the stop is announced for
  // --stop-announce, while every worker keeps taking requests as before; then the listener
  // closes. When nothing watches, waiting would tell nobody: it closes at once (a refused
  // connection lets a balancer in front send the request elsewhere; a socket handed over by a
  // service manager stays open there, and the next pool accepts what waits in its backlog).
  // Either way the workers are drained only once every connection the listener accepted has
  // brought its request (closeListener), so nothing accepted is turned away.
  stopping () {
    if (this.poolStopping) return
    this.poolStopping = true
    this.acceptedAll = new Promise((resolve) => { this.allAccepted = resolve })
    const watched = this.pingAsked || Boolean(this.context?.agentAsked?.())
    const announceMs = watched ? this.options.stopAnnounce : 0
    this.log.info({ event: 'balancer-stopping', queued: this.dispatcher.queued, announceMs, watched },
      watched
        ? `balancer stopping: /ping answers 503; serving as before for ${announceMs} ms, until the stop is ` +
          'announced'
        : 'balancer stopping: /ping answers 503; serving what is queued')
    if (announceMs > 0) this.announceTimer = setTimeout(() => this.closeListener('announced'), announceMs)
    else this.closeListener(watched ? 'announced' : 'unwatched')
    this.closeIfNoWorker()
  }

  // While the stop is announced, no worker left to take a request: the listener closes at once.
  closeIfNoWorker () {
    if (this.poolStopping && this.workers.records.length === 0) this.closeListener('no-worker')
  }

  // Stop accepting, and nothing more: a connection accepted but whose request has not arrived yet
  // stays open (http.Server#close would cut it) and its request is served. Once every such
  // connection has brought a request or gone (a silent one is cut after ACCEPTED_GRACE_MS), the
  // idle keep-alive connections are let go (busy ones get Connection: close) and the stop's
  // drains go on.
  closeListener (why) {
    clearTimeout(this.announceTimer)
    if (this.server.closeRequested) return
    if (!this.server.listening) return this.allAccepted?.() // it never listened: nothing was accepted
    stopAccepting(this.server)
    this.log.info({ event: 'balancer-closed', why, queued: this.dispatcher.queued, awaiting: this.fresh.size },
      'balancer closed its listener')
    const done = () => {
      this.onFreshGone = null
      clearTimeout(this.freshTimer)
      this.server.closeIdleConnections()
      this.allAccepted?.()
    }
    this.onFreshGone = () => { if (this.fresh.size === 0) done() }
    this.freshTimer = setTimeout(done, ACCEPTED_GRACE_MS)
    this.onFreshGone()
  }

  // A connection accepted has brought its first request, or closed.
  settled (socket) {
    if (this.fresh.delete(socket)) this.onFreshGone?.()
  }

  async stop () {
    this.poolStopping = true
    clearTimeout(this.announceTimer)
    clearTimeout(this.freshTimer)
    this.allAccepted?.()
    this.stopped = true
    this.pipeline.stop()
    for (const socket of this.connectSockets) socket.destroy()
    this.workers.closeAll(new WorkerGoneError('the pool stopped'))
    const cut = setTimeout(() => this.server.closeAllConnections(), STOP_GRACE_MS)
    await closeServer(this.server)
    clearTimeout(cut)
  }

  status () {
    const workers = this.slots.views()
    return {
      type: 'embedded',
      url: this.url,
      balance: this.options.balance,
      maxconn: this.options.maxconn,
      queue: this.dispatcher.queued,
      inFlight: this.workers.inFlight(),
      open: this.workers.open,
      maxOpen: this.options.maxOpen,
      bodyBytes: this.bodyBudget.held,
      bodyBudget: this.bodyBudget.limit,
      responseBytes: this.responseBudget.held,
      responseBudget: this.responseBudget.limit,
      tunnels: this.pipeline.tunnels.size,
      tunnelsOpened: this.pipeline.tunnelCounts.opened,
      stopping: this.poolStopping,
      workers,
      // Beside each worker's state on the status page: benched for a moment after a refused or
      // reset connection, and the attempts on it that failed.
      notes: Object.fromEntries(workers.map((w) => [w.slot, {
        badge: w.state === 'benched' ? 'benched' : undefined,
        text: w.failures ? `${w.failures} failed` : undefined
      }]))
    }
  }

  // CONNECT: refused (replies.js); its socket is the balancer's to close on stop.
  onConnect (socket) {
    this.connectSockets.add(refuseConnect(socket))
    socket.once('close', () => this.connectSockets.delete(socket))
  }
}

module.exports = { EmbeddedBalancer }
