'use strict'

// The embedded balancer's request pipeline: one client request from arrival to answer. The adapter
// (balancer.js) owns the listener, the supervisor's hooks and metrics, and hands requests to
// onRequest(). Stages: admission (arrivalRefusal), body (buffering.js), queue (dispatcher.js),
// attempt (proxy.js; failures.js after a failure), answer (relay.js or replies.js; lingering.js),
// tunnel (tunnel.js, after a WebSocket 101).

const { Dispatcher } = require('./dispatcher')
const { Attempt } = require('./proxy')
const { Deadlines } = require('./deadlines')
const {
  failureOf, ATTEMPT_FAILURES, decide, countRetry, isDroppedHandshake, mayReuseConnection
} = require('./failures')
const { refusalOf, targetOf } = require('./request-rules')
const { readBody, declaredLength, declaredTooLarge } = require('./buffering')
const { BodyBudget } = require('./body-budget')
const { ResponseBudget } = require('./response-budget')
const { lingerThenClose, isLingering, lingerBytes } = require('./lingering')
const { Reclaimer, worthReclaiming } = require('./reclaim')
const headers = require('./headers')
const { trustsPeerOf } = require('./trust')
const { replyError, replyPing } = require('./replies')
const { BalancedRequest } = require('./request')
const { accessLogger } = require('./access-log')
const { codes } = require('../../errors')
const { isLongLived } = require('../../protocol/long-lived')
const { Tunnel } = require('./tunnel')
const { Sessions, engineRequest } = require('./sessions')
const { ServerResponse } = require('node:http')

const BODY_REFUSALS = {
  [codes.BODY_TOO_LARGE]: 'body_too_large',
  [codes.BODY_OVER_BUDGET]: 'body_budget'
}

// Refusals for a limit of the balancer's, counted, rather than for what the request is.
const LIMITS = new Set(['body_too_large', 'body_budget', 'queue_full'])

const REDISPATCHED = {
  refused: (name) => `${name} refused it`,
  local: (name) => `the balancer could not connect to ${name} (out of descriptors)`,
  died: (name) => `${name} died holding it`
}

// Refusals in a row before the supervisor hears the worker refuses (with the bench: ≥ 2 s of them).
const REFUSALS_BEFORE_REPORT = 3

class RequestPipeline {
  // metrics(): the BalancerMetrics of now. isStopping(): /ping answers 503, answers close their
  //   connection; isStopped(): nothing more taken or retried. reportRefusing(worker, { refusals }):
  //   FrontContext workerRefusing, false when nobody could be told.
  constructor ({ options, log, workers, metrics, isStopping, isStopped, reportRefusing }) {
    this.options = options
    this.log = log
    this.currentMetrics = metrics
    this.isStopping = isStopping
    this.isStopped = isStopped
    // The FrontContext's watchRequest, set by the adapter; false when nobody can be asked.
    this.watchRequest = () => false
    this.reportRefusing = reportRefusing
    this.accessLog = options.accessLog ? accessLogger(log) : null
    this.dispatcher = new Dispatcher({
      workers,
      queueTimeout: options.queueTimeout,
      maxQueue: options.maxQueue,
      overload: options.overload,
      priorityOf: options.priorityOf,
      onAssign: (request, record) => this.onAssign(request, record),
      onError: (err) => this.log.error({ event: 'balancer-internal-error', err },
        `internal error in the balancer's queue: ${err && err.message}`),
      onTurnedAway: (request, reason) => this.safely(request, () => {
        this.account(request, { failure: reason })
        this.fail(request, reason)
      })
    })
    this.reclaimer = new Reclaimer({
      emptySince: () => this.emptySince(),
      minBytes: worthReclaiming(options.bodyBudget)
    })
    const onRelease = (bytes) => this.reclaimer.onRelease(bytes)
    this.bodyBudget = new BodyBudget(options.bodyBudget, { onRelease })
    this.responseBudget = new ResponseBudget(options.responseBudget, { onRelease })
    this.lingerBytes = lingerBytes(options.maxBody)
    const deadlines = new Deadlines(
      { read: options.readTimeout, total: options.maxRequestTime, send: options.sendTimeout },
      { onSendTimeout: () => this.account(null, { failure: 'client_send_timeout' }) })
    const attempt = { maxResponseBuffer: options.maxResponseBuffer, budget: this.responseBudget, deadlines }
    this.attemptOptions = { reused: { ...attempt, reuse: true }, fresh: { ...attempt, reuse: false } }
    this.sessions = new Sessions() // Socket.IO sessions → the worker holding each
    this.tunnels = new Set() // requests whose tunnel is open
    this.tunnelCounts = { opened: 0, toWorker: 0, toClient: 0 } // over the balancer's life, ended ones' bytes
  }

  emptySince () {
    const bodies = this.bodyBudget.emptySince
    const responses = this.responseBudget.emptySince
    return bodies === null || responses === null ? null : Math.max(bodies, responses)
  }

  get metrics () { return this.currentMetrics() }

  stop () {
    this.reclaimer.stop()
    this.dispatcher.clear((request) => this.safely(request, () => this.fail(request, 'stopping')))
    for (const request of this.tunnels) request.tunnel.close('stop')
  }

  // ---- a request's life: onRequest → arrivalRefusal → body → admit → onAssign → onResponse or
  // onAttemptFailed → onWorkerDone → onClientClose. Every outside entry runs through `safely`.

  onRequest (req, res, { expectsContinue = false } = {}) {
    if (isLingering(req.socket)) return
    reconcileTarget(req)
    if (req.url === this.options.pingPath || req.url.startsWith(this.options.pingPath + '?')) {
      return replyPing(req, res, { stopping: this.isStopping() })
    }
    const request = new BalancedRequest(req, res)
    request.trusted = trustsPeerOf(req.socket, this.options.isTrustedPeer)
    request.id = headers.requestId(req, request.trusted)
    request.longLived = isLongLived(req, this.options.longLivedRoutes)
    this.stick(request)
    res.once('close', () => this.safely(request, () => this.onClientClose(request)))
    this.safely(request, () => this.accept(request, expectsContinue))
  }

  // A WebSocket handshake: long-lived, no body, answered on its bare socket until a 101.
  onHandshake (req, socket, head) {
    socket.on('error', () => {}) // Node took its own listeners off; the response or tunnel has others
    reconcileTarget(req)
    const res = responseOn(req, socket)
    const request = new BalancedRequest(req, res)
    request.trusted = trustsPeerOf(socket, this.options.isTrustedPeer)
    request.id = headers.requestId(req, request.trusted)
    request.longLived = true
    request.upgrade = head
    this.stick(request)
    res.once('close', () => this.safely(request, () => this.onClientClose(request)))
    this.safely(request, () => this.accept(request, false))
  }

  // A Socket.IO request is long-lived, and goes to the worker holding its session.
  stick (request) {
    request.session = engineRequest(request.url)
    if (request.session === null) return
    request.longLived = true
    if (request.session !== 'open') request.pinned = this.sessions.workerOf(request.session) ?? null
  }

  onCheckContinue (req, res) {
    this.onRequest(req, res, { expectsContinue: true })
  }

  accept (request, expectsContinue) {
    const refusal = this.arrivalRefusal(request)
    if (refusal) return this.refuse(request, refusal)
    if (!request.hasBody) return this.admit(request)
    if (expectsContinue) request.res.writeContinue()
    readBody(request.req, { limit: this.options.maxBody, hold: request.bodyHold }).then((body) => {
      request.body = body
      this.safely(request, () => this.admit(request))
    }, (err) => this.safely(request, () => {
      const reason = BODY_REFUSALS[err.code]
      if (reason) this.refuse(request, reason)
      // CLIENT_ABORTED: nobody is left to answer; onClientClose accounts for it.
    }))
  }

  // The one arrival decision, before a byte of the body is read: the replies.js reason, or null. A
  // body announcing more than the body budget's room now is refused.
  arrivalRefusal (request) {
    const { req } = request
    if (this.isStopped()) return 'stopping'
    const rule = refusalOf(req)
    if (rule) return rule
    if (!request.hasBody) return null // the queue decides as it takes it (admit)
    if (declaredTooLarge(req, this.options.maxBody)) return 'body_too_large'
    if (!this.dispatcher.wouldTake(request)) return 'queue_full'
    request.bodyHold = this.bodyBudget.admit(declaredLength(req) ?? 0)
    return request.bodyHold ? null : 'body_budget'
  }

  admit (request) {
    if (request.clientGone) return
    if (this.isStopped()) return this.fail(request, 'stopping')
    request.enter('queued')
    const taken = this.dispatcher.submit(request)
    if (taken === 'full') this.refuse(request, 'queue_full')
    else if (taken !== 'queued') this.onAssign(request, taken)
  }

  // Only the balancer's limits count in pool_failures_total, not rules or stopping.
  refuse (request, reason) {
    if (LIMITS.has(reason)) this.account(request, { failure: reason })
    this.fail(request, reason)
  }

  // From admit(), or from the dispatcher's pump for a request that waited: hence `safely`.
  onAssign (request, record) {
    request.holding = record
    request.assignedAt = performance.now()
    this.safely(request, () => {
      if (request.attempts === 0) request.firstWaitMs = request.queueMs
      request.attempts++
      request.enter('on-worker')
      request.record = record
      request.exchange = headers.exchangeId()
      const upgrade = request.upgrade !== null
      request.head ??= headers.requestHead(request.req,
        { id: request.id, body: request.body, trusted: request.trusted, upgrade })
      request.attempt = new Attempt(this, request, record,
        mayReuseConnection(request.method) ? this.attemptOptions.reused : this.attemptOptions.fresh)
    })
  }

  // ---- what an attempt tells (proxy.js)

  // The response begins: its head goes out now, its body as it comes (stored whole with its length
  // under X-Accel-Buffering: yes). Returns the client's response, or null when it goes nowhere.
  onResponse (request, attempt) {
    let res = null
    this.safely(request, () => {
      if (attempt.complete) this.releaseWorker(request)
      else if (request.holding) this.dispatcher.headArrived(request.holding, request)
      if (request.clientGone) return
      request.enter('responding')
      const bodyLength = attempt.stored ? attempt.relay.received : undefined
      if (!this.writeHead(request, attempt.head, { bodyLength })) return
      request.relay = attempt.relay
      res = request.res
    })
    return res
  }

  // Sending the response threw: the balancer's own error, which costs this request.
  onSendError (request, attempt, err) {
    this.internalError(request, err)
  }

  // A 101: the client gets it, and the sockets are joined; the request keeps its open place.
  onUpgrade (request, attempt) {
    this.safely(request, () => {
      const { socket: worker, rest } = attempt.takeSocket()
      const client = request.res.socket
      try {
        this.join(request, attempt.head, client, worker, rest)
      } catch (err) {
        worker.destroy() // no longer the connection's, nor the tunnel's yet: nobody else would
        client?.destroy()
        throw err
      }
    })
  }

  join (request, head, client, worker, rest) {
    this.dispatcher.headArrived(request.holding, request)
    if (request.clientGone) {
      worker.destroy()
      return this.releaseWorker(request)
    }
    request.res.detachSocket(client)
    request.enter('tunnel')
    client.write(headers.switchingHead(head, request.id), 'latin1')
    if (rest.length > 0) client.write(rest)
    if (request.upgrade.length > 0) worker.write(request.upgrade)
    this.tunnelCounts.opened++
    this.tunnels.add(request)
    request.tunnel = new Tunnel(client, worker, {
      idleMs: this.options.tunnelTimeout,
      carried: { toClient: rest.length, toWorker: request.upgrade.length },
      onEnd: (tunnel) => this.safely(request, () => this.onTunnelEnd(request, tunnel))
    })
    // Drop what only the exchange needed: a tunnel may live for hours beside thousands.
    request.attempt = null
    request.head = null
    request.upgrade = NO_BYTES
    request.req = null
    request.res = null
  }

  // Both sides closed: the worker's place goes back.
  onTunnelEnd (request, tunnel) {
    this.tunnels.delete(request)
    this.releaseWorker(request)
    request.enter('done')
    this.tunnelCounts.toWorker += tunnel.toWorker
    this.tunnelCounts.toClient += tunnel.toClient
    this.metrics.tunnelsClosed.inc({ closed_by: tunnel.closedBy })
    if (this.accessLog === null) return
    this.log.info({
      event: 'tunnel',
      id: request.id,
      url: request.url,
      worker: request.record?.name,
      ms: Math.round(tunnel.ms),
      toWorker: tunnel.toWorker,
      toClient: tunnel.toClient,
      closedBy: tunnel.closedBy
    },
      `${request.method} ${request.url} 101 tunnel ${Math.round(tunnel.ms)}ms, ${tunnel.toWorker} B in, ` +
        `${tunnel.toClient} B out, closed by ${tunnel.closedBy}`)
  }

  tunnelBytes () {
    let { toWorker, toClient } = this.tunnelCounts
    for (const request of this.tunnels) { toWorker += request.tunnel.toWorker; toClient += request.tunnel.toClient }
    return { toWorker, toClient }
  }

  // The worker's side is over: whole (failure null), or broken off and the client sees it cut short.
  // Its place is given back; after a break, once the worker says the request ended.
  onWorkerDone (request, attempt, failure) {
    this.safely(request, () => {
      if (failure === null) return this.releaseWorker(request)
      this.account(request, { failure: failureOf(failure).metric })
      request.reason = this.isStopping() && attempt.record.gone ? 'stopping' : failureOf(failure).answer
      request.res.destroy()
      this.letGo(request, attempt, failure)
    })
  }

  // A 103 goes to the client at once, but never to HTTP/1.0 (RFC 9110 §15.2); one Node refuses is dropped.
  onInterim (request, attempt, head) {
    this.safely(request, () => {
      const { req, res } = request
      if (head.statusCode !== 103 || request.clientGone || res.headersSent || req.httpVersion === '1.0') return
      const hints = headers.earlyHints(head)
      if (!hints) return
      try {
        res.writeEarlyHints(hints)
      } catch (err) {
        this.log.debug({ event: 'balancer-hint-dropped', id: request.id, err },
          `${request.method} ${request.url}: a 103 from the worker was not passed on (${err.message})`)
      }
    })
  }

  onAttemptFailed (request, attempt, failure, error) {
    this.safely(request, () => this.attemptFailed(request, attempt.record, attempt, failure, error))
  }

  attemptFailed (request, record, attempt, failure, error) {
    if (isDroppedHandshake(failure, request)) {
      request.reason = 'handshake_dropped'
      this.letGo(request, attempt, null)
      return request.res.destroy()
    }
    const { metric, benchWorker, countsRefusal, reachedWorker } = failureOf(failure)
    this.account(request, { failure: metric })
    if (failure === 'bad_response') this.logBadResponse(request, record, error)
    if (benchWorker) this.dispatcher.bench(record)
    if (countsRefusal) this.noteRefusal(record, error)
    if (reachedWorker) this.letGo(request, attempt, failure)
    else this.releaseWorker(request, { reached: false, failure })
    const decision = decide(failure, request,
      { retries: this.options.retries, clientGone: request.clientGone, stopped: this.isStopped() })
    if (decision.action === 'answer') return this.fail(request, decision.reason)
    countRetry(request, decision.why)
    this.redispatch(request, record, decision.why, error)
  }

  // ---- the worker's place

  // Give the place back, once per attempt (`reached` false: refused); the place before the counts,
  // so that nothing that throws can keep it.
  releaseWorker (request, { reached = true, failure = reached ? null : 'refused' } = {}) {
    const record = request.holding
    if (!record) return
    request.holding = null
    const busyMs = (request.tunnel ? request.tunnel.openedAt : performance.now()) - request.assignedAt
    try {
      this.dispatcher.release(record, request)
    } finally {
      this.account(request, { worker: record, busyMs, failure })
    }
  }

  // Done before the app may be: the attempt closes its connection (the app sees its response close),
  // and the place is given back once the worker says the request ended. Without a pool, at once.
  letGo (request, attempt, failure) {
    const record = attempt.record
    attempt.letGo()
    if (request.holding !== record) return
    const ended = record.abandon(request.exchange, () => this.watchRequest(record, request.exchange))
    if (!ended) return this.releaseWorker(request, { failure })
    request.holding = null
    this.account(request, { worker: record, busyMs: performance.now() - request.assignedAt, failure })
    ended.then(() => this.safely(request, () => {
      if (!record.gone) this.dispatcher.release(record, request)
    }))
  }

  // Node refuses some heads our parser accepts: that is the worker's bad response, not a crash.
  writeHead (request, head, { bodyLength } = {}) {
    try {
      request.res.writeHead(head.statusCode, head.statusMessage || undefined,
        headers.toClient(head, { id: request.id, bodyLength, close: this.isStopping() }))
      return true
    } catch (err) {
      this.badResponse(request, err)
      return false
    }
  }

  // ECONNREFUSED while the supervisor counts it ready (its app closed its listener): benching alone
  // would retry it for ever, so after REFUSALS_BEFORE_REPORT the supervisor replaces it, once.
  noteRefusal (record, error) {
    if (error?.code !== 'ECONNREFUSED') return // our own failure (EMFILE...) says nothing of the worker
    const refusals = record.refused()
    if (refusals < REFUSALS_BEFORE_REPORT || record.refusingReported || record.gone) return
    record.reportedRefusing(this.reportRefusing({ slot: record.slot, pid: record.pid, name: record.name },
      { refusals }))
  }

  badResponse (request, err) {
    const { metric, answer } = ATTEMPT_FAILURES.bad_response
    this.account(request, { failure: metric, record: request.record })
    this.logBadResponse(request, request.record, err)
    this.fail(request, answer)
  }

  logBadResponse (request, record, err) {
    this.log.error({ event: 'balancer-bad-response', id: request.id, worker: record && record.name, err },
      `${request.method} ${request.url}: ${record ? record.name : 'the worker'} sent a malformed response ` +
        `(${err.message}); answered 502`)
  }

  redispatch (request, record, why, error) {
    this.account(request, { redispatch: why })
    this.log.warn({ event: 'balancer-redispatch', id: request.id, worker: record.name, reason: why, err: error },
      `${request.method} ${request.url} redispatched: ${REDISPATCHED[why](record.name)} (${error.message})`)
    request.enter('queued')
    this.dispatcher.requeue(request)
  }

  // The balancer's own answer (replies.js); before the body was read, with a lingering close.
  fail (request, reason) {
    request.reason = reason
    if (request.clientGone) return
    const bodyUnread = request.stage === 'reading' && request.hasBody
    request.enter('responding')
    const linger = bodyUnread && !request.res.headersSent && !request.res.destroyed
    const close = this.isStopping() || bodyUnread
    const status = replyError(request.res, reason, { id: request.id, close, end: !linger })
    if (linger) {
      request.lingering = true
      lingerThenClose(request.req, request.res, { maxBytes: this.lingerBytes })
    }
    if (status >= 500) {
      this.log.warn({
        event: 'balancer-error',
        id: request.id,
        method: request.method,
        url: request.url,
        status,
        reason,
        worker: request.record && request.record.name
      },
        `${request.method} ${request.url} answered ${status} (${reason})`)
    }
  }

  // The data path's error boundary: a throw costs its request (500 or a cut), never the process or
  // the place of a worker still working on it.
  safely (request, fn) {
    try {
      fn()
    } catch (err) {
      this.internalError(request, err)
    }
  }

  internalError (request, err) {
    try {
      this.account(request, { failure: 'internal_error' })
      const { id, method, url } = request
      this.log.error({ event: 'balancer-internal-error', id, method, url, err },
        `${method} ${url}: internal error in the balancer: ${err && err.message}`)
      this.dispatcher.cancel(request)
      if (request.holding) {
        if (request.attempt && request.attempt.record === request.holding) request.attempt.discard()
        else this.releaseWorker(request)
      }
      if (request.res.headersSent) request.res.destroy()
      else this.fail(request, 'internal_error')
    } catch {
      // Nothing more can be done for this request; the process must not follow it.
      try { request.res.destroy() } catch {}
    }
  }

  // Every request ends here. A client leaving early is passed on: the worker's connection closes.
  onClientClose (request) {
    request.relay?.onClose()
    const finished = request.res.writableFinished || request.lingering
    if (!finished) {
      request.clientLeft()
      this.dispatcher.cancel(request) // if it was still queued, it never reaches a worker
      if (request.holding && request.attempt?.record === request.holding) this.letGo(request, request.attempt, null)
      if (!request.reason) {
        request.reason = 'client_aborted'
        this.account(request, { failure: 'client_aborted' })
      }
    }
    request.enter('done')
    // A cut response is logged with its head's status; one the client left is 499, as nginx.
    const cut = !finished && request.res.headersSent && request.reason !== 'client_aborted'
    const status = finished || cut ? request.res.statusCode : 499
    this.account(request, { status, ms: performance.now() - request.arrivedAt })
  }

  // ---- counts

  // Every count, in one place. `outcome`: { worker, busyMs, failure } (a place given back: the slot's
  // counts), { failure, record? } (pool_failures_total), { redispatch }, or { status, ms } (over:
  // queue wait, duration, access log). `request` is null for a client cut off by --send-timeout.
  account (request, outcome) {
    const metrics = this.metrics
    if (outcome.worker) {
      const stats = outcome.worker.stats
      stats.requests++
      stats.busyMs += outcome.busyMs
      // A timeout is the app's slowness, and a local failure the balancer's own: neither is the slot's.
      if (outcome.failure && outcome.failure !== 'timeout' && outcome.failure !== 'local') stats.failures++
      metrics.workerBusy.observe(outcome.busyMs / 1000)
    } else if (outcome.failure) {
      metrics.failures.inc({ reason: outcome.failure })
      if (outcome.record) outcome.record.stats.failures++
    } else if (outcome.redispatch) {
      metrics.redispatches.inc({ reason: outcome.redispatch })
    } else {
      if (request.attempts > 0) metrics.queueWait.observe(request.firstWaitMs / 1000)
      metrics.durationFor(outcome.status).observe(outcome.ms / 1000)
      if (this.accessLog !== null) this.accessLog(request, outcome.status, outcome.ms)
    }
  }
}

// An answer on a handshake's bare socket (refusals, or a worker's non-101); the connection closes.
function responseOn (req, socket) {
  const res = new ServerResponse(req)
  res.shouldKeepAlive = false
  res.assignSocket(socket)
  res.once('finish', () => {
    socket.end()
    socket.resume() // read to the client's close, for at most LINGER_AFTER_ANSWER_MS
    const cut = setTimeout(() => socket.destroy(), LINGER_AFTER_ANSWER_MS).unref()
    socket.once('close', () => clearTimeout(cut))
  })
  return res
}

const NO_BYTES = Buffer.alloc(0)
// How long a handshake's client has, after an answer on its bare socket, to close its side.
const LINGER_AFTER_ANSWER_MS = 5000

// An absolute-form target names the host (RFC 9112 §3.2.2): origin form from here, as nginx; one not
// served is left for arrivalRefusal.
function reconcileTarget (req) {
  if (req.url.startsWith('/')) return
  const target = targetOf(req)
  if (target === null || target.url === req.url) return
  req.url = target.url
  req.headers.host = target.host
}

module.exports = { RequestPipeline, REFUSALS_BEFORE_REPORT }
