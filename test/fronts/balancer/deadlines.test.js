'use strict'

// The balancer's limits on a request under way share one sweep (lib/fronts/balancer/deadlines.js):
// --read-timeout and --max-request-time on attempts, --send-timeout on responses waiting for their
// clients. Each is acted on once past its own limit, not before, and a limit that is off watches
// nothing and arms no timer.

const t = require('tap')
const { waitFor } = require('../../helpers')
const { Deadlines } = require('../../../lib/fronts/balancer/deadlines')

function attempt () {
  const startedAt = performance.now()
  return {
    startedAt,
    readSince: startedAt,
    expired: null,
    expiredAt: null,
    timedOut (which, ms) {
      this.expired = { which, ms }
      this.expiredAt = performance.now()
    }
  }
}

function relay () {
  return { progressAt: 0, res: { destroyed: false, destroy () { this.destroyed = true } } }
}

t.test('one sweep serves all three limits, each acted on past its own', async (t) => {
  const cuts = [] // when each --send-timeout cut a client
  const onSendTimeout = () => cuts.push({ at: performance.now() })
  const deadlines = new Deadlines({ read: 200, total: 0, send: 40 }, { onSendTimeout })
  t.equal(deadlines.period, 10, 'a quarter of the shortest limit')
  const reading = attempt()
  const paused = attempt()
  paused.readSince = null // held off for a slow client: its read clock does not run
  const sending = relay()
  deadlines.watchAttempt(reading)
  deadlines.watchAttempt(paused)
  deadlines.watchSend(sending)
  const armed = deadlines.timer
  t.ok(armed, 'a timer runs while something is watched')
  await waitFor(() => sending.res.destroyed, { timeout: 5000 })
  t.equal(cuts.length, 1, 'the client that took nothing is cut off and counted once')
  t.ok(cuts[0].at - sending.progressAt >= 40, 'not before its limit')
  await waitFor(() => reading.expired !== null, { timeout: 5000 })
  t.same(reading.expired, { which: 'read', ms: 200 })
  t.ok(reading.expiredAt - reading.startedAt >= 200, 'not before its limit')
  t.equal(paused.expired, null, 'a paused attempt has no read clock')
  deadlines.unwatchAttempt(paused)
  await waitFor(() => deadlines.timer === null, { timeout: 5000 })
  t.equal(deadlines.attempts.size + deadlines.sends.size, 0, 'nothing watched, no timer')
})

t.test('--max-request-time wins over a read limit it reaches first', async (t) => {
  const deadlines = new Deadlines({ read: 1000, total: 60 })
  const busy = attempt()
  deadlines.watchAttempt(busy)
  const keepReading = setInterval(() => { busy.readSince = performance.now() }, 5)
  t.teardown(() => clearInterval(keepReading))
  await waitFor(() => busy.expired !== null, { timeout: 5000 })
  t.same(busy.expired, { which: 'total', ms: 60 })
  t.ok(busy.expiredAt - busy.startedAt >= 60, 'not before its limit')
})

t.test('an expiry that throws leaves the sweep armed for the rest', async (t) => {
  const deadlines = new Deadlines({ read: 40 })
  const throwing = attempt()
  throwing.startedAt = throwing.readSince = performance.now() - 100 // overdue
  throwing.timedOut = () => { throw new Error('boom') }
  const waiting = attempt()
  deadlines.watchAttempt(throwing)
  deadlines.watchAttempt(waiting)
  clearTimeout(deadlines.timer)
  t.throws(() => deadlines.sweep(), /boom/)
  t.notOk(deadlines.attempts.has(throwing), 'the one that threw is no longer watched')
  t.ok(deadlines.timer, 'the sweep is armed again for the one still watched')
  await waitFor(() => waiting.expired !== null, { timeout: 5000 })
  t.same(waiting.expired, { which: 'read', ms: 40 })
})

t.test('a limit that is off watches nothing', async (t) => {
  const deadlines = new Deadlines({ read: 0, total: 0, send: 0 })
  deadlines.watchAttempt(attempt())
  deadlines.watchSend(relay())
  t.equal(deadlines.timer, null)
  t.equal(deadlines.attempts.size + deadlines.sends.size, 0)
  const sendOnly = new Deadlines({ send: 1000 })
  sendOnly.watchAttempt(attempt())
  t.equal(sendOnly.attempts.size, 0, 'no read or total limit: attempts are not watched')
  const r = relay()
  sendOnly.watchSend(r)
  t.equal(sendOnly.sends.size, 1)
  sendOnly.unwatchSend(r)
  t.equal(sendOnly.sends.size, 0)
  t.equal(sendOnly.period, 250)
})
