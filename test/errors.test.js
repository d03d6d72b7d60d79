'use strict'

// One error family: what the library raises on purpose is a PoolError with a listed code, and
// the CLI's exit code for it comes from one table, not from each throw site.

const t = require('tap')
const { PoolError, poolError, codes, EXIT, exitCodeOf } = require('../lib/errors')
const { deserializeError, serializeError } = require('../lib/control/protocol')
const { ClientAborted, BodyTooLarge, BodyOverBudget } = require('../lib/fronts/balancer/buffering')
const { ProxyTimeout } = require('../lib/fronts/balancer/proxy')
const { WorkerGoneError } = require('../lib/fronts/balancer/upstream')
const { ResponseParser, ResponseParseError } = require('../lib/fronts/balancer/response-parser')

const listed = new Set(Object.values(codes))

t.test('every code is POOL_E_* and has an exit code', async (t) => {
  for (const code of listed) {
    t.match(code, /^POOL_E_[A-Z_]+$/)
    t.ok([EXIT.USAGE, EXIT.FAILURE].includes(exitCodeOf(poolError(code, 'x'))), `${code} → ${exitCodeOf(poolError(code, 'x'))}`)
  }
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
    [new ProxyTimeout(250), codes.PROXY_TIMEOUT, 'no answer within 250 ms'],
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

t.test('exit codes: one table, matching what each throw site chose before', async (t) => {
  const exit = (code, details) => exitCodeOf(poolError(code, 'x', { details }))
  t.equal(exit(codes.BAD_OPTION), EXIT.USAGE)
  t.equal(exit(codes.PORT_IN_USE), EXIT.USAGE)
  t.equal(exit(codes.BOOT_FAILED, { headline: 'h', appError: { message: 'm' } }), EXIT.FAILURE)
  t.equal(exit(codes.RELOAD_FAILED, { appError: { message: 'm' }, replaced: [] }), EXIT.FAILURE)
  t.equal(exit(codes.STOPPING), EXIT.USAGE, 'refused because the pool stops')
  t.equal(exit(codes.STOPPING, { appError: { message: 'the pool is stopping' }, replaced: [] }), EXIT.FAILURE, 'a reload cut short by a stop')
  for (const reason of ['missing', 'refused', 'denied', 'foreign']) t.equal(exit(codes.CONTROL_UNREACHABLE, { reason }), EXIT.USAGE, reason)
  for (const reason of ['io', 'timeout', 'closed']) t.equal(exit(codes.CONTROL_UNREACHABLE, { reason }), EXIT.FAILURE, reason)
  t.equal(exitCodeOf(new Error('a bug')), EXIT.FAILURE, 'anything else is an internal error')
  t.equal(exitCodeOf(poolError(codes.HAPROXY_SOCKET, 'x')), EXIT.USAGE)
})

t.test('a library error carries no CLI exit code; exitCode is not a constructor option', async (t) => {
  const err = poolError(codes.BAD_OPTION, 'x', { exitCode: EXIT.FAILURE })
  t.notOk('exitCode' in err)
  t.equal(exitCodeOf(err), EXIT.USAGE)
})

t.test('an error from the control socket keeps the exit code the pool chose', async (t) => {
  const remote = deserializeError({ code: codes.BAD_OPTION, message: 'm', exitCode: 7 })
  t.equal(remote.exitCode, 7)
  t.equal(exitCodeOf(remote), 7)
  t.same(serializeError(remote), { code: codes.BAD_OPTION, message: 'm', exitCode: 7 })
  t.same(serializeError(poolError(codes.BOOT_FAILED, 'b')), { code: codes.BOOT_FAILED, message: 'b', exitCode: EXIT.FAILURE })
  t.equal(deserializeError({ code: codes.BAD_OPTION, message: 'm' }).exitCode, EXIT.FAILURE, 'no exit code said: a failure, as before')
})
