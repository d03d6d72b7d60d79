'use strict'

// The loop's events are one table (lib/supervisor/events.js), shared by whoever enqueues them
// and by the tick that handles them: every event has a handler for each subject it can be about,
// and a child, a slot's worker or a reload's canary, sends the same events.

const t = require('tap')
const { EventEmitter } = require('node:events')
const { EVENT, CHILD_EVENTS } = require('../../lib/supervisor/events')
const { Pool } = require('../../lib/supervisor/pool')
const { watchChild } = require('../../lib/supervisor/spawn')

// Stands for anything a handler reads or calls (the pool, its parts, the subject, the event's
// fields): every property is it, every call returns it.
const anything = new Proxy(function () {}, {
  get: (target, key) => key === Symbol.toPrimitive ? undefined : anything,
  apply: () => anything
})

// Whether the pool's handler `name` takes an event of `type` (its subject's handler throws for
// an event it has no case for).
function handles (name, type) {
  const event = new Proxy({ type }, { get: (e, key) => key in e ? e[key] : anything })
  const subject = name === 'onCommand' ? [] : [anything]
  try {
    Pool.prototype[name].call(anything, ...subject, event, 0)
    return true
  } catch (err) {
    if (!/no handler for/.test(err.message)) throw err
    return false
  }
}

t.test('every event of the table is handled, for each subject it can be about', async (t) => {
  for (const type of CHILD_EVENTS) {
    t.ok(handles('onWorkerEvent', type), `${type}: a slot's worker`)
    t.ok(handles('onCanaryEvent', type), `${type}: a canary`)
  }
  for (const type of Object.values(EVENT)) {
    t.ok(handles('onCommand', type) || handles('onWorkerEvent', type), `${type} has a handler`)
  }
  t.notOk(handles('onWorkerEvent', 'no-such-event'), 'an event of no case is refused, not dropped')
})

// A child without pipes: its exit and a failed fork, as watchChild tells the loop.
function fakeChild (pid) {
  const child = new EventEmitter()
  Object.assign(child, { pid, stdio: [], stdout: null, stderr: null })
  return child
}

t.test('a slot\'s worker and a canary send the same events, told apart by their subject', async (t) => {
  for (const about of [{ handle: {} }, { canary: {} }]) {
    const events = []
    const child = fakeChild(undefined)
    watchChild(child, { ...about, who: 'w', slot: 1, captureRemnant: () => null, enqueue: (e) => events.push(e) })
    child.emit('error', Object.assign(new Error('spawn EMFILE'), { code: 'EMFILE' }))
    child.pid = 4242
    child.emit('exit', 1, null)
    t.same(events.map((e) => e.type), [EVENT.SPAWN_ERROR, EVENT.EXIT])
    t.ok(events.every((e) => CHILD_EVENTS.includes(e.type) && (e.handle ?? e.canary) === (about.handle ??
      about.canary)))
  }
})

t.test('a worker\'s warm-up over: its handle is told how many warm-up requests it answered, ' +
  'then it is ready', async (t) => {
  const calls = []
  const handle = { warmedUp: (count) => calls.push(['warmedUp', count]) }
  const pool = { options: { warmupRequests: 3 }, onReady: (h, now) => calls.push(['onReady', h === handle, now]) }
  Pool.prototype.onWorkerEvent.call(pool, handle, { type: EVENT.WARMED }, 1234)
  t.same(calls, [['warmedUp', 3], ['onReady', true, 1234]],
    'the count first (its ends may be heard after ready), then ready')
})
