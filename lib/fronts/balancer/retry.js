'use strict'

// The one place that decides what happens to a request after an attempt on a worker failed:
// send it to another worker, or answer the client. A pure function of what is known, so that
// every rule can be read (and tested) here.
//
// The ways an attempt fails (refused, died, bad_response, broken_response, timeout) and what
// each may become are one table: ./failures.js.
//
// The rules, against HAProxy's `retry-on` (HAProxy 2.6 manual, "retry-on"):
//   refused          any method, up to --retries times: `retry-on conn-failure`.
//   died             GET and HEAD only, once: `retry-on empty-response` with
//                    `http-request disable-l7-retry if !METH_GET !METH_HEAD`. A request that
//                    may have reached a worker is replayed only if running it twice is harmless,
//                    and only once, so a request that kills every worker it reaches costs two.
//   bad_response     never: the worker did answer; its answer was unusable (HAProxy: 502, no
//                    retry unless `retry-on junk-response`, which we do not do).
//   broken_response  never: part of an answer exists.
//   timeout          never: the worker is still working on it (`retry-on response-timeout`
//                    would run it twice at once).
// Nothing is retried for a client that has gone, or once the balancer is stopping.

const { failureOf } = require('./failures')

const REPLAYABLE_METHODS = new Set(['GET', 'HEAD'])

// failure: a key of failures.js ATTEMPT_FAILURES. request: { method, redispatches, replayed }.
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

// Whether a request may go out on a kept-alive connection. A reused connection can be closed by
// the worker at the moment the request is written, and then nobody can tell whether the worker
// read it: that is harmless to retry only for a replayable method. Any other request opens a
// connection of its own, so a failure to connect is the only failure that allows a retry.
function mayReuseConnection (method) {
  return REPLAYABLE_METHODS.has(method)
}

module.exports = { decide, mayReuseConnection, REPLAYABLE_METHODS }
