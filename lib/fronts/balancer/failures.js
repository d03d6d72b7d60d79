'use strict'

// The one owner of the replay rule (docs/decisions/0007-replay-get-head-once.md): how an attempt on a
// worker fails, whether the request goes to another worker (decide()), and the HAProxy lines that say
// the same (haproxyRetryLines()). Failures: refused (no connection: nothing reached the worker), died
// (connected, closed before a response byte), bad_response, broken_response (broke off midway),
// timeout (--read-timeout, --max-request-time), local (the balancer could not connect: no fds/ports).
// Row fields: retry is 'any-method' (up to --retries), 'replayable' (GET/HEAD, once) or 'never';
// reachedWorker: the worker keeps its place until it ends the request; benchWorker: benched before
// the place is given back; countsRefusal: see pipeline.js noteRefusal; retryOn: HAProxy 2.6's keyword
// (else retryOnNot says why none). Nothing is retried for a gone client or once stopped.

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

// HAProxy 2.6 predefined method ACLs (7.4): `disable-l7-retry` can only name these.
const HAPROXY_METHOD_ACLS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'TRACE'])
for (const method of REPLAYABLE_METHODS) {
  if (!HAPROXY_METHOD_ACLS.has(method)) throw new Error(`failures.js: HAProxy has no METH_${method}`)
}

// A row with its answer's status, checked at load: every answer has a reply, every retry a keyword.
function row ({ answer, answerReplayed = answer, benchWorker = false, countsRefusal = false, ...rest }) {
  for (const reason of [answer, answerReplayed]) {
    if (!REASONS[reason]) throw new Error(`failures.js: no reply for reason ${reason}`)
  }
  if ((rest.retry === 'never') !== (rest.retryOn === null) || (rest.retryOn === null && !rest.retryOnNot)) {
    throw new Error(`failures.js: ${rest.metric}: a retried failure needs a retry-on keyword, another why not`)
  }
  return Object.freeze({ ...rest, answer, answerReplayed, status: REASONS[answer].status, benchWorker, countsRefusal })
}

function failureOf (failure) {
  const known = Object.hasOwn(ATTEMPT_FAILURES, failure) ? ATTEMPT_FAILURES[failure] : null
  if (!known) throw new Error(`unknown attempt failure ${failure}`)
  return known
}

// Redispatch after a failed attempt, or answer. request: { method, redispatches, replayed }.
// Returns { action: 'redispatch', why: failure } or { action: 'answer', reason }.
function decide (failure, request, { retries, clientGone, stopped }) {
  const { retry, answer, answerReplayed } = failureOf(failure)
  const mayRetry = !clientGone && !stopped
  if (retry === 'any-method' && mayRetry && request.redispatches < retries) {
    return { action: 'redispatch', why: failure }
  }
  if (retry === 'replayable' && mayRetry && REPLAYABLE_METHODS.has(request.method) && !request.replayed) {
    return { action: 'redispatch', why: failure }
  }
  return { action: 'answer', reason: request.replayed ? answerReplayed : answer }
}

// Counts decide()'s redispatch against --retries, or as the one replay.
function countRetry (request, failure) {
  if (failureOf(failure).retry === 'any-method') request.redispatches++
  else request.replayed = true
}

// An app refuses a WebSocket handshake by closing it unanswered (ws noServer, Engine.IO): a 'died'
// handshake is passed on as a close, not a worker's failure, not replayed, not counted.
function isDroppedHandshake (failure, request) {
  return failure === 'died' && request.upgrade !== null
}

// A reused connection may be closed as the request is written, unknowable whether it was read: only
// replayable methods may take that risk; others get a connection of their own.
function mayReuseConnection (method) {
  return REPLAYABLE_METHODS.has(method)
}

// ---- the rule in HAProxy 2.6's terms (lib/generate/haproxy.js, edge.js). Differences:
//   - One budget: HAProxy counts a replay as a retry, so `retries 1` (a GET that kills workers costs
//     two, as here; test/generate/haproxy-retries.test.js), and a refusal is retried once only.
//   - A replay needs the request in one buffer (tune.bufsize, 16 KB by default).
//   - Streams backends replay nothing (`replays: false`): an empty response there is most often a
//     refused WebSocket handshake. The edge sends no response-timeout: its hosts own the time.
const HAPROXY_RETRIES = 1

function retryOnKeywords ({ replays }) {
  const retried = Object.values(ATTEMPT_FAILURES)
    .filter(({ retry }) => retry === 'any-method' || (replays && retry === 'replayable'))
  return [...new Set(retried.map(({ retryOn }) => retryOn))]
}

// 'GET and HEAD', for a comment.
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

// Every pool_failures_total reason the balancer counts (the metric's help text is made from it);
// the pool counts out_of_descriptors itself.
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
