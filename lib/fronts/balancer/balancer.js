'use strict'

// The embedded balancer: the Front that `pool start` puts before its workers by default. It
// does HAProxy's job (one request per worker, one FIFO queue for the pool, redispatch) and
// nginx's (request buffering, response read-ahead, /ping), and learns about workers from the supervisor's hooks
// rather than from health checks. See lib/fronts/front.js for the interface.
//
// This module is the front adapter: the hooks the supervisor calls, the client-facing listener
// and its stop, the metrics wiring. What happens to each request (admission, its body, the
// queue, the attempts on workers, the answer) is the request pipeline's (pipeline.js).

const { WorkerSet } = require('./workers')
const { RequestPipeline } = require('./pipeline')
const { refuseConnect } = require('./replies')
const { BalancerMetrics } = require('./metrics')
const { SlotStats } = require('./slots')
const { WorkerGoneError } = require('./upstream')
const { createFrontServer } = require('./server')
const { listen, beginClose, closeServer, urlOf } = require('../../net/listen')
const { guardAccept } = require('../../net/descriptors')

// On stop, connections still open this long after the queued requests were answered (a client
// still sending a body, say) are cut.
const STOP_GRACE_MS = 1000

const SILENT_LOGGER = { trace () {}, debug () {}, info () {}, warn () {}, error () {}, fatal () {} }

class EmbeddedBalancer {
  constructor (options, { logger } = {}) {
    this.name = 'embedded'
    this.options = options
    this.log = logger ? (typeof logger.child === 'function' ? logger.child({ component: 'balancer' }) : logger) : SILENT_LOGGER
    this.context = null // the pool's FrontContext (lib/fronts/front.js); null when used alone
    this.isStopping = false
    this.isStopped = false
    this.workers = new WorkerSet({ maxconn: options.maxconn, balance: options.balance })
    this.slots = new SlotStats({ metrics: null, workers: this.workers }) // counters that outlive each process
    this.pipeline = new RequestPipeline({
      options,
      log: this.log,
      workers: this.workers,
      slots: this.slots,
      metrics: () => this.metrics,
      isStopping: () => this.isStopping,
      isStopped: () => this.isStopped,
      supervisorSays: (slot) => this.context?.workers?.().find((w) => w.slot === slot),
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
    this.slots.metrics = this.metrics = this.createMetrics(null)
    this.server = createFrontServer(options, {
      onRequest: (req, res) => this.pipeline.onRequest(req, res),
      onCheckContinue: (req, res) => this.pipeline.onCheckContinue(req, res),
      onConnect: (req, socket) => this.onConnect(socket)
    })
    // A full descriptor table refuses new clients, never the workers' respawns
    // (lib/net/descriptors.js).
    guardAccept(this.server, { name: 'balancer', logger: this.log, onRefused: () => this.metrics.failures.inc({ reason: 'out_of_descriptors' }) })
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
      responseBudget: this.responseBudget.limit
    }), poolMetrics)
  }

  // ---- Front hooks ------------------------------------------------------------------------

  // The address clients reach the balancer on (lib/fronts/front.js `host`).
  get host () { return this.options.host }

  async start (context) {
    this.context = context || null
    // In front of a pool, the balancer's series join the pool's registry (lib/fronts/front.js).
    if (this.context?.metrics) this.slots.metrics = this.metrics = this.createMetrics(this.context.metrics)
    await listen(this.server, { port: this.options.port, host: this.options.host, flag: 'port' })
    this.log.info({ event: 'balancer-listening', url: this.url, maxconn: this.options.maxconn, balance: this.options.balance, overloadControl: this.options.overloadControl }, `balancer listening on ${this.url}`)
  }

  workerReady (w) {
    const known = this.workers.get(w.slot)
    if (known && known.pid === w.pid && known.port === w.port && w.pid !== undefined) {
      // The same process again: its requests in flight stay untouched, a bench is lifted.
      return this.dispatcher.unbench(known)
    }
    const record = this.workers.add(w)
    this.slots.of(record.slot, record.name)
    this.log.debug({ event: 'balancer-worker-up', worker: record.name, port: record.port }, `${record.name} in rotation`)
    this.dispatcher.pump()
  }

  // The supervisor heard the end of a request: a worker whose answer failed may work again.
  workerIdle (w) {
    const record = this.workers.get(w.slot)
    if (!record || record.pid !== w.pid || !record.awaitingIdle) return
    record.awaitingIdle = false
    this.dispatcher.release(record)
  }

  workerGone (w) {
    const record = this.workers.remove(w.slot, w.pid, new WorkerGoneError(`worker ${w.name || w.slot} is gone`))
    if (!record) return
    if (record.awaitingIdle) { record.awaitingIdle = false; this.dispatcher.release(record) }
    this.log.debug({ event: 'balancer-worker-down', worker: record.name, inFlight: record.inFlight }, `${record.name} out of rotation`)
    this.dispatcher.checkDrains()
    this.closeIfNoWorker()
  }

  drain (w) {
    const record = this.workers.get(w.slot)
    if (!record || (w.pid !== undefined && record.pid !== undefined && w.pid !== record.pid)) return Promise.resolve()
    return this.dispatcher.drain(record, { untilQueueEmpty: this.isStopping }).then(() => this.closeIfNoWorker())
  }

  // The pool stops. /ping answers 503 at once, but the listener stays open a moment
  // (--stop-announce) so that a health check in front sees the stop rather than a refused
  // connection, and what arrives meanwhile is served by the draining workers; then it closes
  // (idle keep-alive clients are let go, busy ones get Connection: close), and at once when no
  // worker is left to take a request: from then on a refused connection is what lets a balancer
  // in front send the request elsewhere.
  stopping () {
    if (this.isStopping) return
    this.isStopping = true
    this.announceTimer = setTimeout(() => this.closeListener('announced'), this.options.stopAnnounce)
    this.log.info({ event: 'balancer-stopping', queued: this.dispatcher.queued, announceMs: this.options.stopAnnounce }, 'balancer stopping: /ping answers 503; serving what is queued')
    this.closeIfNoWorker()
  }

  closeIfNoWorker () {
    if (this.isStopping && !this.workers.records.some((r) => !r.draining)) this.closeListener('no-worker')
  }

  closeListener (why) {
    clearTimeout(this.announceTimer)
    if (!this.server.listening || this.server.closeRequested) return
    beginClose(this.server)
    this.log.info({ event: 'balancer-closed', why, queued: this.dispatcher.queued }, 'balancer closed its listener')
  }

  async stop () {
    this.isStopping = true
    clearTimeout(this.announceTimer)
    this.isStopped = true
    this.pipeline.stop()
    for (const socket of this.connectSockets) socket.destroy()
    this.workers.closeAll(new WorkerGoneError('the pool stopped'))
    const cut = setTimeout(() => this.server.closeAllConnections(), STOP_GRACE_MS)
    await closeServer(this.server)
    clearTimeout(cut)
  }

  status () {
    return {
      type: 'embedded',
      url: this.url,
      balance: this.options.balance,
      maxconn: this.options.maxconn,
      queue: this.dispatcher.queued,
      inFlight: this.workers.inFlight(),
      bodyBytes: this.bodyBudget.held,
      bodyBudget: this.bodyBudget.limit,
      responseBytes: this.responseBudget.held,
      responseBudget: this.responseBudget.limit,
      stopping: this.isStopping,
      workers: this.slots.views()
    }
  }

  // CONNECT: refused (replies.js); its socket is the balancer's to close on stop.
  onConnect (socket) {
    this.connectSockets.add(refuseConnect(socket))
    socket.once('close', () => this.connectSockets.delete(socket))
  }
}

module.exports = { EmbeddedBalancer }
