'use strict'

// The one owner of the replay rule: the ways an attempt on a worker fails, what each becomes,
// whether the request is tried on another worker (decide()), and what the generated HAProxy
// configs say of it (haproxyRetryLines()). A change to the rule is a change to the table below.
//
//   refused          the connection to the worker failed before it was established: no byte of
//                    the request can have reached the worker.
//   died             the connection was established (the request may have been read) and
//                    closed or reset before any byte of a response came back.
//   bad_response     the worker answered, with bytes that are not a valid HTTP/1.1 response.
//   broken_response  the response started and broke off midway.
//   timeout          no byte within --read-timeout, or past --max-request-time.
//   local            the balancer itself could not connect (out of file descriptors, or of
//                    source ports): nothing reached the worker, and nothing is the worker's.
//
// Each row:
//   metric          its pool_failures_total label
//   answer          the reason the client is answered with (replies.js REASONS: status, text);
//                   answerReplayed, after a replay that failed again
//   retry           'any-method': any request, up to --retries times (nothing reached the worker)
//                   'replayable': a GET or HEAD (REPLAYABLE_METHODS), once: running it twice is
//                   harmless, and a request that kills every worker it reaches costs two
//                   'never'
//   reachedWorker   false: the worker's place is given back at once; true: the worker may still
//                   run the request, and keeps its place until it says the request ended
//   benchWorker     the worker is benched (before its place is given back, so that the release
//                   cannot hand it the next request)
//   countsRefusal   a refusal in a row of them (pipeline.js noteRefusal)
//   retryOn         HAProxy's `retry-on` keyword for it (HAProxy 2.6 manual, "retry-on"), or null
//                   and retryOnNot, why no keyword is used
// Nothing is retried for a client that has gone, or once the balancer is stopping.

const { REASONS } = require('./replies')

const ATTEMPT_FAILURES = Object.freeze({
  refused: row({
    metric: 'worker_refused',
    answer: 'worker_refused',
    retry: 'any-method',
    reachedWorker: false,
    benchWorker: true,
    countsRefusal: true,
    retryOn: 'conn-failure'
  }),
  died: row({
    metric: 'worker_died',
    answer: 'worker_died',
    answerReplayed: 'worker_died_twice', // replayed once and dead again: both workers died
    retry: 'replayable',
    reachedWorker: true,
    benchWorker: true,
    retryOn: 'empty-response'
  }),
  bad_response: row({
    metric: 'bad_response',
    answer: 'bad_response',
    retry: 'never',
    reachedWorker: true,
    retryOn: null,
    retryOnNot: 'not junk-response: the worker did answer; its answer was unusable (HAProxy: a 502)'
  }),
  broken_response: row({
    metric: 'worker_broken_response',
    answer: 'worker_broken_response',
    retry: 'never',
    reachedWorker: true,
    retryOn: null,
    retryOnNot: 'part of an answer exists, and has reached the client'
  }),
  timeout: row({
    metric: 'worker_timeout',
    answer: 'worker_timeout',
    retry: 'never',
    reachedWorker: true,
    retryOn: null,
    retryOnNot: 'not response-timeout: the worker is still running it, which would run it twice at once'
  }),
  local: row({
    metric: 'out_of_descriptors',
    answer: 'out_of_descriptors',
    retry: 'any-method',
    reachedWorker: false,
    retryOn: 'conn-failure' // HAProxy's own failures to connect are connection failures too
  })
})

const REPLAYABLE_METHODS = new Set(['GET', 'HEAD'])

// HAProxy's predefined method ACLs (HAProxy 2.6 manual, 7.4): a replayable method must have one
// for `disable-l7-retry` to name it.
const HAPROXY_METHOD_ACLS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'TRACE'])
for (const method of REPLAYABLE_METHODS) {
  if (!HAPROXY_METHOD_ACLS.has(method)) throw new Error(`failures.js: HAProxy has no METH_${method}`)
}

// A row with its answer's HTTP status (from replies.js), checked at load: an answer without a
// reply would be a 500 at the worst moment, a retried failure without a keyword a rule that
// HAProxy does not follow.
function row ({ answer, answerReplayed = answer, benchWorker = false, countsRefusal = false, ...rest }) {
  for (const reason of [answer, answerReplayed]) {
    if (!REASONS[reason]) throw new Error(`failures.js: no reply for reason ${reason}`)
  }
  if ((rest.retry === 'never') !== (rest.retryOn === null) || (rest.retryOn === null && !rest.retryOnNot)) {
    throw new Error(`failures.js: ${rest.metric}: a retried failure needs a retry-on keyword, another why not`)
  }
  return Object.freeze({ ...rest, answer, answerReplayed, status: REASONS[answer].status, benchWorker, countsRefusal })
}

// The row of `failure`; an unknown failure is a bug in the balancer, not a request's fault.
function failureOf (failure) {
  const known = Object.hasOwn(ATTEMPT_FAILURES, failure) ? ATTEMPT_FAILURES[failure] : null
  if (!known) throw new Error(`unknown attempt failure ${failure}`)
  return known
}

// What happens to a request after an attempt on a worker failed: send it to another worker, or
// answer the client. failure: a key of ATTEMPT_FAILURES. request: { method, redispatches, replayed }.
// context: { retries, clientGone, stopping }.
// Returns { action: 'redispatch', why } (why: the failure) or { action: 'answer', reason }.
function decide (failure, request, { retries, clientGone, stopping }) {
  const { retry, answer, answerReplayed } = failureOf(failure)
  const mayRetry = !clientGone && !stopping
  if (retry === 'any-method' && mayRetry && request.redispatches < retries) {
    return { action: 'redispatch', why: failure }
  }
  if (retry === 'replayable' && mayRetry && REPLAYABLE_METHODS.has(request.method) && !request.replayed) {
    return { action: 'redispatch', why: failure }
  }
  return { action: 'answer', reason: request.replayed ? answerReplayed : answer }
}

// Counts a redispatch that decide() chose where decide() reads it next time: against --retries,
// or as the one replay.
function countRetry (request, failure) {
  if (failureOf(failure).retry === 'any-method') request.redispatches++
  else request.replayed = true
}

// An app closes a WebSocket handshake it does not serve without a word (ws's noServer, Engine.IO's
// destroyUpgrade): a 'died' handshake is its answer, passed on as a close, no worker's failure,
// and nothing to replay. It has no row: it is not counted in pool_failures_total.
function isDroppedHandshake (failure, request) {
  return failure === 'died' && request.upgrade !== null
}

// Whether a request may go out on a kept-alive connection. A reused connection can be closed by
// the worker at the moment the request is written, and then nobody can tell whether the worker
// read it: that is harmless to retry only for a replayable method. Any other request opens a
// connection of its own, so a failure to connect is the only failure that allows a retry.
function mayReuseConnection (method) {
  return REPLAYABLE_METHODS.has(method)
}

// ---- the rule in HAProxy's terms (lib/generate/haproxy.js, edge.js) -------------------------
//
// HAProxy 2.6 follows the table as far as it can, with `option redispatch 1` (each retry on
// another server), `retry-on` the keywords of the retried rows, and `disable-l7-retry` for all but
// the replayable methods. Where it differs, and why:
//   - One budget: HAProxy counts a replay as a retry. The pool's backend has `retries 1`
//     (HAPROXY_RETRIES), so that a GET that kills every worker it reaches costs two workers, as
//     here; with 3 it cost four (measured by hand; test/generate/haproxy-retries.test.js). The price: a refused
//     connection is retried once, not --retries times. The edge's `retries` (its --retries) is
//     one budget for both as well.
//   - A replay needs the whole request in one buffer (tune.bufsize, 16 KB by default): a larger
//     request is not replayed.
//   - The streams backends replay nothing (`replays: false`: conn-failure only): a socket or a
//     stream may have been acted on, and an empty response there is most often an app refusing a
//     WebSocket handshake (isDroppedHandshake). The embedded balancer tells a handshake from a
//     stream, and replays a stream's GET whose worker died before answering, as any other GET.
//   - The edge sends no response-timeout either: its hosts own the request's time.
const HAPROXY_RETRIES = 1

// HAProxy's `retry-on` keywords, in the table's order: those of the failures retried for any
// method, and with `replays` those of the replayable ones.
function retryOnKeywords ({ replays }) {
  const retried = Object.values(ATTEMPT_FAILURES)
    .filter(({ retry }) => retry === 'any-method' || (replays && retry === 'replayable'))
  return [...new Set(retried.map(({ retryOn }) => retryOn))]
}

// The replayable methods in words, for a comment: 'GET and HEAD'.
function replayableInWords () {
  const methods = [...REPLAYABLE_METHODS]
  return methods.length > 1 ? `${methods.slice(0, -1).join(', ')} and ${methods.at(-1)}` : methods[0]
}

// A backend's retry lines. `comment`: the generator's own lines, just before `retry-on`.
function haproxyRetryLines ({ retries = HAPROXY_RETRIES, replays, comment = [] }) {
  const notReplayable = [...REPLAYABLE_METHODS].map((method) => `!METH_${method}`).join(' ')
  return [
    '    option redispatch 1',
    `    retries ${retries}`,
    ...comment,
    `    retry-on ${retryOnKeywords({ replays }).join(' ')}`,
    ...(replays ? [`    http-request disable-l7-retry if ${notReplayable}`] : [])
  ]
}

// Every reason the balancer counts in pool_failures_total, the pool's one list of them (its
// metric's help text is made from it): a request turned away before a worker had it (the
// queue's, the body's limits), an attempt that failed (the table above), and the client's or the
// balancer's own end of an exchange. The pool counts out_of_descriptors itself.
const FAILURE_REASONS = Object.freeze([
  'queue_timeout', 'queue_full', 'queue_shed', 'body_too_large', 'body_budget',
  ...new Set(Object.values(ATTEMPT_FAILURES).map((f) => f.metric).filter((m) => m !== 'out_of_descriptors')),
  'client_aborted', 'client_send_timeout', 'internal_error'
])

module.exports = {
  ATTEMPT_FAILURES,
  FAILURE_REASONS,
  REPLAYABLE_METHODS,
  HAPROXY_RETRIES,
  failureOf,
  decide,
  countRetry,
  isDroppedHandshake,
  mayReuseConnection,
  retryOnKeywords,
  replayableInWords,
  haproxyRetryLines
}
