'use strict'

// The loop's events are one table (lib/supervisor/events.js), shared by whoever enqueues them
// and by the tick that handles them: every event has a handler for each subject it can be about,
// and a child, a slot's worker or a reload's canary, sends the same events.

const t = require('tap')
const { EventEmitter } = require('node:events')
const { EVENT, CHILD_EVENTS } = require('../../lib/supervisor/events')
const { ON_POOL, ON_CANARY, ON_WORKER } = require('../../lib/supervisor/pool')
const { watchChild } = require('../../lib/supervisor/spawn')

t.test('every event of the table is handled, for each subject it can be about', async (t) => {
  for (const type of CHILD_EVENTS) {
    t.type(ON_WORKER[type], 'function', `${type}: a slot's worker`)
    t.type(ON_CANARY[type], 'function', `${type}: a canary`)
  }
  for (const type of Object.values(EVENT)) t.ok(ON_POOL[type] || ON_WORKER[type], `${type} has a handler`)
  for (const table of [ON_POOL, ON_CANARY, ON_WORKER]) {
    for (const type of Object.keys(table)) t.ok(Object.values(EVENT).includes(type), `${type} is in the table`)
  }
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
  ON_WORKER[EVENT.WARMED](pool, handle, { type: EVENT.WARMED }, 1234)
  t.same(calls, [['warmedUp', 3], ['onReady', true, 1234]],
    'the count first (its ends may be heard after ready), then ready')
})
