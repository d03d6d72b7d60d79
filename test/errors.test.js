'use strict'

// One error family: what the library raises on purpose is a PoolError with a listed code, and
// no exit code (that is the CLI's: test/cli/exit-codes.test.js).

const t = require('tap')
const errors = require('../lib/errors')
const { PoolError, codes } = errors
const { ClientAborted, BodyTooLarge, BodyOverBudget } = require('../lib/fronts/balancer/buffering')
const { RequestLimitError } = require('../lib/fronts/balancer/proxy')
const { WorkerGoneError } = require('../lib/fronts/balancer/upstream')
const { ResponseParser, ResponseParseError } = require('../lib/fronts/balancer/response-parser')

const listed = new Set(Object.values(codes))

t.test('every code is POOL_E_*', async (t) => {
  for (const code of listed) t.match(code, /^POOL_E_[A-Z_]+$/)
})

t.test('lib/errors.js keeps only the codes: the exit-code policy is the CLI\'s', async (t) => {
  t.same(Object.keys(errors).sort(), ['PoolError', 'codes', 'poolError'])
})

t.test("the balancer's errors are PoolErrors with listed codes and their old messages", async (t) => {
  const parser = new ResponseParser({ onHead () {}, onBody () {}, onComplete () {} })
  parser.expect('GET')
  let parseError = null
  try { parser.execute(Buffer.from('NOT HTTP\r\n\r\n')) } catch (err) { parseError = err }
  const made = [
    [new BodyTooLarge(10), codes.BODY_TOO_LARGE, 'request body larger than 10 bytes'],
    [new BodyOverBudget(), codes.BODY_OVER_BUDGET, 'the request bodies held would exceed the body budget'],
    [new ClientAborted(), codes.CLIENT_ABORTED, 'client closed the connection while sending its request'],
    [new RequestLimitError('read', 250), codes.PROXY_TIMEOUT, 'no byte from the worker for 250 ms (--read-timeout)'],
    [new RequestLimitError('total', 250), codes.PROXY_TIMEOUT, 'longer than 250 ms (--max-request-time)'],
    [new WorkerGoneError('worker 3 is gone'), codes.WORKER_GONE, 'worker 3 is gone'],
    [parseError, codes.BAD_RESPONSE, /^malformed response from worker: bad status line/]
  ]
  t.ok(parseError instanceof ResponseParseError, 'the parser threw its own error')
  for (const [err, code, message] of made) {
    t.ok(err instanceof PoolError, `${code} is a PoolError`)
    t.equal(err.code, code)
    t.ok(listed.has(err.code))
    t.match(err.message, message)
  }
})
