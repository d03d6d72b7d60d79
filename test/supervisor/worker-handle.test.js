'use strict'

// The WorkerHandle alone (lib/supervisor/worker-handle.js): a worker's states and the only
// changes between them, its deadlines (a loop that stopped checking in, not a request's length),
// the drain's STOP → SIGTERM → SIGKILL escalation, retiring, what an exit was, and when its slot
// may start again. No pool, no process: a fake child whose channel
// frames and signals are recorded, and a clock that is just a number.

const t = require('tap')
const { Writable } = require('node:stream')
const { WorkerHandle, TRANSITIONS, checkInInterval } = require('../../lib/supervisor/worker-handle')

const POLICY = Object.freeze({
  bootTimeout: 5000,
  timeout: 3000,
  heartbeatTimeout: 10000,
  killTimeout: 500,
  healthyAfter: 30000,
  restartDelay: 100,
  restartFactor: 1.5,
  restartMaxDelay: 15000,
  maxBootFailures: 3,
  givenUpRetry: 60000,
  maxRequests: 0,
  maxRequestsJitter: 0,
  maxRss: 0
})

const T0 = 1e9
let nextPid = 1 << 30

// A child without a pid is a fork that failed, as Node's fork() hands back for EMFILE or EAGAIN.
function fakeChild ({ failed = false } = {}) {
  const child = { pid: failed ? undefined : nextPid++, sent: [], signals: [] }
  const channel = new Writable({ write (frame, encoding, done) { child.sent.push(JSON.parse(frame)); done() } })
  child.stdio = [null, null, null, channel]
  return child
}

function handle (policy = {}) {
  const changes = []
  const h = new WorkerHandle({
    slot: 1,
    host: '127.0.0.1',
    port: 40001,
    policy: { ...POLICY, ...policy },
    onState: (handle, from) => changes.push(`${from}→${handle.state}`),
    signal: (child, sig) => { child.signals.push(sig); return true }
  })
  return { h, changes }
}

// A handle whose process is ready at T0 (forked at T0 - 1000).
function readyHandle (policy) {
  const { h, changes } = handle(policy)
  const child = fakeChild()
  h.attach(child, T0 - 1000)
  h.heard(T0) // its 'ready'
  h.becameReady(T0)
  return { h, child, changes }
}

// The worker's check-in at `now`: it holds `open` requests, has answered `answered`.
function checkIn (h, now, { open = 0, answered = 0, active = open > 0 } = {}) {
  h.checkedIn({ rss: 1, open, answered, active }, now)
}

// What a tick does with what is due, as the pool's carryOut does it.
function carryOut (h, action) {
  if (!action) return
  if (action.do === 'stop') h.askToStop({ v: 1, type: 'stop' })
  else if (action.do === 'term') h.terminate()
  else h.kill(action.reason)
}

t.test('transitions: only along the table, each change reported once, state read-only', async (t) => {
  const { h, changes } = handle()
  t.throws(() => h.transition('ready'), /no transition from dead to ready/)
  const child = fakeChild()
  h.attach(child, T0)
  t.equal(h.beganWarmup(), true)
  t.equal(h.beganWarmup(), false, 'only from booting')
  t.equal(h.becameReady(T0 + 1), true)
  t.equal(h.becameReady(T0 + 2), false, 'a repeated ready does nothing')
  checkIn(h, T0 + 3, { open: 1 })
  checkIn(h, T0 + 3, { open: 0, answered: 1 })
  h.startDrain('stop', T0 + 4, 1000)
  h.exited(0, null, T0 + 5, { poolStopping: true })
  t.same(changes,
    ['dead→booting', 'booting→warming', 'warming→ready', 'ready→busy', 'busy→ready', 'ready→draining', 'draining→dead'])
  t.throws(() => { h.state = 'ready' }, TypeError, 'state has no setter')
  for (const [from, tos] of Object.entries(TRANSITIONS)) t.notOk(tos.includes(from), `${from}: no change to itself`)
})

t.test('processes in the slot: a fork without a pid is not a process; ' +
  'restarts count the ones after the first', async (t) => {
  const { h } = handle()
  h.attach(fakeChild(), T0)
  h.becameReady(T0)
  t.equal(h.incarnation, 1)
  t.equal(h.restarts, 0)
  h.exited(1, null, T0 + 1, { poolStopping: false })
  h.attach(fakeChild({ failed: true }), T0 + 200)
  h.spawnFailed({ message: 'EMFILE' }, T0 + 200)
  t.equal(h.incarnation, 1, 'the failed fork ran nothing')
  t.equal(h.restarts, 0)
  t.equal(h.pid, null)
  t.equal(h.spawnErrors, 1)
  t.equal(h.bootFailures, 0, 'a failed fork is no failed boot')
  h.attach(fakeChild(), T0 + 1000)
  t.equal(h.incarnation, 2)
  t.equal(h.restarts, 1)
  t.equal(h.spawnErrors, 0)
})

t.test('deadlines: boot timeout, a stopped loop, an idle silence; each strictly past its time', async (t) => {
  t.test('boot timeout, warm-up included', async (t) => {
    const { h } = handle()
    h.attach(fakeChild(), T0)
    h.beganWarmup()
    t.equal(h.due(T0 + 5000), null)
    t.same(h.due(T0 + 5001), { do: 'kill', reason: 'boot-timeout', ms: 5001 })
    h.bootTimedOut()
    t.same(h.lastError, { message: 'not ready within 5000 ms (boot timeout)' })
  })
  t.test('a worker holding requests whose loop stopped: --timeout plus a check-in interval after its last ' +
    'word', async (t) => {
    const { h } = readyHandle()
    t.equal(checkInInterval(POLICY), 500, 'a quarter of --timeout, at most 500 ms')
    checkIn(h, T0 + 10, { open: 1 })
    t.equal(h.due(T0 + 3510), null)
    t.same(h.due(T0 + 3511), { do: 'kill', reason: 'timeout', ms: 3501 })
  })
  t.test('a request as long as it likes, while the loop turns: nothing is due', async (t) => {
    const { h } = readyHandle()
    const due = []
    for (let at = T0; at < T0 + 120000; at += 500) {
      checkIn(h, at, { open: 3 })
      if (h.due(at + 499)) due.push(at - T0)
    }
    t.same(due, [], 'two minutes of a stream (40 × --timeout), checked in twice a second: never due')
  })
  t.test('active but idle again: the short limit holds until an idle check-in', async (t) => {
    const { h } = readyHandle()
    checkIn(h, T0, { open: 0, answered: 1, active: true })
    t.same(h.due(T0 + 3501), { do: 'kill', reason: 'timeout', ms: 3501 })
    checkIn(h, T0, { open: 0, answered: 1, active: false })
    t.equal(h.due(T0 + 3501), null)
    t.same(h.due(T0 + 10001), { do: 'kill', reason: 'heartbeat', ms: 10001 })
  })
  t.test('an idle worker gone silent; any word from it counts', async (t) => {
    const { h } = readyHandle()
    t.same(h.due(T0 + 10001), { do: 'kill', reason: 'heartbeat', ms: 10001 })
    h.heard(T0 + 9000)
    t.equal(h.due(T0 + 10001), null)
    t.same(h.due(T0 + 19001), { do: 'kill', reason: 'heartbeat', ms: 10001 })
  })
  t.test('a worker still loading has no heartbeat deadline, even when drained', async (t) => {
    const { h } = handle({ bootTimeout: 1e9 })
    h.attach(fakeChild(), T0)
    h.startDrain('stop', T0, 1e6)
    t.same(h.due(T0 + 20000), { do: 'stop' }, 'asked to exit, not killed as hung')
  })
  t.test('after the kill, nothing more is due', async (t) => {
    const { h, child } = readyHandle()
    carryOut(h, h.due(T0 + 10001))
    t.same(child.signals, ['SIGKILL'])
    t.equal(h.due(T0 + 20000), null)
    t.equal(h.exited(null, 'SIGKILL', T0 + 20001, { poolStopping: false }).reason, 'heartbeat')
  })
})

t.test('nextDeadline: the first instant due() answers, in every state; what moves it', async (t) => {
  // At the deadline due() answers, one ms before it does not: the tick armed there acts.
  const dueAt = (h, what) => {
    const at = h.nextDeadline()
    t.equal(h.due(at - 1), null, `${what}: nothing due 1 ms before ${at - T0}`)
    t.not(h.due(at), null, `${what}: due at it`)
    return at - T0
  }
  const { h: booting } = handle()
  booting.attach(fakeChild(), T0)
  t.equal(dueAt(booting, 'boot'), 5001)
  const { h } = readyHandle()
  t.equal(dueAt(h, 'silence'), 10001)
  h.heard(T0 + 4000)
  t.equal(h.nextDeadline() - T0, 14001, 'a word from the worker moves it later')
  checkIn(h, T0 + 5000, { open: 1 })
  t.equal(dueAt(h, 'active'), 8501, 'holding a request: --timeout (3 s) and an interval, no heartbeat')
  checkIn(h, T0 + 5100, { open: 0, answered: 1, active: false })
  t.equal(h.nextDeadline() - T0, 15101, 'idle again: the silence again')
  checkIn(h, T0 + 6000, { open: 1 })
  h.startDrain('stop', T0 + 6000, 1000)
  t.equal(dueAt(h, 'graceful timeout'), 7000)
  carryOut(h, h.due(T0 + 7000))
  t.equal(dueAt(h, 'kill timeout'), 7500, 'SIGTERM sent: SIGKILL next')
  carryOut(h, h.due(T0 + 7500))
  t.equal(h.nextDeadline(), Infinity, 'killed: nothing left to time')
  h.exited(null, 'SIGKILL', T0 + 7600, { poolStopping: false })
  t.equal(h.nextDeadline(), h.respawnAt, 'dead: its respawn')
  t.ok(h.dueForRespawn(h.nextDeadline()) && !h.dueForRespawn(h.nextDeadline() - 1))
  const { h: failing } = handle({ maxBootFailures: 1 })
  failing.attach(fakeChild(), T0)
  failing.exited(1, null, T0 + 10, { poolStopping: false })
  t.equal(failing.state, 'given-up')
  t.equal(failing.nextDeadline() - T0, 60010, 'given up: --given-up-retry after')
  t.ok(failing.dueForRetry(failing.nextDeadline()) && !failing.dueForRetry(failing.nextDeadline() - 1))
  const { h: never } = handle({ maxBootFailures: 1, givenUpRetry: 0 })
  never.attach(fakeChild(), T0)
  never.exited(1, null, T0 + 10, { poolStopping: false })
  t.equal(never.nextDeadline(), Infinity, '--given-up-retry 0: no time runs')
})

t.test('drain: STOP once when idle and released, never again, whatever the ticks', async (t) => {
  const { h, child } = readyHandle()
  t.equal(h.startDrain('reload', T0, 30000), true)
  t.equal(h.due(T0), null, 'the fronts have not let go yet')
  h.released()
  for (let tick = 0; tick < 20; tick++) carryOut(h, h.due(T0 + tick * 50))
  t.same(child.sent.map((m) => m.type), ['stop'], 'one STOP in 20 ticks')
  t.same(child.signals, [])
})

t.test('drain: STOP once the fronts let go, whatever the worker still holds (it finishes that itself)', async (t) => {
  const { h, child } = readyHandle()
  checkIn(h, T0, { open: 2 })
  h.startDrain('scale-down', T0, 30000)
  t.equal(h.due(T0 + 100), null, 'the fronts have not let go yet')
  h.released()
  carryOut(h, h.due(T0 + 200))
  t.same(child.sent.map((m) => m.type), ['stop'], 'its two requests go on; it takes no new one')
  const exit = h.exited(0, null, T0 + 300, { poolStopping: false })
  t.same(exit, { reason: 'scale-down', planned: true, draining: 'scale-down', next: 'dead' })
  t.equal(h.respawnAt, T0 + 300, 'the slot goes on at once: no crash backoff')
})

t.test('drain: a worker not serving yet needs no fronts to let go', async (t) => {
  const { h } = handle()
  h.attach(fakeChild(), T0)
  h.startDrain('stop', T0, 1000)
  t.same(h.due(T0), { do: 'stop' })
})

t.test('escalation: SIGTERM at the graceful timeout, once; SIGKILL --kill-timeout later', async (t) => {
  const { h, child } = readyHandle()
  checkIn(h, T0, { open: 1 })
  h.startDrain('stop', T0, 1000)
  for (let now = T0; now < T0 + 1000; now += 50) carryOut(h, h.due(now))
  t.same(child.signals, [], 'nothing before the graceful timeout')
  for (let now = T0 + 1000; now < T0 + 1500; now += 50) carryOut(h, h.due(now))
  t.same(child.signals, ['SIGTERM'], 'SIGTERM at it, once')
  carryOut(h, h.due(T0 + 1500))
  t.same(child.signals, ['SIGTERM', 'SIGKILL'])
  t.equal(h.due(T0 + 1550), null, 'nothing left to escalate')
  t.same(h.exited(null, 'SIGKILL', T0 + 1600, { poolStopping: true }),
    { reason: 'stop-killed', planned: false, draining: 'stop', next: 'dead' })
})

t.test('draining again only brings the deadlines closer, and keeps the first reason', async (t) => {
  const { h } = readyHandle()
  h.startDrain('reload', T0, 30000)
  t.equal(h.startDrain('stop', T0 + 100, 1000), false)
  t.same({ reason: h.drain.reason, termAt: h.drain.termAt, killAt: h.drain.killAt },
    { reason: 'reload', termAt: T0 + 1100, killAt: T0 + 1600 })
  h.startDrain('stop', T0 + 200, 60000)
  t.equal(h.drain.termAt, T0 + 1100, 'never later')
})

t.test('what an exit was', async (t) => {
  const cases = [
    ['drained, exited 0', (h) => h.startDrain('recycle', T0, 1000), [0, null], { reason: 'recycle', planned: true }],
    ['drained, SIGTERMed, ended by it', (h) => { h.startDrain('stop', T0, 0); h.terminate() }, [null, 'SIGTERM'],
      { reason: 'stop', planned: true }],
    ['drained, SIGTERMed, its handler exited 1', (h) => { h.startDrain('stop', T0, 0); h.terminate() }, [1, null],
      { reason: 'stop', planned: true }],
    ['drained, crashed before any signal', (h) => h.startDrain('reload', T0, 1000), [1, null],
      { reason: 'crashed', planned: false }],
    ['not drained, exited 0', () => {}, [0, null], { reason: 'crashed', planned: false }],
    ['killed as hung', (h) => h.kill('timeout'), [null, 'SIGKILL'], { reason: 'timeout', planned: false }]
  ]
  for (const [name, before, [code, signal], want] of cases) {
    const { h } = readyHandle()
    before(h)
    t.same(h.exitReason(code, signal), want, name)
  }
  const { h } = handle()
  h.attach(fakeChild(), T0)
  t.same(h.exitReason(1, null), { reason: 'boot-failed', planned: false }, 'before ready')
})

t.test('backoff: ×factor per consecutive crash, capped; starts over after --healthy-after of uptime', async (t) => {
  const { h } = readyHandle()
  const delays = []
  let now = T0
  for (let i = 0; i < 12; i++) {
    h.exited(1, null, now, { poolStopping: false })
    delays.push(h.respawnDelay)
    t.equal(h.dueForRespawn(now + h.respawnDelay - 1), false)
    t.equal(h.dueForRespawn(now + h.respawnDelay), true)
    now += h.respawnDelay
    h.attach(fakeChild(), now)
    h.becameReady(now)
  }
  t.same(delays, delays.map((_, i) => Math.min(100 * 1.5 ** i, 15000)))
  now += 30000
  h.exited(1, null, now, { poolStopping: false })
  t.equal(h.respawnDelay, 0, 'up --healthy-after: no crash loop, respawned at once')
  t.equal(h.dueForRespawn(now), true)
  h.attach(fakeChild(), now)
  h.becameReady(now)
  h.exited(1, null, now + 10, { poolStopping: false })
  t.equal(h.respawnDelay, 100, 'the crash count started over')
})

t.test('backoff: a process that answered a request respawns at once, however it ended; ' +
  'a request started is not one answered, nor is a warm-up', async (t) => {
  const { h } = readyHandle()
  h.exited(1, null, T0 + 1, { poolStopping: false }) // a crash before it served: counted
  t.equal(h.crashes, 1)
  h.attach(fakeChild(), T0 + 100)
  h.becameReady(T0 + 110)
  checkIn(h, T0 + 11, { open: 0, answered: 1 })
  const next = h.exited(null, 'SIGKILL', T0 + 12, { poolStopping: false })
  t.equal(next.next, 'respawn')
  t.equal(next.reason, 'crashed', 'still an unplanned exit')
  t.equal(h.respawnDelay, 0, 'killed from outside after it served: at once')
  t.equal(h.crashes, 0, 'and the count starts over')
  t.equal(h.dueForRespawn(T0 + 12), true)

  h.attach(fakeChild(), T0 + 20)
  h.becameReady(T0 + 20)
  checkIn(h, T0 + 21, { open: 1 })
  h.exited(1, null, T0 + 22, { poolStopping: false }) // died on its first request
  t.equal(h.respawnDelay, 100, 'a request that killed it is no request answered: backoff')

  h.attach(fakeChild(), T0 + 200)
  h.beganWarmup()
  h.warmedUp(1)
  checkIn(h, T0 + 250, { open: 0, answered: 1 }) // its warm-up
  h.becameReady(T0 + 300)
  h.exited(1, null, T0 + 301, { poolStopping: false })
  t.equal(h.respawnDelay, 150, 'warm-up requests answered are no proof: backoff grows')
})

t.test('backoff: a worker that served --healthy-after clears the count however it ends', async (t) => {
  const { h } = readyHandle()
  h.exited(1, null, T0 + 10, { poolStopping: false }) // crash 1
  h.attach(fakeChild(), T0 + 200)
  h.becameReady(T0 + 300)
  h.startDrain('reload', T0 + 40000, 1000) // healthy long enough, then replaced
  h.exited(0, null, T0 + 40001, { poolStopping: false })
  h.attach(fakeChild(), T0 + 40001)
  h.becameReady(T0 + 40100)
  h.exited(1, null, T0 + 40200, { poolStopping: false })
  t.equal(h.respawnDelay, 100, 'its first crash, not its second')
})

t.test('due() only answers: asking, however often, changes nothing', async (t) => {
  const fields = (h) => JSON.stringify(Object.entries(h)
    .filter(([k]) => !['child', 'previousChild', 'policy', 'signalChild'].includes(k)))
  const { h, child } = readyHandle()
  h.exited(1, null, T0 + 10, { poolStopping: false })
  h.attach(child, T0 + 200)
  h.becameReady(T0 + 300)
  h.heard(T0 + 40000)
  const ask = (now) => {
    const before = fields(h)
    const first = h.due(now)
    t.same(h.due(now), first, 'the same answer twice')
    t.equal(fields(h), before, `nothing changed by asking at +${now - T0} ms`)
  }
  ask(T0 + 40000) // ready, healthy for longer than --healthy-after
  checkIn(h, T0 + 40000, { open: 1 })
  h.startDrain('stop', T0 + 40000, 1000)
  for (const now of [T0 + 40100, T0 + 41000, T0 + 41500, T0 + 90000]) ask(now)
  t.same(child.signals, [])
  t.same(child.sent, [])
})

t.test('crash-loop breaker: --max-boot-failures deaths before ready give the slot up; ' +
  'a retry or a reload revives it', async (t) => {
  const { h, changes } = handle()
  let now = T0
  const nexts = []
  for (let i = 0; i < 3; i++) {
    h.attach(fakeChild(), now)
    nexts.push(h.exited(1, null, now + 10, { poolStopping: false }).next)
    now += 10 + h.respawnDelay
  }
  t.same(nexts, ['respawn', 'respawn', 'given-up'])
  t.equal(h.state, 'given-up')
  t.equal(changes.at(-1), 'booting→given-up')
  t.equal(h.dueForRespawn(now + 1e9), false, 'a given-up slot does not respawn by itself')
  t.equal(h.dueForRetry(h.givenUpAt + 59999), false)
  t.equal(h.dueForRetry(h.givenUpAt + 60000), true)
  h.revive(now)
  t.equal(h.state, 'dead')
  t.equal(h.bootFailures, 0)
  t.equal(h.dueForRespawn(now), true, 'at once')
  const { h: never } = handle({ givenUpRetry: 0, maxBootFailures: 1 })
  never.attach(fakeChild(), T0)
  never.exited(1, null, T0, { poolStopping: false })
  t.equal(never.dueForRetry(T0 + 1e12), false, '--given-up-retry 0: only a reload')
})

t.test('an exit while the pool stops is no crash', async (t) => {
  const { h } = readyHandle()
  t.same(h.exited(1, null, T0 + 5, { poolStopping: true }),
    { reason: 'crashed', planned: false, draining: null, next: 'dead' })
  t.equal(h.crashes, 0)
  t.equal(h.respawnAt, T0 + 5)
})

t.test('recycling: --max-requests (warm-up excluded), --max-rss on any measure, or asked', async (t) => {
  const { h } = handle({ maxRequests: 2, maxRss: 100 })
  h.attach(fakeChild(), T0)
  h.beganWarmup()
  checkIn(h, T0, { answered: 2 }) // two of three warm-up requests answered while warming
  h.warmedUp(3) // the warm-up answered all three
  h.becameReady(T0 + 1)
  checkIn(h, T0 + 1, { answered: 3 }) // the third, told once ready
  t.equal(h.requests, 0, 'a warm-up request told after ready is not counted')
  t.equal(h.state, 'ready')
  checkIn(h, T0 + 2, { answered: 4 })
  t.equal(h.requests, 1)
  t.equal(h.totalRequests, 1)
  t.equal(h.recycleDue, null)
  checkIn(h, T0 + 3, { answered: 5 })
  t.equal(h.recycleDue, 'max-requests')

  const { h: leaky } = readyHandle({ maxRss: 100 })
  leaky.measured(100 * 1024 * 1024)
  t.equal(leaky.recycleDue, null, 'at the limit: kept')
  leaky.measured(100 * 1024 * 1024 + 1)
  t.equal(leaky.recycleDue, 'max-rss')

  const { h: asked } = readyHandle()
  asked.recycleWhenPossible('recycle')
  t.equal(asked.recycleDue, 'recycle')
})

t.test('what the supervisor records through the handle', async (t) => {
  const { h } = handle()
  h.attach(fakeChild(), T0)
  h.brokeChannel('a frame that is not JSON')
  t.same(h.lastError, { message: 'broke the pool channel: a frame that is not JSON' })
  h.reportedBootError({ message: 'Cannot find module x' })
  h.brokeChannel('again')
  h.bootTimedOut()
  t.same(h.lastError, { message: 'Cannot find module x' }, 'the app\'s own word is kept')
  h.warmupFailed(new Error('GET / answered 500'))
  t.same(h.lastError, { message: 'warm-up failed: GET / answered 500' })
  h.requestQueued()
  h.requestQueued()
  t.equal(h.queued, 2)
  h.announcedGone()
  t.equal(h.goneAnnounced, true)
  h.attach(fakeChild(), T0 + 1)
  t.equal(h.goneAnnounced, false, 'each process is announced once')
  t.equal(h.lastError, null, 'an earlier process\'s error explains nothing about this one')
  h.released()
  t.equal(h.drain, null, 'released without a drain: nothing to release')
})

t.test('retiring: a drained process that left its port with requests open hands them over; ' +
  'the slot goes on', async (t) => {
  const { h, child, changes } = readyHandle()
  checkIn(h, T0, { open: 3 })
  h.startDrain('reload', T0, 30000)
  h.released()
  carryOut(h, h.due(T0 + 10))
  const r = h.retired(T0 + 20)
  t.same({ child: r.child === child, slot: r.slot, reason: r.reason, termAt: r.termAt, killAt: r.killAt },
    { child: true, slot: 1, reason: 'reload', termAt: T0 + 30000, killAt: T0 + 30500 },
    'its drain\'s deadlines go with it')
  t.equal(h.state, 'dead')
  t.equal(h.alive, false)
  t.equal(h.dueForRespawn(T0 + 20), true, 'the slot starts again at once')
  t.same(changes.slice(-2), ['busy→draining', 'draining→dead'])
  const { h: closed } = readyHandle()
  closed.startDrain('listener-closed', T0, 30000)
  closed.retired(T0)
  t.equal(closed.respawnDelay, 100, 'after a closed listener: the crash backoff')
})

t.test('tunnels: counted as the check-ins say, never busy nor active; the next process starts with none', async (t) => {
  const { h, changes } = readyHandle()
  h.checkedIn({ rss: 1, open: 0, tunnels: 50, tunnelsOpened: 60, answered: 0, active: false }, T0 + 100)
  t.equal(h.state, 'ready', '50 tunnels and no request: ready, not busy')
  t.same([h.snapshot(T0 + 100).tunnels, h.snapshot(T0 + 100).tunnelsOpened], [50, 60])
  t.same(h.due(T0 + 100 + POLICY.timeout + 1000), null, 'idle: the heartbeat timeout, not --timeout, judges it')
  t.same(changes, ['dead→booting', 'booting→ready'])
  h.checkedIn({ rss: 1, open: 0, answered: 0, active: false }, T0 + 200)
  t.equal(h.tunnels, 0, 'a check-in without tunnels says none')
  h.checkedIn({ rss: 1, open: 0, tunnels: 5, tunnelsOpened: 65, answered: 0, active: false }, T0 + 300)
  h.exited(null, 'SIGKILL', T0 + 400, { poolStopping: false })
  t.equal(h.snapshot(T0 + 400).tunnels, 0, 'gone with its process')
  h.attach(fakeChild(), T0 + 500)
  t.same([h.tunnels, h.tunnelsOpened], [0, 0])
})
