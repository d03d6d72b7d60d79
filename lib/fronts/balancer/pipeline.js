'use strict'

// The embedded balancer's request pipeline: everything that happens to one client request, from
// its arrival to its answer. The front adapter (balancer.js) owns the listener, the hooks the
// supervisor calls and the metrics wiring; it hands every request to onRequest() and reads the
// queue (dispatcher.js) and the body budget from here.
//
//   admission   arrivalRefusal(): the one place a request is refused on arrival
//   read        its body, bounded by --max-body and the body budget (buffering.js, body-budget.js)
//   queue       the Dispatcher: one queue for the pool, maxconn per worker, classes, overload
//   dispatch    an attempt on a worker (proxy.js); after a failure, failures.js decides
//   respond     the worker's answer, written through as it comes (proxy.js, relay.js), or the
//               balancer's own (replies.js); a refused upload's connection lingers (lingering.js)
//   tunnel      a WebSocket handshake is a long-lived request like a stream; after the worker's
//               101 its two sockets are joined (tunnel.js) until either side closes

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

// The answer to a body the balancer stopped reading (buffering.js), by the error's code.
const BODY_REFUSALS = {
  [codes.BODY_TOO_LARGE]: 'body_too_large',
  [codes.BODY_OVER_BUDGET]: 'body_budget'
}

// Refusals for a limit of the balancer's (replies.js), rather than for what the request is.
const LIMITS = new Set(['body_too_large', 'body_budget', 'queue_full'])

// What the redispatch line says happened, by failure.
const REDISPATCHED = {
  refused: (name) => `${name} refused it`,
  local: (name) => `the balancer could not connect to ${name} (out of descriptors)`,
  died: (name) => `${name} died holding it`
}

// Connections to one worker refused in a row (none established in between) before the supervisor
// hears that the worker refuses (noteRefusal). With the bench after each refusal, that is two
// seconds or more of refusals: far longer than a dying worker refuses before it is out of rotation.
const REFUSALS_BEFORE_REPORT = 3

class RequestPipeline {
  // options: the balancer's, resolved (options.js). log: its logger.
  // workers: the WorkerSet (workers.js); slots: the SlotStats (slots.js), both the adapter's.
  // metrics(): the BalancerMetrics of now (the adapter replaces them when it joins a pool).
  // isStopping(), isStopped(): the front's phase (the adapter's hooks decide it): stopping, /ping
  //   answers 503 and answers close their connection; stopped, nothing more is taken or retried.
  // reportRefusing(worker, { refusals }): tells the supervisor a worker refuses connections
  //   (FrontContext workerRefusing); false when nobody could be told.
  constructor ({ options, log, workers, slots, metrics, isStopping, isStopped, reportRefusing }) {
    this.options = options
    this.log = log
    this.slots = slots
    this.currentMetrics = metrics
    this.isStopping = isStopping
    this.isStopped = isStopped
    // Asks a worker to say when the request `id` ends (the FrontContext's watchRequest, set by
    // the adapter): false when nobody can be asked (the balancer used alone).
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
      // queue_timeout, queue_shed (overload control) or queue_full (a higher class took its place)
      onTurnedAway: (job, reason) => this.safely(job, () => {
        this.account(job, { failure: reason })
        this.fail(job, reason)
      })
    })
    // Request bodies and responses held over all requests, and their memory given back after
    // a burst.
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
    // What every attempt is given, on a kept-alive connection (a GET or HEAD) or a new one.
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

  // Since when neither bodies nor responses are held (performance.now()), or null while some are.
  emptySince () {
    const bodies = this.bodyBudget.emptySince
    const responses = this.responseBudget.emptySince
    return bodies === null || responses === null ? null : Math.max(bodies, responses)
  }

  get metrics () { return this.currentMetrics() }

  // The front stops: every queued request is answered 503 (stopping); bodies are no longer
  // reclaimed.
  stop () {
    this.reclaimer.stop()
    this.dispatcher.clear((job) => this.safely(job, () => this.fail(job, 'stopping')))
    for (const job of this.tunnels) job.tunnel.close('stop')
  }

  // ---- a request's life -------------------------------------------------------------------
  //
  // arrives (onRequest) → admitted or refused (arrivalRefusal) → body read → queued or assigned
  // (admit) → attempt on a worker (onAssign) → its response sent on as it comes (onResponse),
  // or the attempt failed (onAttemptFailed): redispatched, or answered by the balancer → the
  // worker's side is over (onWorkerDone) → the client's connection is done with it
  // (onClientClose). Every entry point from outside (the HTTP server, timers, the attempts)
  // runs through `safely`, so an unexpected throw costs that one request.

  onRequest (req, res, { expectsContinue = false } = {}) {
    // Pipelined behind a refused upload, on a connection that is closing: never served.
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

  // A WebSocket handshake (server.js routes only those here): a request with no body, long-lived,
  // answered on its bare socket until the worker's 101 makes it a tunnel (onUpgrade).
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

  // A Socket.IO request waits for data (a long poll) or carries a session: long-lived, and sent to
  // the worker holding its session.
  stick (job) {
    job.session = engineRequest(job.url)
    if (job.session === null) return
    job.longLived = true
    if (job.session !== 'open') job.pinned = this.sessions.workerOf(job.session) ?? null
  }

  // `Expect: 100-continue`: the body is invited only once the request is admitted.
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

  // Whether a request may come in, decided in one place, once its head has arrived and before
  // a byte of its body is read, so that a refused body is never buffered. Returns the reason
  // (replies.js) it is refused for, or null. A body whose announced length has no room on the
  // body budget now is refused; one admitted holds its bytes there as they arrive (readBody),
  // and is refused with body_budget when the next ones do not fit.
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

  // A request turned away by one of the balancer's limits is counted in pool_failures_total; one
  // the rules refuse (request-rules.js), or that arrives as the pool stops, is not.
  refuse (job, reason) {
    if (LIMITS.has(reason)) this.account(job, { failure: reason })
    this.fail(job, reason)
  }

  // Called from inside the dispatcher's pump (on behalf of whichever request freed the worker):
  // everything here runs in this request's own boundary.
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

  // ---- what an attempt tells (proxy.js) ----------------------------------------------------

  // The worker's response begins: its head goes to the client at once, and its body as it comes.
  // Its render place is free from now (what follows the head awaits I/O, or is a stream); a
  // response the worker has already sent whole frees the worker first; one stored whole at the
  // app's request (X-Accel-Buffering: yes) goes out with its length.
  // Returns the client's response to send it to, or null when it goes nowhere.
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

  // Sending the response began and threw: the balancer's own error, which costs this request.
  onSendError (job, attempt, err) {
    this.internalError(job, err)
  }

  // The worker switched protocols: the client gets its 101, and the two sockets are joined until
  // either side closes. The request keeps its open place on the worker (it holds no render
  // place) for the tunnel's life.
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
    // What only the exchange needed goes now, Node's request and response with it (the response
    // has let the socket go; the tunnel's end reads only the job's own fields): a tunnel may live
    // for hours beside thousands.
    job.attempt = null
    job.head = null
    job.upgrade = NO_BYTES
    job.req = null
    job.res = null
  }

  // Both sides of a tunnel have closed: its place on the worker goes back, and it is counted.
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

  // Bytes carried by tunnels, open ones included.
  tunnelBytes () {
    let { toWorker, toClient } = this.tunnelCounts
    for (const job of this.tunnels) { toWorker += job.tunnel.toWorker; toClient += job.tunnel.toClient }
    return { toWorker, toClient }
  }

  // The worker's side of a response is over: it sent its last byte (failure null), or the
  // response broke off after it began (or a limit cut it), and the client sees it cut short
  // (never a silently short response). A worker the request no longer needs is given back; when
  // its answer broke off (its app may still be running the request), once the worker says it is
  // done with it.
  onWorkerDone (job, attempt, failure) {
    this.safely(job, () => {
      if (failure === null) return this.release(job)
      this.account(job, { failure: failureOf(failure).metric })
      // Its access-log line says why it was cut: the pool's stop ended its worker, or the failure.
      job.reason = this.isStopping() && attempt.record.gone ? 'stopping' : failureOf(failure).answer
      job.res.destroy()
      this.letGo(job, attempt, failure)
    })
  }

  // A 1xx from the worker (103 Early Hints) goes to the client at once, before the response,
  // unless the client speaks HTTP/1.0, which must never get one (RFC 9110 §15.2). A hint Node
  // refuses to write is dropped: it is only a hint.
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

  // What becomes of the attempt, its worker and the request: the table's row (failures.js).
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

  // ---- the worker's place ------------------------------------------------------------------

  // Give back the worker's place, once per attempt, and let the queue have it (`reached` false:
  // the request never reached the worker, whose connection was refused). The place goes back
  // first and the bookkeeping last: nothing that throws can keep the place.
  release (job, { reached = true, failure = reached ? null : 'refused' } = {}) {
    const record = job.holding
    if (!record) return
    job.holding = null
    // A tunnel's worker was busy with its handshake, not with its life.
    const busyMs = (job.tunnel ? job.tunnel.openedAt : performance.now()) - job.assignedAt
    try {
      this.dispatcher.release(record, job)
    } finally {
      this.account(job, { worker: record, busyMs, failure })
    }
  }

  // The balancer is done with the exchange before the app may be (its client left, a limit ended
  // it, the answer broke or was malformed): the attempt lets go, closing its connection so that
  // the app sees its response close, and the worker's place is given back once the worker says
  // the request has ended (its handler settled), or is gone. Without a pool to ask, at once.
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

  // Passes the worker's status and headers on. Node refuses some that our parser accepts
  // (a status it cannot send, say): that is the worker's bad response, not a crash.
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

  // A worker whose port refuses connections (ECONNREFUSED: nothing listens) while the supervisor
  // counts it ready: its app closed its listener without the runtime seeing it, say. Benching
  // alone would try it again every second for ever, and with every worker like that every
  // request would get a 502. After REFUSALS_BEFORE_REPORT in a row the supervisor hears of it,
  // once per process, and replaces the worker (FrontContext.workerRefusing). A dying worker never
  // gets that far: its exit takes it out of rotation within milliseconds.
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

  // Answer with the balancer's own error for `reason` (see replies.js). An answer given before
  // the body was read closes the connection, after a lingering close (lingering.js): the rest of
  // the body is read and dropped, within bounds, so that the client reads the answer rather than
  // a reset.
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

  // The error boundary of the data path: a throw in the balancer's own code costs the request it
  // happened for (500, or a cut connection once the response has started), never the process,
  // and never the worker's place: a worker still working on the request keeps it until done.
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
      // Nothing more can be done for this request (not even, maybe, a log line); the process
      // must not follow it.
      try { job.res.destroy() } catch {}
    }
  }

  // Every request ends here, answered or abandoned. A client that leaves before its answer is
  // whole is passed on: the worker's connection for its request closes (the app sees its response
  // close, as behind nginx), whether the app renders or streams.
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
    // A response cut after its head went out is logged with that head's status, and its reason;
    // one the client left is 499, as nginx logs it.
    const cut = !finished && job.res.headersSent && job.reason !== 'client_aborted'
    this.account(job, { status: finished || cut ? job.res.statusCode : 499, ms: performance.now() - job.arrivedAt })
  }

  // ---- counts ------------------------------------------------------------------------------

  // Every count the balancer keeps, in one place. `outcome` is one of:
  //   { worker, busyMs, failure }  an attempt gave its worker's place back (or left it to the app
  //                                still running it): the slot's requests, busy time and
  //                                failures (a timeout is the app's slowness, not its failure)
  //   { failure, slot? }           a reason of pool_failures_total (`slot`: counted against it)
  //   { redispatch }               the request goes to another worker, for this reason
  //   { status, ms }               the request is over: its queue wait, duration, access log
  // (`job` is null for a failure no request is left to carry: a client cut off by the send clock.)
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

// An answer written on the bare socket of a WebSocket handshake (Node gives no response for it):
// the balancer's refusals, or the worker's answer other than a 101; the connection closes after.
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
// After an answer on a handshake's bare socket (no HTTP server times it any more), the client has
// this long to close its side.
const LINGER_AFTER_ANSWER_MS = 5000

// A target in absolute form names the host (RFC 9112 §3.2.2): from here on the request is in
// origin form, its Host the target's authority, as nginx passes it on. One the front does not
// serve stays as it came, and arrivalRefusal refuses it.
function reconcileTarget (req) {
  if (req.url.startsWith('/')) return
  const target = targetOf(req)
  if (target === null || target.url === req.url) return
  req.url = target.url
  req.headers.host = target.host
}

module.exports = { RequestPipeline, REFUSALS_BEFORE_REPORT }
