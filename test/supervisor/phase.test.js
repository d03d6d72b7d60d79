'use strict'

// The pool's own life (lib/supervisor/phase.js): a failure is recorded once, through its own
// method, and a start in progress is answered with it once the stop it causes is over.

const t = require('tap')
const { PoolPhase } = require('../../lib/supervisor/phase')
const { poolError, codes } = require('../../lib/errors')

t.test('a failure during start answers the start with it, once the stop is over', async (t) => {
  const life = new PoolPhase()
  life.begin()
  const started = life.untilRunning()
  const err = poolError(codes.BOOT_FAILED, 'no slot booted')
  t.equal(life.fail(err), true, 'the first failure is the pool\'s')
  t.equal(life.fail(poolError(codes.BOOT_FAILED, 'another')), false, 'a second one is not')
  const { promise: stopped } = life.stop()
  let answered = false
  started.catch(() => { answered = true })
  life.rejectStartAfter(stopped)
  await new Promise((resolve) => setImmediate(resolve))
  t.notOk(answered, 'not before the stop is over')
  life.end()
  life.ended({ clean: false })
  await t.rejects(started, err, 'then with the failure, not with "stopped before it finished starting"')
  t.equal(life.failure, err)
})
