'use strict'

// failures.js decide(), the one retry policy, row by row: every way an attempt fails (its table),
// for a replayable and a non-replayable method, with the client gone, the balancer stopped,
// the retries used up, a request already replayed. Pure: no socket, no worker.

const t = require('tap')
const {
  ATTEMPT_FAILURES, failureOf, decide, countRetry, isDroppedHandshake, mayReuseConnection
} = require('../../../lib/fronts/balancer/failures')
const { REASONS } = require('../../../lib/fronts/balancer/replies')

const fresh = (method, more = {}) => ({ method, redispatches: 0, replayed: false, ...more })
const serving = { retries: 3, clientGone: false, stopped: false }
const redispatch = (why) => ({ action: 'redispatch', why })
const answer = (reason) => ({ action: 'answer', reason })

t.test('the table: each failure has a metric label, an answer with its HTTP status, a retry rule, what ' +
  'becomes of its worker', async (t) => {
  t.same(Object.keys(ATTEMPT_FAILURES).sort(),
    ['bad_response', 'broken_response', 'died', 'local', 'refused', 'timeout'])
  const nothingReached = { reachedWorker: false, retry: 'any-method', retryOn: 'conn-failure' }
  const neverRetried = { reachedWorker: true, benchWorker: false, countsRefusal: false, retry: 'never', retryOn: null }
  const expected = {
    refused: {
      metric: 'worker_refused',
      answer: 'worker_refused',
      status: 502,
      ...nothingReached,
      benchWorker: true,
      countsRefusal: true
    },
    died: {
      metric: 'worker_died',
      answer: 'worker_died',
      answerReplayed: 'worker_died_twice',
      status: 502,
      retry: 'replayable',
      reachedWorker: true,
      benchWorker: true,
      countsRefusal: false,
      retryOn: 'empty-response'
    },
    bad_response: { metric: 'bad_response', answer: 'bad_response', status: 502, ...neverRetried },
    broken_response: {
      metric: 'worker_broken_response', answer: 'worker_broken_response', status: 502, ...neverRetried
    },
    timeout: { metric: 'worker_timeout', answer: 'worker_timeout', status: 504, ...neverRetried },
    local: {
      metric: 'out_of_descriptors',
      answer: 'out_of_descriptors',
      status: 503,
      ...nothingReached,
      benchWorker: false,
      countsRefusal: false
    }
  }
  for (const [failure, row] of Object.entries(expected)) {
    t.match(ATTEMPT_FAILURES[failure], row, failure)
    t.equal(REASONS[ATTEMPT_FAILURES[failure].answer].status, row.status, `${failure}: its reply's status`)
    if (row.retryOn === null) t.type(ATTEMPT_FAILURES[failure].retryOnNot, 'string', `${failure}: why no retry-on`)
  }
  t.ok(Object.isFrozen(ATTEMPT_FAILURES) && Object.values(ATTEMPT_FAILURES).every(Object.isFrozen), 'read-only')
})

t.test('a redispatch counts where decide() reads it: refusals against --retries, a death as the replay',
  async (t) => {
    for (const failure of ['refused', 'local']) {
      const request = fresh('POST')
      countRetry(request, failure)
      t.match(request, { redispatches: 1, replayed: false }, failure)
    }
    const request = fresh('GET')
    countRetry(request, 'died')
    t.match(request, { redispatches: 0, replayed: true }, 'died')
    t.same(decide('died', request, serving), answer('worker_died_twice'), 'and is not replayed again')
  })

t.test('a WebSocket handshake closed without an answer is the app\'s answer, not a death', async (t) => {
  t.equal(isDroppedHandshake('died', { upgrade: Buffer.alloc(0) }), true, 'a handshake')
  t.equal(isDroppedHandshake('died', { upgrade: null }), false, 'a plain request')
  t.equal(isDroppedHandshake('refused', { upgrade: Buffer.alloc(0) }), false, 'a refused handshake is redispatched')
})

t.test('refused: any method, up to --retries redispatches', async (t) => {
  for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']) {
    t.same(decide('refused', fresh(method), serving), redispatch('refused'), method)
    t.same(decide('refused', fresh(method, { redispatches: 2 }), serving), redispatch('refused'),
      `${method}, the last retry`)
    t.same(decide('refused', fresh(method, { redispatches: 3 }), serving), answer('worker_refused'),
      `${method}, retries used up`)
  }
  t.same(decide('refused', fresh('POST'), { ...serving, retries: 0 }), answer('worker_refused'), '--retries 0')
  t.same(decide('refused', fresh('GET', { replayed: true }), serving), redispatch('refused'),
    'after a replay, a refusal still retries')
  t.same(decide('refused', fresh('GET', { replayed: true, redispatches: 3 }), serving), answer('worker_refused'),
    'and ends as a refusal')
})

t.test('died: GET and HEAD only, once', async (t) => {
  for (const method of ['GET', 'HEAD']) {
    t.same(decide('died', fresh(method), serving), redispatch('died'), method)
    t.same(decide('died', fresh(method, { replayed: true }), serving), answer('worker_died_twice'),
      `${method}, died again`)
    t.same(decide('died', fresh(method, { redispatches: 3 }), { ...serving, retries: 3 }), redispatch('died'),
      `${method}: --retries counts refusals only`)
  }
  for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
    t.same(decide('died', fresh(method), serving), answer('worker_died'), `${method} is never replayed`)
  }
})

t.test('bad_response, broken_response, timeout: never retried, whatever the method', async (t) => {
  for (const failure of ['bad_response', 'broken_response', 'timeout']) {
    for (const method of ['GET', 'POST']) {
      t.same(decide(failure, fresh(method), serving), answer(ATTEMPT_FAILURES[failure].answer), `${failure} ${method}`)
    }
    t.same(decide(failure, fresh('GET', { replayed: true }), serving), answer(ATTEMPT_FAILURES[failure].answer),
      `${failure} after a replay`)
  }
})

t.test('nothing is retried for a client that has gone, or once the balancer has stopped', async (t) => {
  for (const when of [{ clientGone: true }, { stopped: true }]) {
    const label = Object.keys(when)[0]
    t.same(decide('refused', fresh('GET'), { ...serving, ...when }), answer('worker_refused'), `refused, ${label}`)
    t.same(decide('died', fresh('GET'), { ...serving, ...when }), answer('worker_died'), `died, ${label}`)
    t.same(decide('died', fresh('GET', { replayed: true }), { ...serving, ...when }), answer('worker_died_twice'),
      `died again, ${label}`)
  }
})

t.test('an unknown failure is a bug, said at once', async (t) => {
  t.throws(() => decide('exploded', fresh('GET'), serving), /unknown attempt failure exploded/)
  t.throws(() => failureOf('toString'), /unknown attempt failure/, 'not a key inherited from Object')
})

t.test('only a replayable method goes out on a kept-alive connection', async (t) => {
  t.equal(mayReuseConnection('GET'), true)
  t.equal(mayReuseConnection('HEAD'), true)
  for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) t.equal(mayReuseConnection(method), false, method)
})
