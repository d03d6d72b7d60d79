'use strict'

// The one table of the ways an attempt on a worker fails, and what each becomes: its
// pool_failures_total label, the reason the client is answered with when the request ends there
// (the replies' REASONS give that reason's HTTP status and text), and whether the request may be
// tried on another worker (retry's decide() applies the conditions: method, --retries, a client
// still there, a balancer not stopping).
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
// retry: 'any-method'  any request, up to --retries times (nothing reached the worker)
//        'replayable'  a GET or HEAD, once (running it twice is harmless)
//        'never'

const { REASONS } = require('./replies')

const ATTEMPT_FAILURES = Object.freeze({
  refused: row({ metric: 'worker_refused', answer: 'worker_refused', retry: 'any-method' }),
  // Replayed once and dead again: the client is told both workers died.
  died: row({ metric: 'worker_died', answer: 'worker_died', answerReplayed: 'worker_died_twice', retry: 'replayable' }),
  bad_response: row({ metric: 'bad_response', answer: 'bad_response', retry: 'never' }),
  broken_response: row({ metric: 'worker_broken_response', answer: 'worker_broken_response', retry: 'never' }),
  timeout: row({ metric: 'worker_timeout', answer: 'worker_timeout', retry: 'never' }),
  local: row({ metric: 'out_of_descriptors', answer: 'out_of_descriptors', retry: 'any-method' })
})

// A row with its answer's HTTP status (from replies.js), checked at load: an answer without a
// reply would be a 500 at the worst moment.
function row ({ metric, answer, answerReplayed = answer, retry }) {
  for (const reason of [answer, answerReplayed]) {
    if (!REASONS[reason]) throw new Error(`failures.js: no reply for reason ${reason}`)
  }
  return Object.freeze({ metric, answer, answerReplayed, status: REASONS[answer].status, retry })
}

// The row of `failure`; an unknown failure is a bug in the balancer, not a request's fault.
function failureOf (failure) {
  const known = Object.hasOwn(ATTEMPT_FAILURES, failure) ? ATTEMPT_FAILURES[failure] : null
  if (!known) throw new Error(`unknown attempt failure ${failure}`)
  return known
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

module.exports = { ATTEMPT_FAILURES, FAILURE_REASONS, failureOf }
