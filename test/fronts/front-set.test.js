'use strict'

// The pool's fronts seen as one (lib/fronts/front-set.js): each sync hook reaches every front
// with what the pool passed, and a front that throws is logged while the others still hear.

const t = require('tap')
const { FrontSet } = require('../../lib/fronts/front-set')

// A front that records what it is told; `failing` throws from every hook.
function recordingFront (name, { failing = false } = {}) {
  const heard = []
  const hook = (hookName) => (...args) => {
    heard.push([hookName, ...args])
    if (failing) throw new Error(`${name} broke`)
  }
  return {
    name,
    heard,
    workerReady: hook('workerReady'),
    workerAwaiting: hook('workerAwaiting'),
    workerRequestEnded: hook('workerRequestEnded'),
    workerGone: hook('workerGone'),
    stopping: hook('stopping')
  }
}

function recordingLogger () {
  const errors = []
  return { errors, error: (fields, message) => errors.push({ ...fields, message }) }
}

t.test('every front hears each hook, with its arguments, whatever one of them throws', async (t) => {
  const first = recordingFront('first', { failing: true })
  const second = recordingFront('second')
  const logger = recordingLogger()
  const fronts = new FrontSet([first, second], { logger })
  const worker = { slot: 1, pid: 42 }
  fronts.workerReady(worker)
  fronts.workerAwaiting(worker, { open: 2, last: 'x1' })
  fronts.workerRequestEnded(worker, 'x1')
  fronts.workerGone(worker)
  fronts.stopping()
  const told = [
    ['workerReady', worker],
    ['workerAwaiting', worker, { open: 2, last: 'x1' }],
    ['workerRequestEnded', worker, 'x1'],
    ['workerGone', worker],
    ['stopping']
  ]
  t.same(first.heard, told, 'the failing front was told everything')
  t.same(second.heard, told, 'the front after it too')
  t.same(logger.errors.map((e) => [e.event, e.front, e.hook]), told.map(([hook]) => ['front-error', 'first', hook]),
    'each failure is logged once, naming the front and the hook')
  t.match(logger.errors[0].message, /front first failed in workerReady\(\): first broke/)
})

t.test('a front without an optional hook is skipped', async (t) => {
  const logger = recordingLogger()
  const bare = { name: 'bare', workerReady () {}, workerGone () {} }
  const full = recordingFront('full')
  const fronts = new FrontSet([bare, full], { logger })
  fronts.workerAwaiting({ slot: 1, pid: 42 }, { open: 1, last: 'x' })
  fronts.workerRequestEnded({ slot: 1, pid: 42 }, 'x')
  fronts.stopping()
  t.same(full.heard.map(([hook]) => hook), ['workerAwaiting', 'workerRequestEnded', 'stopping'])
  t.same(logger.errors, [], 'nothing failed')
})
