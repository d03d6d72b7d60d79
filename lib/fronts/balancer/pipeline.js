'use strict'

// The embedded balancer's request pipeline: one client request from arrival to answer. The adapter
// (balancer.js) owns the listener, the supervisor's hooks and metrics, and hands requests to
// onRequest(). Stages: admission (arrivalRefusal), body (buffering.js), queue (dispatcher.js),
// attempt (proxy.js; failures.js after a failure), answer (relay.js or replies.js; lingering.js),
// tunnel (tunnel.js, after a WebSocket 101).

const { Dispatcher } = require('./dispatcher')
const { Attempt } = require('./proxy')
const { SendClock } = require('./relay')
const { RequestClock } = require('./request-clock')
const {
  failureOf, ATTEMPT_FAILURES, decide, countRetry, isDroppedHandshake, mayReuseConnection
} = require('./failures')
const { refusalOf, targetOf } = require('./request-rules')
const { readBody, hasBody, declaredLength, declaredTooLarge } = require('./buffering')
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
  constructor ({ options, log, workers, slots, metrics, isStopping, isStopped, reportRefusing }) {
    this.options = options
    this.log = log
    this.slots = slots
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
      onAssign: (job, record) => this.onAssign(job, record),
      onError: (err) => this.log.error({ event: 'balancer-internal-error', err },
        `internal error in the balancer's queue: ${err && err.message}`),
      onTurnedAway: (job, reason) => this.safely(job, () => {
        this.account(job, { failure: reason })
        this.fail(job, reason)
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
    const sendClock = options.sendTimeout > 0
      ? new SendClock(options.sendTimeout, () => this.account(null, { failure: 'client_send_timeout' }))
      : null
    const requestClock = RequestClock.of({ read: options.readTimeout, total: options.maxRequestTime })
    const attempt = {
      maxResponseBuffer: options.maxResponseBuffer,
      budget: this.responseBudget,
      sendClock,
      requestClock
    }
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
    this.dispatcher.clear((job) => this.safely(job, () => this.fail(job, 'stopping')))
    for (const job of this.tunnels) job.tunnel.close('stop')
  }

  // ---- a request's life: onRequest → arrivalRefusal → body → admit → onAssign → onResponse or
  // onAttemptFailed → onWorkerDone → onClientClose. Every outside entry runs through `safely`.

  onRequest (req, res, { expectsContinue = false } = {}) {
    if (isLingering(req.socket)) return
    reconcileTarget(req)
    if (req.url === this.options.pingPath || req.url.startsWith(this.options.pingPath + '?')) {
      return replyPing(req, res, { stopping: this.isStopping() })
    }
    const job = new BalancedRequest(req, res)
    job.id = headers.requestId(req, trustsPeerOf(req.socket, this.options.isTrustedPeer))
    job.longLived = isLongLived(req, this.options.longLivedRoutes)
    this.stick(job)
    res.once('close', () => this.safely(job, () => this.onClientClose(job)))
    this.safely(job, () => this.accept(job, expectsContinue))
  }

  // A WebSocket handshake: long-lived, no body, answered on its bare socket until a 101.
  onHandshake (req, socket, head) {
    socket.on('error', () => {}) // Node took its own listeners off; the response or tunnel has others
    reconcileTarget(req)
    const res = responseOn(req, socket)
    const job = new BalancedRequest(req, res)
    job.id = headers.requestId(req, trustsPeerOf(socket, this.options.isTrustedPeer))
    job.longLived = true
    job.upgrade = head
    this.stick(job)
    res.once('close', () => this.safely(job, () => this.onClientClose(job)))
    this.safely(job, () => this.accept(job, false))
  }

  // A Socket.IO request is long-lived, and goes to the worker holding its session.
  stick (job) {
    job.session = engineRequest(job.url)
    if (job.session === null) return
    job.longLived = true
    if (job.session !== 'open') job.pinned = this.sessions.workerOf(job.session) ?? null
  }

  onCheckContinue (req, res) {
    this.onRequest(req, res, { expectsContinue: true })
  }

  accept (job, expectsContinue) {
    const refusal = this.arrivalRefusal(job)
    if (refusal) return this.refuse(job, refusal)
    if (!hasBody(job.req)) return this.admit(job)
    if (expectsContinue) job.res.writeContinue()
    readBody(job.req, { limit: this.options.maxBody, hold: job.bodyHold }).then((body) => {
      job.body = body
      this.safely(job, () => this.admit(job))
    }, (err) => this.safely(job, () => {
      const reason = BODY_REFUSALS[err.code]
      if (reason) this.refuse(job, reason)
      // CLIENT_ABORTED: nobody is left to answer; onClientClose accounts for it.
    }))
  }

  // The one arrival decision, before a byte of the body is read: the replies.js reason, or null. A
  // body announcing more than the body budget's room now is refused.
  arrivalRefusal (job) {
    const { req } = job
    if (this.isStopped()) return 'stopping'
    const rule = refusalOf(req)
    if (rule) return rule
    if (!hasBody(req)) return null // the queue decides as it takes it (admit)
    if (declaredTooLarge(req, this.options.maxBody)) return 'body_too_large'
    if (!this.dispatcher.wouldTake(job)) return 'queue_full'
    job.bodyHold = this.bodyBudget.admit(declaredLength(req) ?? 0)
    return job.bodyHold ? null : 'body_budget'
  }

  admit (job) {
    if (job.clientGone) return
    if (this.isStopped()) return this.fail(job, 'stopping')
    job.enter('queued')
    if (this.dispatcher.submit(job) === 'full') this.refuse(job, 'queue_full')
  }

  // Only the balancer's limits count in pool_failures_total, not rules or stopping.
  refuse (job, reason) {
    if (LIMITS.has(reason)) this.account(job, { failure: reason })
    this.fail(job, reason)
  }

  // Runs inside the dispatcher's pump, for whichever request freed the worker: hence `safely`.
  onAssign (job, record) {
    job.holding = record
    job.assignedAt = performance.now()
    this.safely(job, () => {
      if (job.attempts === 0) job.firstWaitMs = job.queueMs
      job.attempts++
      job.enter('on-worker')
      job.record = record
      job.exchange = headers.exchangeId()
      const trusted = trustsPeerOf(job.req.socket, this.options.isTrustedPeer)
      job.head ??= headers.requestHead(job.req, { id: job.id, body: job.body, trusted, upgrade: job.upgrade !== null })
      job.attempt = new Attempt(this, job, record,
        mayReuseConnection(job.method) ? this.attemptOptions.reused : this.attemptOptions.fresh)
    })
  }

  // ---- what an attempt tells (proxy.js)

  // The response begins: its head goes out now, its body as it comes (stored whole with its length
  // under X-Accel-Buffering: yes). Returns the client's response, or null when it goes nowhere.
  onResponse (job, attempt) {
    let res = null
    this.safely(job, () => {
      if (attempt.complete) this.release(job)
      else if (job.holding) this.dispatcher.headArrived(job.holding, job)
      if (job.clientGone) return
      job.enter('responding')
      const bodyLength = attempt.stored ? attempt.relay.received : undefined
      if (!this.writeHead(job, attempt.head, { bodyLength })) return
      job.relay = attempt.relay
      res = job.res
    })
    return res
  }

  // Sending the response threw: the balancer's own error, which costs this request.
  onSendError (job, attempt, err) {
    this.internalError(job, err)
  }

  // A 101: the client gets it, and the sockets are joined; the request keeps its open place.
  onUpgrade (job, attempt) {
    this.safely(job, () => {
      const { socket: worker, rest } = attempt.takeSocket()
      const client = job.res.socket
      try {
        this.join(job, attempt.head, client, worker, rest)
      } catch (err) {
        worker.destroy() // no longer the connection's, nor the tunnel's yet: nobody else would
        client?.destroy()
        throw err
      }
    })
  }

  join (job, head, client, worker, rest) {
    this.dispatcher.headArrived(job.holding, job)
    if (job.clientGone) {
      worker.destroy()
      return this.release(job)
    }
    job.res.detachSocket(client)
    job.enter('tunnel')
    client.write(headers.switchingHead(head, job.id), 'latin1')
    if (rest.length > 0) client.write(rest)
    if (job.upgrade.length > 0) worker.write(job.upgrade)
    this.tunnelCounts.opened++
    this.tunnels.add(job)
    job.tunnel = new Tunnel(client, worker, {
      idleMs: this.options.tunnelTimeout,
      carried: { toClient: rest.length, toWorker: job.upgrade.length },
      onEnd: (tunnel) => this.safely(job, () => this.onTunnelEnd(job, tunnel))
    })
    // Drop what only the exchange needed: a tunnel may live for hours beside thousands.
    job.attempt = null
    job.head = null
    job.upgrade = NO_BYTES
    job.req = null
    job.res = null
  }

  // Both sides closed: the worker's place goes back.
  onTunnelEnd (job, tunnel) {
    this.tunnels.delete(job)
    this.release(job)
    job.enter('done')
    this.tunnelCounts.toWorker += tunnel.toWorker
    this.tunnelCounts.toClient += tunnel.toClient
    this.metrics.tunnelsClosed.inc({ closed_by: tunnel.closedBy })
    if (this.accessLog === null) return
    this.log.info({
      event: 'tunnel',
      id: job.id,
      url: job.url,
      worker: job.record?.name,
      ms: Math.round(tunnel.ms),
      toWorker: tunnel.toWorker,
      toClient: tunnel.toClient,
      closedBy: tunnel.closedBy
    },
      `${job.method} ${job.url} 101 tunnel ${Math.round(tunnel.ms)}ms, ${tunnel.toWorker} B in, ${tunnel.toClient} B ` +
        `out, closed by ${tunnel.closedBy}`)
  }

  tunnelBytes () {
    let { toWorker, toClient } = this.tunnelCounts
    for (const job of this.tunnels) { toWorker += job.tunnel.toWorker; toClient += job.tunnel.toClient }
    return { toWorker, toClient }
  }

  // The worker's side is over: whole (failure null), or broken off and the client sees it cut short.
  // Its place is given back; after a break, once the worker says the request ended.
  onWorkerDone (job, attempt, failure) {
    this.safely(job, () => {
      if (failure === null) return this.release(job)
      this.account(job, { failure: failureOf(failure).metric })
      job.reason = this.isStopping() && attempt.record.gone ? 'stopping' : failureOf(failure).answer
      job.res.destroy()
      this.letGo(job, attempt, failure)
    })
  }

  // A 103 goes to the client at once, but never to HTTP/1.0 (RFC 9110 §15.2); one Node refuses is dropped.
  onInterim (job, attempt, head) {
    this.safely(job, () => {
      const { req, res } = job
      if (head.statusCode !== 103 || job.clientGone || res.headersSent || req.httpVersion === '1.0') return
      const hints = headers.earlyHints(head)
      if (!hints) return
      try {
        res.writeEarlyHints(hints)
      } catch (err) {
        this.log.debug({ event: 'balancer-hint-dropped', id: job.id, err },
          `${job.method} ${job.url}: a 103 from the worker was not passed on (${err.message})`)
      }
    })
  }

  onAttemptFailed (job, attempt, failure, error) {
    this.safely(job, () => this.attemptFailed(job, attempt.record, attempt, failure, error))
  }

  attemptFailed (job, record, attempt, failure, error) {
    if (isDroppedHandshake(failure, job)) {
      job.reason = 'handshake_dropped'
      this.letGo(job, attempt, null)
      return job.res.destroy()
    }
    const { metric, benchWorker, countsRefusal, reachedWorker } = failureOf(failure)
    this.account(job, { failure: metric })
    if (failure === 'bad_response') this.logBadResponse(job, record, error)
    if (benchWorker) this.dispatcher.bench(record)
    if (countsRefusal) this.noteRefusal(record, error)
    if (reachedWorker) this.letGo(job, attempt, failure)
    else this.release(job, { reached: false, failure })
    const decision = decide(failure, job,
      { retries: this.options.retries, clientGone: job.clientGone, stopping: this.isStopped() })
    if (decision.action === 'answer') return this.fail(job, decision.reason)
    countRetry(job, decision.why)
    this.redispatch(job, record, decision.why, error)
  }

  // ---- the worker's place

  // Give the place back, once per attempt (`reached` false: refused); the place before the counts,
  // so that nothing that throws can keep it.
  release (job, { reached = true, failure = reached ? null : 'refused' } = {}) {
    const record = job.holding
    if (!record) return
    job.holding = null
    const busyMs = (job.tunnel ? job.tunnel.openedAt : performance.now()) - job.assignedAt
    try {
      this.dispatcher.release(record, job)
    } finally {
      this.account(job, { worker: record, busyMs, failure })
    }
  }

  // Done before the app may be: the attempt closes its connection (the app sees its response close),
  // and the place is given back once the worker says the request ended. Without a pool, at once.
  letGo (job, attempt, failure) {
    const record = attempt.record
    attempt.letGo()
    if (job.holding !== record) return
    const ended = record.abandon(job.exchange, () => this.watchRequest(record, job.exchange))
    if (!ended) return this.release(job, { failure })
    job.holding = null
    this.account(job, { worker: record, busyMs: performance.now() - job.assignedAt, failure })
    ended.then(() => this.safely(job, () => {
      if (!record.gone) this.dispatcher.release(record, job)
    }))
  }

  // Node refuses some heads our parser accepts: that is the worker's bad response, not a crash.
  writeHead (job, head, { bodyLength } = {}) {
    try {
      job.res.writeHead(head.statusCode, head.statusMessage || undefined,
        headers.toClient(head, { id: job.id, bodyLength, close: this.isStopping() }))
      return true
    } catch (err) {
      this.badResponse(job, err)
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

  badResponse (job, err) {
    const { metric, answer } = ATTEMPT_FAILURES.bad_response
    this.account(job, { failure: metric, slot: job.record })
    this.logBadResponse(job, job.record, err)
    this.fail(job, answer)
  }

  logBadResponse (job, record, err) {
    this.log.error({ event: 'balancer-bad-response', id: job.id, worker: record && record.name, err },
      `${job.method} ${job.url}: ${record ? record.name : 'the worker'} sent a malformed response (${err.message}); ` +
        'answered 502')
  }

  redispatch (job, record, why, error) {
    this.account(job, { redispatch: why })
    this.log.warn({ event: 'balancer-redispatch', id: job.id, worker: record.name, reason: why, err: error },
      `${job.method} ${job.url} redispatched: ${REDISPATCHED[why](record.name)} (${error.message})`)
    job.enter('queued')
    this.dispatcher.requeue(job)
  }

  // The balancer's own answer (replies.js); before the body was read, with a lingering close.
  fail (job, reason) {
    job.reason = reason
    if (job.clientGone) return
    const bodyUnread = job.stage === 'reading' && hasBody(job.req)
    job.enter('responding')
    const linger = bodyUnread && !job.res.headersSent && !job.res.destroyed
    const status = replyError(job.res, reason, { id: job.id, close: this.isStopping() || bodyUnread, end: !linger })
    if (linger) {
      job.lingering = true
      lingerThenClose(job.req, job.res, { maxBytes: this.lingerBytes })
    }
    if (status >= 500) {
      this.log.warn({
        event: 'balancer-error',
        id: job.id,
        method: job.method,
        url: job.url,
        status,
        reason,
        worker: job.record && job.record.name
      },
        `${job.method} ${job.url} answered ${status} (${reason})`)
    }
  }

  // The data path's error boundary: a throw costs its request (500 or a cut), never the process or
  // the place of a worker still working on it.
  safely (job, fn) {
    try {
      fn()
    } catch (err) {
      this.internalError(job, err)
    }
  }

  internalError (job, err) {
    try {
      this.account(job, { failure: 'internal_error' })
      this.log.error({ event: 'balancer-internal-error', id: job.id, method: job.method, url: job.url, err },
        `${job.method} ${job.url}: internal error in the balancer: ${err && err.message}`)
      this.dispatcher.cancel(job)
      if (job.holding) {
        if (job.attempt && job.attempt.record === job.holding) job.attempt.discard()
        else this.release(job)
      }
      if (job.res.headersSent) job.res.destroy()
      else this.fail(job, 'internal_error')
    } catch {
      // Nothing more can be done for this request; the process must not follow it.
      try { job.res.destroy() } catch {}
    }
  }

  // Every request ends here. A client leaving early is passed on: the worker's connection closes.
  onClientClose (job) {
    job.relay?.onClose()
    const finished = job.res.writableFinished || job.lingering
    if (!finished) {
      job.clientLeft()
      this.dispatcher.cancel(job) // if it was still queued, it never reaches a worker
      if (job.holding && job.attempt?.record === job.holding) this.letGo(job, job.attempt, null)
      if (!job.reason) {
        job.reason = 'client_aborted'
        this.account(job, { failure: 'client_aborted' })
      }
    }
    job.enter('done')
    // A cut response is logged with its head's status; one the client left is 499, as nginx.
    const cut = !finished && job.res.headersSent && job.reason !== 'client_aborted'
    this.account(job, { status: finished || cut ? job.res.statusCode : 499, ms: performance.now() - job.arrivedAt })
  }

  // ---- counts

  // Every count, in one place. `outcome`: { worker, busyMs, failure } (a place given back: the slot's
  // counts), { failure, slot? } (pool_failures_total), { redispatch }, or { status, ms } (over:
  // queue wait, duration, access log). `job` is null for a client cut off by the send clock.
  account (job, outcome) {
    const metrics = this.metrics
    if (outcome.worker) {
      const slot = this.slots.of(outcome.worker.slot, outcome.worker.name)
      slot.requests++
      slot.busyMs += outcome.busyMs
      // A timeout is the app's slowness, and a local failure the balancer's own: neither is the slot's.
      if (outcome.failure && outcome.failure !== 'timeout' && outcome.failure !== 'local') slot.failures++
      metrics.workerBusy.observe(outcome.busyMs / 1000)
    } else if (outcome.failure) {
      metrics.failures.inc({ reason: outcome.failure })
      if (outcome.slot) this.slots.of(outcome.slot.slot, outcome.slot.name).failures++
    } else if (outcome.redispatch) {
      metrics.redispatches.inc({ reason: outcome.redispatch })
    } else {
      if (job.attempts > 0) metrics.queueWait.observe(job.firstWaitMs / 1000)
      metrics.durationFor(outcome.status).observe(outcome.ms / 1000)
      if (this.accessLog !== null) this.accessLog(job, outcome.status, outcome.ms)
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
