'use strict'

// The supervisor's policy without real processes: a fake fork hands out child objects the test
// speaks for (IPC messages, exits), a fake clock moves only when the test says so, and so do
// the pool's timers (they fire as the clock passes them: nothing else ticks the loop but the
// events), and signals are recorded instead of sent. Each test runs in well under a second; the
// real-process tests (supervision, lifecycle, operations) stay.

const t = require('tap')
const path = require('node:path')
const { EventEmitter } = require('node:events')
const { Duplex } = require('node:stream')
const { encode, MAX_FRAME } = require('../../lib/protocol/channel')
const { performance } = require('node:perf_hooks')
const { Pool } = require('../..')
const { workerCeiling } = require('../../lib/options/table')
const { createControlServer } = require('../../lib/control/server')
const { sendCommand } = require('../../lib/control/client')
const { FIXTURES, tempDir } = require('../helpers')

// A child whose pool channel (stdio[3], lib/protocol/channel.js) the test speaks into with `say`
// and whose frames from the supervisor land in `sent`.
class FakeChild extends EventEmitter {
  constructor (pid, spec) {
    super()
    this.pid = pid
    this.slot = spec.slot
    this.exitCode = null
    this.signalCode = null
    this.sent = []
    this.signals = []
    const channel = new Duplex({
      read () {},
      write: (frame, encoding, done) => { this.sent.push(JSON.parse(frame)); done() }
    })
    this.stdio = [null, null, null, channel]
  }

  say (type, fields = {}) { this.write(encode({ v: 1, type, ...fields })) }
  // A check-in (lib/worker/link.js): its loop came round holding `open`, having answered `answered`.
  checkIn ({ open = 0, answered = 0, active = open > 0, rss = 1 } = {}) {
    this.say('check-in', { rss, open, answered, active })
  }

  write (bytes) { this.stdio[3].push(bytes) }

  exit (code, signal = null) {
    this.exitCode = code
    this.signalCode = signal
    this.stdio[3].destroy() // the channel closes with the process
    this.emit('exit', code, signal)
  }
}

// A fork that fails as Node's does when the process table or the descriptor table is full.
function spawnError (code = 'EMFILE', errno = -24) {
  return Object.assign(new Error(`spawn /usr/bin/node ${code}`), { code, errno, syscall: 'spawn /usr/bin/node' })
}

// A pool on a fake system. `at` is the fake clock; `step()` lets the pool's ticks run;
// `advance(ms)` moves the clock and fires the timers it passes, as time would.
// `sys.failFork(spec)` may return { error, sync }: that fork throws `error` (sync), or hands back
// a child without a pid whose 'error' follows, as Node's fork() does for EMFILE and EAGAIN.
function harness (t, options = {}) {
  const sys = {
    at: 1e9,
    pids: 1 << 30, // above any real pid: nothing real can ever be signalled
    forks: [],
    order: [], // fronts' workerGone and signals, in the order they happened
    failFork: () => null,
    fork: (spec) => {
      const failure = sys.failFork(spec)
      if (failure?.sync) throw failure.error
      const c = new FakeChild(failure ? undefined : sys.pids++, spec)
      sys.forks.push(c)
      if (failure) process.nextTick(() => c.emit('error', failure.error))
      return c
    },
    signal: (child, sig) => { child.signals.push(sig); sys.order.push(`${sig} ${child.slot}`); return true },
    captureRemnant: () => null,
    bindError: async () => null,
    endLeftovers: async () => ({ ended: [], killed: [], supervisors: [] }),
    startReaper: () => ({ stop () {} }),
    warmUp: async () => {}, // --warmup: answered at once
    now: () => sys.at,
    wall: 1.7e12, // the wall clock's offset from `at`: a step moves it alone, as NTP moves CLOCK_REALTIME
    wallClock: () => sys.wall + sys.at,
    timers: new Set(), // { at, fn }: armed, not yet fired
    setTimer: (fn, ms) => { const timer = { at: sys.at + ms, fn }; sys.timers.add(timer); return timer },
    clearTimer: (timer) => sys.timers.delete(timer)
  }
  const logs = []
  const logger = {}
  const child = (bindings) => {
    const log = { child: (more) => child({ ...bindings, ...more }) }
    for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal']) {
      log[level] = (obj) => logs.push({ level, ...bindings, ...obj })
    }
    return log
  }
  Object.assign(logger, child({}))
  const front = {
    name: 'fake',
    calls: [],
    context: null,
    async start (context) { front.context = context },
    workerReady (w) { front.calls.push(`ready ${w.slot}`) },
    workerRequestEnded (w, id) { front.calls.push(`ended ${w.slot} ${id}${w.retired ? ' (retired)' : ''}`) },
    workerAwaiting (w, { open }) { front.calls.push(`awaiting ${w.slot} ${open}`) },
    workerGone (w) { front.calls.push(`gone ${w.slot}`); sys.order.push(`gone ${w.slot}`) },
    async drain (w) { front.calls.push(`drain ${w.slot}`) },
    stopping () {},
    async stop () {},
    status () { return { type: 'fake' } }
  }
  const pool = new Pool({
    app: path.join(FIXTURES, 'handler.js'),
    workers: 1,
    workerPort: 20000,
    logger,
    fronts: [front],
    ...options
  }, { system: sys })
  // Whatever a test left running is killed, and the fake children exit as real ones would.
  t.teardown(async () => {
    const stopped = pool.kill()
    await step()
    for (const c of sys.forks) {
      if (c.pid !== undefined && c.exitCode === null && c.signalCode === null) c.exit(null, 'SIGKILL')
    }
    await Promise.race([stopped, new Promise((resolve) => setTimeout(resolve, 1000))])
  })
  const step = async (n = 3) => { for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve)) }
  const latest = (slot) => sys.forks.filter((c) => c.slot === slot).at(-1)
  const advance = async (ms) => {
    sys.at += ms
    for (;;) {
      const due = [...sys.timers].filter((timer) => timer.at <= sys.at).sort((a, b) => a.at - b.at)[0]
      if (!due) break
      sys.timers.delete(due)
      due.fn()
    }
    await step()
  }
  return { pool, sys, logs, front, step, latest, advance }
}

async function started (h, slots = 1) {
  const starting = h.pool.start()
  await h.step()
  for (let s = 1; s <= slots; s++) h.latest(s).say('ready')
  await h.step()
  await starting
}

// Counts the pool's ticks from now on: () → how many ran.
function countTicks (pool) {
  let ticks = 0
  const tick = pool.tick
  pool.tick = function () { ticks++; return tick.call(this) }
  return () => ticks
}

// A reload whose rejection the test asserts later: without the catch, a rejection the test has
// not awaited yet would count as unhandled.
function reloadAssertedLater (h) {
  const reloading = h.pool.reload()
  reloading.catch(() => {})
  return reloading
}

t.test('a front is started with its FrontContext (lib/fronts/front.js), never the Pool itself', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const c = h.front.context
  t.not(c, h.pool)
  t.same(Object.keys(c).sort(),
    ['agentAsked', 'logger', 'metrics', 'portOf', 'target', 'watchRequest', 'workerRefusing', 'workers'],
    'what a front may know of the pool, and no more (and what it may tell it)')
  t.equal(c.agentAsked(), false, 'no agent here: nothing in front watches the pool')
  t.ok(Object.isFrozen(c))
  t.equal(c.logger, h.pool.logger)
  t.equal(c.metrics, h.pool.metrics, 'the registry fronts add their series to')
  t.same(c.workers().map((w) => [w.slot, w.state]), [[1, 'ready'], [2, 'ready']],
    'the supervisor\'s snapshots, read now')
  t.equal(c.portOf(2), 20001)
  t.equal(c.target(), 2)
  h.latest(1).checkIn({ open: 1 })
  await h.step()
  t.equal(c.workers()[0].state, 'busy', 'fresh at each call')
})

t.test('backoff: 20 crashes in a row, ×1.5 each from 100 ms, capped at 15 s; reset after healthy uptime', async (t) => {
  const h = harness(t)
  await started(h)
  const want = (i) => Math.min(100 * 1.5 ** i, 15000)
  for (let i = 0; i < 20; i++) {
    const child = h.latest(1)
    child.exit(1)
    await h.step()
    const handle = h.pool.handles.get(1)
    t.equal(handle.respawnDelay, want(i), `crash ${i + 1}: ${want(i)} ms`)
    const forks = h.sys.forks.length
    await h.advance(Math.ceil(want(i)) - 1)
    t.equal(h.sys.forks.length, forks, 'not respawned before its time')
    await h.advance(1)
    t.equal(h.sys.forks.length, forks + 1, 'respawned at its time')
    h.latest(1).say('ready')
    await h.step()
  }
  await h.advance(30000) // healthy for --healthy-after
  const healthy = h.latest(1)
  healthy.exit(1)
  await h.step()
  t.equal(h.pool.handles.get(1).respawnDelay, 0, 'up --healthy-after: no crash loop, respawned at once')
  t.not(h.latest(1), healthy)
  h.latest(1).say('ready')
  await h.step()
  h.latest(1).exit(1)
  await h.step()
  t.equal(h.pool.handles.get(1).respawnDelay, 100, 'the count started over')
})

// A worker that answered requests, then SIGKILLed from outside (the OOM killer, an operator).
async function servedThenKilled (h, slot) {
  const child = h.latest(slot)
  child.checkIn({ open: 0, answered: 1, active: true })
  await h.step()
  child.exit(null, 'SIGKILL')
  await h.step()
  return child
}

t.test('kills from outside are no crash loop: a worker that answered a request is respawned at once, ' +
  'however often', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  for (let i = 0; i < 20; i++) {
    const slot = 1 + (i % 2)
    const killed = await servedThenKilled(h, slot)
    const handle = h.pool.handles.get(slot)
    t.equal(handle.lastExit.reason, 'crashed', `kill ${i + 1}: still told as an unplanned exit`)
    t.not(h.latest(slot), killed, `kill ${i + 1}: respawned in the same tick, without waiting`)
    t.equal(handle.respawnDelay, 0)
    t.equal(handle.crashes, 0, 'and no crash counted')
    h.latest(slot).say('ready')
    await h.step()
  }
  t.match(h.logs.filter((l) => l.event === 'respawn-scheduled').map((l) => l.delay), Array(20).fill(0),
    'each respawn logged with no delay')
  // The same worker dying before it answered anything is what backoff is for.
  const fresh = h.latest(1)
  fresh.exit(1)
  await h.step()
  t.equal(h.pool.handles.get(1).respawnDelay, 100, 'ready but never served, then dead: the crash backoff')
  t.equal(h.latest(1), fresh, 'not respawned before its time')
})

t.test('a crash-looping app still backs off: a worker that dies on its first request answers none', async (t) => {
  const h = harness(t)
  await started(h)
  for (let i = 0; i < 4; i++) {
    const child = h.latest(1)
    child.checkIn({ open: 1 }) // the request it dies on
    await h.step()
    child.exit(1)
    await h.step()
    t.equal(h.pool.handles.get(1).respawnDelay, 100 * 1.5 ** i, `crash ${i + 1}: backoff grows`)
    await h.advance(Math.ceil(100 * 1.5 ** i))
    h.latest(1).say('ready')
    await h.step()
  }
})

t.test('a reload asked while a slot waits out its backoff runs, ' +
  'and that slot starts the new code at once', async (t) => {
  const h = harness(t, { workers: 2, restartDelay: 10000 })
  await started(h, 2)
  const crashed = h.latest(2)
  crashed.exit(1) // ready, never served: backoff
  await h.step()
  t.equal(h.pool.handles.get(2).respawnDelay, 10000)
  const reloading = h.pool.reload()
  await h.step()
  t.equal(h.latest(2), crashed, 'still waiting while the canary boots')
  h.latest(0).say('ready')
  await h.step()
  t.not(h.latest(2), crashed, 'the new code gets its chance now, not 10 s later')
  t.equal(h.pool.handles.get(2).codeGeneration, 1)
  h.latest(2).say('ready')
  await rollThrough(h, [1], t)
  await h.step()
  t.same((await reloading).replaced.map((r) => r.slot), [1], 'the reload ran to its end')
})

t.test('crash-loop breaker: 5 deaths before ready give the slot up; every slot given up fails start()', async (t) => {
  const h = harness(t, { maxBootFailures: 5 })
  const starting = h.pool.start()
  starting.catch(() => {})
  await h.step()
  for (let i = 0; i < 5; i++) {
    h.latest(1).say('boot-error', { error: { message: 'Cannot find module x', stack: 'Error: Cannot find module x' } })
    h.latest(1).exit(1)
    await h.step()
    if (i < 4) await h.advance(20000)
  }
  t.equal(h.pool.handles.get(1).state, 'given-up')
  t.equal(h.sys.forks.length, 5, 'five processes, no sixth')
  await t.rejects(starting, { code: 'POOL_E_BOOT_FAILED', message: /Cannot find module x/ })
})

t.test('boot timeout: a worker not ready in time is killed, its exit is a boot-timeout, ' +
  'the slot respawns', async (t) => {
  const h = harness(t, { workers: 2, bootTimeout: 5000 })
  h.pool.start().catch(() => {})
  await h.step()
  h.latest(2).say('ready')
  await h.advance(5000)
  t.same(h.latest(1).signals, [], 'not at the deadline')
  await h.advance(1)
  t.same(h.latest(1).signals, ['SIGKILL'], 'killed past it')
  h.latest(1).exit(null, 'SIGKILL')
  await h.step()
  t.equal(h.pool.handles.get(1).lastExit.reason, 'boot-timeout')
  t.equal(h.pool.handles.get(1).state, 'dead')
  t.match(h.logs.find((l) => l.event === 'respawn-scheduled'), { slot: 1 })
})

t.test('hung kill: a worker holding a request whose loop stops checking in, --timeout plus one check-in interval on; ' +
  'the front hears of it before the signal', async (t) => {
  const h = harness(t, { timeout: 3000 })
  await started(h)
  const hung = []
  h.pool.on('hung', (w) => hung.push(w.reason))
  h.latest(1).checkIn({ open: 1 }) // its last word: the loop stops on a render
  await h.step()
  await h.advance(3500)
  t.same(hung, [], 'not at --timeout + 500 ms (its check-in interval)')
  await h.advance(1)
  t.same(hung, ['timeout'])
  t.same(h.sys.order, ['gone 1', 'SIGKILL 1'], 'out of rotation first, then killed')
  t.match(h.logs.find((l) => l.event === 'hung'), { slot: 1, reason: 'timeout', ms: 3501, open: 1 })
  h.latest(1).exit(null, 'SIGKILL')
  await h.step()
  t.equal(h.pool.handles.get(1).lastExit.reason, 'timeout')
})

t.test('a request as long as it likes kills nothing while its worker checks in: ' +
  'two minutes at --timeout 3 s', async (t) => {
  const h = harness(t, { timeout: 3000 })
  await started(h)
  const worker = h.latest(1)
  for (let ms = 0; ms < 120000; ms += 500) {
    worker.checkIn({ open: 40 })
    await h.advance(500)
  }
  t.same(worker.signals, [], 'no signal')
  t.equal(h.logs.filter((l) => l.event === 'hung').length, 0)
  t.equal(h.pool.handles.get(1).state, 'busy', 'busy by its check-ins, all along')
})

t.test('an idle pool ticks at its deadlines only: once per heartbeat timeout, not on a period; ' +
  'a silent worker is killed at its deadline', async (t) => {
  const h = harness(t, { workers: 2, heartbeatTimeout: 10000 })
  await started(h, 2)
  const ticks = countTicks(h.pool)
  for (let second = 0; second < 30; second++) {
    h.latest(1).checkIn()
    h.latest(2).checkIn()
    for (let i = 0; i < 10; i++) await h.advance(100)
  }
  t.ok(ticks() >= 1 && ticks() <= 4,
    `${ticks()} ticks in 30 s of check-ins: each where a silence deadline was, none per check-in`)
  t.same([h.latest(1).signals, h.latest(2).signals], [[], []])
  const before = ticks()
  h.latest(2).checkIn() // its last word; worker 1 checks in on
  const lastWord = h.sys.at
  for (let second = 1; second <= 10; second++) {
    h.latest(1).checkIn()
    await h.advance(1000)
  }
  t.same(h.latest(2).signals, [], `not at ${h.sys.at - lastWord} ms`)
  await h.advance(1)
  t.same(h.latest(2).signals, ['SIGKILL'], 'killed 1 ms past --heartbeat-timeout')
  t.match(h.logs.find((l) => l.event === 'hung'), { slot: 2, reason: 'heartbeat', ms: 10001 })
  t.ok(ticks() - before <= 2, `${ticks() - before} ticks for those 10 s`)
})

t.test('check-ins are recorded without a tick; one that makes a worker due for recycling wakes one tick', async (t) => {
  const h = harness(t, { workers: 1, timeout: 3000, maxRequests: 30, maxRequestsJitter: 0 })
  await started(h)
  const worker = h.latest(1)
  const slot = h.pool.handles.get(1)
  const busy = []
  h.pool.on('busy', (w) => busy.push(w.slot))
  h.pool.on('idle', (w) => busy.push(-w.slot))
  const ticks = countTicks(h.pool)
  for (let i = 1; i <= 20; i++) {
    worker.checkIn({ open: 2, answered: i })
    await h.step(1)
    t.equal(slot.state, 'busy')
    worker.checkIn({ open: 0, answered: i, rss: 1000 + i })
    await h.step(1)
  }
  await h.step()
  t.equal(ticks(), 0, '40 check-ins, each in a read of its own: no tick')
  t.same([slot.state, slot.requests, slot.rss, slot.open], ['ready', 20, 1020, 0], 'each recorded in the handle')
  t.equal(busy.length, 40, 'busy and idle told as the check-ins change them')
  worker.checkIn({ open: 1, answered: 31 })
  t.ok(h.pool.tickScheduled, 'past --max-requests: a tick is asked for')
  await h.step(1)
  t.equal(ticks(), 1, 'one tick')
  t.match(h.logs.find((l) => l.event === 'recycle'), { slot: 1, reason: 'max-requests', requests: 31 })
})

t.test('a deadline is decided on all the check-ins written before it: the timer\'s tick comes after the channels are ' +
  'read', async (t) => {
  const h = harness(t, { workers: 1, timeout: 400 }) // a check-in every 100 ms while active
  await started(h)
  const worker = h.latest(1)
  worker.checkIn({ open: 1 })
  await h.step()
  await h.advance(499)
  worker.checkIn({ open: 1 }) // just before the deadline
  await h.advance(1)
  t.same(worker.signals, [], 'heard before the tick the timer asked for: alive')
  await h.advance(500)
  t.same(worker.signals, ['SIGKILL'], 'silent past the next deadline: killed')
})

t.test('a check-in behind other events waits its turn: a worker ready then busy at once is busy', async (t) => {
  const h = harness(t, { workers: 1 })
  const starting = h.pool.start()
  await h.step()
  h.latest(1).write(encode({ v: 1, type: 'ready' }) +
    encode({ v: 1, type: 'check-in', rss: 1, open: 1, answered: 0, active: true }))
  await h.step()
  await starting
  t.equal(h.pool.handles.get(1).state, 'busy')
  h.latest(1).checkIn({ answered: 1 })
  await h.step()
  t.same([h.pool.handles.get(1).state, h.pool.handles.get(1).requests], ['ready', 1])
})

t.test('a broken channel: garbage or an oversize frame kills the worker like a crash, ' +
  'whatever came before it', async (t) => {
  const h = harness(t)
  await started(h)
  const cases = [
    ['not json\n', /not JSON: "not json"/],
    [Buffer.alloc(MAX_FRAME + 1, 'x'), /longer than 1048576 bytes/],
    [encode({ v: 1, type: 'check-in', rss: 1 }) + '{"v":1,"type":"check-in"\n', /not JSON/]
  ]
  for (const [i, [bytes, problem]] of cases.entries()) {
    const child = h.latest(1)
    child.write(bytes)
    await h.step()
    t.same(child.signals, ['SIGKILL'], `case ${i + 1}: killed`)
    t.match(h.logs.filter((l) => l.event === 'channel-broken').at(-1),
      { level: 'error', slot: 1, pid: child.pid, problem }, 'one line says who and why')
    child.write('more garbage\n')
    await h.step()
    t.same(child.signals, ['SIGKILL'], 'what follows is dropped, not told again')
    child.exit(null, 'SIGKILL')
    await h.step()
    t.match(h.pool.handles.get(1).lastExit, { reason: 'channel-broken' })
    await h.advance(h.pool.handles.get(1).respawnDelay)
    t.not(h.latest(1), child, 'the slot respawns, with the crash backoff')
    h.latest(1).say('ready')
    await h.step()
  }
  t.same(h.pool.handles.get(1).crashes, 3, 'each counted as a crash')
})

t.test('what a worker says of a request reaches the fronts at once, with no tick: a watched request\'s end, ' +
  'its awaiting word', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const c = h.front.context
  const ticks = countTicks(h.pool)
  t.equal(c.watchRequest({ slot: 1, pid: h.latest(1).pid }, 'req-7'), true)
  t.match(h.latest(1).sent, [{ type: 'watch-request', id: 'req-7' }], 'the worker is asked')
  t.equal(c.watchRequest({ slot: 1, pid: 12345 }, 'req-8'), false, 'not a process that no longer holds the slot')
  h.latest(1).say('request-ended', { id: 'req-7' })
  h.latest(2).say('awaiting', { open: 3, last: 'req-9' })
  await h.step()
  t.same(h.front.calls.filter((c) => !c.startsWith('ready')), ['ended 1 req-7', 'awaiting 2 3'])
  t.equal(ticks(), 0, 'none of it needed a tick')
})

t.test('warm-up requests are in the worker\'s count of what it answered, and not in --max-requests\'s', async (t) => {
  const h = harness(t, { workers: 1, warmup: ['/w'], warmupRequests: 3 })
  await started(h, 1)
  const slot = h.pool.handles.get(1)
  h.latest(1).checkIn({ answered: 4, active: true })
  await h.step()
  t.equal(slot.requests, 1, 'three warm-ups and one request')
})

t.test('--max-rss: an idle worker whose heartbeat reports too much is recycled without a request', async (t) => {
  const h = harness(t, { maxRss: 100 })
  await started(h)
  const worker = h.latest(1)
  worker.checkIn({ rss: 90 * 1024 * 1024 })
  await h.step()
  t.same(worker.sent, [], 'under the limit: kept')
  worker.checkIn({ rss: 101 * 1024 * 1024 })
  await h.step()
  t.match(h.logs.find((l) => l.event === 'recycle'), { slot: 1, reason: 'max-rss', rss: 101 * 1024 * 1024 })
  t.match(worker.sent, [{ type: 'stop' }], 'drained at once: it was idle')
  worker.exit(0)
  await h.step()
  t.match(h.pool.handles.get(1).lastExit, { reason: 'max-rss' })
  t.equal(h.sys.forks.length, 2, 'and replaced')
})

t.test('drain escalation: STOP once the fronts let go; a worker still holding requests gets SIGTERM at the graceful ' +
  'timeout, SIGKILL after --kill-timeout', async (t) => {
  const h = harness(t, { workers: 2, gracefulTimeout: 1000, killTimeout: 500 })
  await started(h, 2)
  h.latest(2).checkIn({ open: 1 })
  await h.step()
  const stopped = h.pool.stop()
  await h.step()
  t.match(h.latest(1).sent, [{ type: 'stop' }], 'the idle worker is asked to leave')
  t.match(h.latest(2).sent, [{ type: 'stop' }], 'and so is the busy one: it finishes what it holds, off its port')
  h.latest(2).say('left-port', { open: 1 })
  for (let tick = 0; tick < 20; tick++) { h.pool.wake(); await h.advance(5) }
  t.equal(h.latest(1).sent.length, 1, 'once in 20 ticks, not at every tick')
  t.equal(h.pool.retirees.size, 0, 'a stop retires nobody: no slot starts again')
  h.latest(1).exit(0)
  await h.advance(900)
  t.same(h.latest(2).signals, ['SIGTERM'])
  await h.advance(499)
  t.same(h.latest(2).signals, ['SIGTERM'])
  await h.advance(1)
  t.same(h.latest(2).signals, ['SIGTERM', 'SIGKILL'])
  h.latest(2).exit(null, 'SIGKILL')
  await h.step()
  t.same(await stopped, { clean: false }, 'a stop that had to signal is not clean')
  t.equal(h.pool.handles.get(1).lastExit.reason, 'stop')
  t.equal(h.pool.handles.get(2).lastExit.reason, 'stop-killed')
})

// Canary ready; then slots drain one at a time (batch 1), each respawning with the new code.
async function rollThrough (h, slots, t, generation = 1) {
  for (const slot of slots) {
    await h.step()
    const old = h.latest(slot)
    t.match(old.sent, [{ type: 'stop' }], `slot ${slot} drained`)
    old.exit(0)
    await h.step()
    t.not(h.latest(slot), old, `slot ${slot} respawned at once`)
    t.equal(h.pool.handles.get(slot).codeGeneration, generation, 'with the new code generation')
    h.latest(slot).say('ready')
  }
}

t.test('reload: a canary first, then one code generation rolled out a batch at a time', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const oldPids = [h.latest(1).pid, h.latest(2).pid]
  const reloading = h.pool.reload()
  await h.step()
  const canary = h.latest(0)
  t.ok(canary, 'a canary process, outside the slots')
  t.same(h.front.calls.filter((c) => c.startsWith('drain')), [], 'no slot touched while the canary boots')
  canary.say('ready')
  await h.step()
  t.same(canary.signals, ['SIGKILL'], 'the canary is done once ready')
  t.equal(h.logs.find((l) => l.event === 'reload-canary-ready').pid, canary.pid, 'its log line names it')
  t.equal(h.pool.codeGeneration, 1)
  t.equal(h.pool.reconciler.unavailableCount(), 1, 'one slot out of service at a time')
  await rollThrough(h, [1, 2], t)
  const result = await reloading
  t.same(result.replaced,
    [{ slot: 1, oldPid: oldPids[0], newPid: h.latest(1).pid },
      { slot: 2, oldPid: oldPids[1], newPid: h.latest(2).pid }])
})

t.test('reload: a canary that cannot boot fails the reload and touches no slot', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const reloading = reloadAssertedLater(h)
  await h.step()
  h.latest(0).say('boot-error', { error: { message: 'SyntaxError: Unexpected token', stack: '...' } })
  h.latest(0).exit(1)
  await h.step()
  await t.rejects(reloading, { code: 'POOL_E_RELOAD_FAILED', message: /Unexpected token/ })
  t.equal(h.pool.codeGeneration, 0)
  t.same(h.front.calls.filter((c) => c.startsWith('drain')), [])
  t.equal(h.sys.forks.length, 3, 'two workers and the canary, nothing more')
})

t.test('reload: a canary not ready within --boot-timeout is killed once and fails the reload', async (t) => {
  const h = harness(t, { workers: 1, bootTimeout: 5000, heartbeatTimeout: 60000 })
  await started(h)
  const reloading = reloadAssertedLater(h)
  await h.step()
  const canary = h.latest(0)
  await h.advance(5000)
  t.same(canary.signals, [], 'not at the deadline')
  await h.advance(1)
  t.same(canary.signals, ['SIGKILL'], 'killed once past it')
  await t.rejects(reloading, { code: 'POOL_E_RELOAD_FAILED', message: /not ready within 5000 ms/ })
  await h.advance(50)
  t.same(canary.signals, ['SIGKILL'], 'and not again while its exit is on the way')
  canary.exit(null, 'SIGKILL')
  await h.step()
  t.equal(h.pool.codeGeneration, 0, 'no slot touched')
})

t.test('reload: a canary that breaks its channel is killed and fails the reload', async (t) => {
  const h = harness(t, { workers: 1 })
  await started(h)
  const reloading = reloadAssertedLater(h)
  await h.step()
  const canary = h.latest(0)
  canary.write('garbage\n')
  await h.step()
  t.same(canary.signals, ['SIGKILL'])
  t.match(h.logs.find((l) => l.event === 'channel-broken'), { level: 'error', pid: canary.pid, problem: /not JSON/ })
  canary.exit(null, 'SIGKILL')
  await h.step()
  await t.rejects(reloading,
    { code: 'POOL_E_RELOAD_FAILED', message: /the new code broke the pool channel: a frame that is not JSON/ })
  t.equal(h.pool.codeGeneration, 0, 'no slot touched')
})

t.test('reload: a new worker that dies before ready stops the reload there', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const reloading = reloadAssertedLater(h)
  await h.step()
  h.latest(0).say('ready')
  await h.step(4)
  h.latest(1).exit(0) // drained
  await h.step()
  h.latest(1).exit(1) // the new process dies before ready
  await h.step()
  await t.rejects(reloading, { code: 'POOL_E_RELOAD_FAILED' })
  await h.step()
  t.same(h.latest(2).sent, [], 'slot 2 keeps its old worker')
})

t.test('stop during a reload: the reload rejects STOPPING, its canary is killed once, ' +
  'the stop waits for it', async (t) => {
  const h = harness(t, { workers: 1 })
  await started(h)
  const reloading = reloadAssertedLater(h)
  await h.step()
  const canary = h.latest(0)
  const stopped = h.pool.stop()
  await h.step()
  await t.rejects(reloading, { code: 'POOL_E_STOPPING' })
  t.equal(h.pool.status().reload, null, 'no reload left in the books')
  t.same(canary.signals, ['SIGKILL'])
  h.latest(1).exit(0)
  await h.advance(50)
  t.equal(h.pool.phase, 'stopping', 'the canary is still on its way out')
  t.same(canary.signals, ['SIGKILL'], 'killed once')
  canary.exit(null, 'SIGKILL')
  await h.step()
  t.same(await stopped, { clean: true })
})

t.test('reload: a canary whose fork throws fails the reload at once', async (t) => {
  const h = harness(t, { workers: 1 })
  await started(h)
  h.sys.failFork = (spec) => spec.slot === 0 ? { error: spawnError('EAGAIN', -11), sync: true } : null
  await t.rejects(h.pool.reload(),
    { code: 'POOL_E_RELOAD_FAILED', message: /cannot start a process of the new code: spawn \/usr\/bin\/node EAGAIN/ })
  h.sys.failFork = () => null
  const again = h.pool.reload()
  await h.step()
  h.latest(0).say('ready')
  await h.step()
  await rollThrough(h, [1], t)
  t.same((await again).replaced.map((r) => r.slot), [1], 'the next reload runs')
})

t.test('scale during a reload: the new slot starts with the new code; the reload completes', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const reloading = h.pool.reload()
  await h.step()
  h.latest(0).say('ready')
  await h.step()
  const scaling = h.pool.scale(3)
  await h.step()
  t.equal(h.pool.handles.get(3).codeGeneration, 1, 'slot 3 boots the new code generation')
  h.latest(3).say('ready')
  await rollThrough(h, [1, 2], t)
  t.same(await scaling, { from: 2, to: 3 })
  const { replaced } = await reloading
  t.same(replaced.map((r) => r.slot), [1, 2], 'slot 3 needed no replacing')
})

t.test('reloads asked while one runs: merged into one that follows it, ' +
  'every caller answered by the reload that covers it', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const canaries = () => h.sys.forks.filter((c) => c.slot === 0)
  const first = h.pool.reload()
  const joined = h.pool.reload() // before the first has loaded any code: it covers this one too
  await h.step()
  t.equal(canaries().length, 1, 'one canary for both')
  const later = Array.from({ length: 10 }, () => h.pool.reload()) // the code the first loads may predate these
  await h.step()
  t.equal(canaries().length, 1, 'no second reload while the first runs')
  t.equal(h.pool.status().reload.queued, 10, 'the status says how many wait for the next one')
  t.equal(h.logs.filter((l) => l.event === 'reload-queued').length, 1, 'told once')
  h.latest(0).say('ready')
  await rollThrough(h, [1, 2], t)
  const a = await first
  t.same(await joined, a, 'the caller who came before the canary shares the first reload')
  await h.step()
  t.equal(canaries().length, 2, 'then one more reload, for all ten')
  t.equal(h.pool.status().reload.queued, 0)
  h.latest(0).say('ready')
  await rollThrough(h, [1, 2], t, 2)
  const answers = await Promise.all(later)
  t.ok(answers.every((x) => x === answers[0]), 'every caller answered with the reload that covers it')
  t.same(answers[0].replaced.map((r) => r.slot), [1, 2])
  t.not(answers[0], a)
  await h.step()
  t.equal(canaries().length, 2, 'two reloads in all')
  t.equal(h.logs.filter((l) => l.event === 'reloaded').length, 2)
})

t.test('a merged reload runs even when the one before it fails; a stop answers it STOPPING', async (t) => {
  const h = harness(t, { workers: 1 })
  await started(h)
  const failing = reloadAssertedLater(h)
  await h.step()
  const next = reloadAssertedLater(h)
  h.latest(0).say('boot-error', { error: { message: 'SyntaxError: Unexpected token', stack: '...' } })
  h.latest(0).exit(1)
  await h.step()
  await t.rejects(failing, { code: 'POOL_E_RELOAD_FAILED' })
  await h.step()
  t.equal(h.sys.forks.filter((c) => c.slot === 0).length, 2,
    'the next reload boots its own canary (a fix may have been deployed)')
  const queuedAtStop = reloadAssertedLater(h)
  const stopped = h.pool.stop()
  await h.step()
  await t.rejects(next, { code: 'POOL_E_STOPPING' })
  await t.rejects(queuedAtStop, { code: 'POOL_E_STOPPING' }, 'the one waiting behind it too')
  h.latest(0).exit(null, 'SIGKILL')
  h.latest(1).exit(0)
  await h.step()
  await stopped
})

t.test('stop during start: start() rejects STOPPING, booting workers are stopped, the stop resolves', async (t) => {
  const h = harness(t, { workers: 2 })
  const starting = h.pool.start()
  starting.catch(() => {})
  await h.step()
  h.latest(1).say('ready')
  const stopped = h.pool.stop()
  await t.rejects(starting, { code: 'POOL_E_STOPPING' })
  await h.step()
  t.match(h.latest(1).sent, [{ type: 'stop' }], 'the ready one is asked to exit')
  t.match(h.latest(2).sent, [{ type: 'stop' }], 'and so is the booting one')
  h.latest(1).exit(0)
  h.latest(2).exit(0)
  await h.step()
  t.same(await stopped, { clean: true })
  t.equal(h.pool.phase, 'stopped')
})

t.test('commands act in the tick: stop() and kill() change nothing before it runs', async (t) => {
  const h = harness(t, { workers: 1 })
  await started(h)
  h.pool.kill()
  t.same(h.latest(1).signals, [], 'not signalled from inside kill()')
  await h.step()
  t.same(h.latest(1).signals, ['SIGKILL'])
  h.latest(1).exit(null, 'SIGKILL')
  await h.step()
  t.equal(h.pool.phase, 'stopped')
})

t.test('a failed fork is no failed boot: logged with its errno, counted, retried with backoff, ' +
  'never given up', async (t) => {
  const h = harness(t, { workers: 2, maxBootFailures: 2 })
  await started(h, 2)
  const told = []
  h.pool.on('spawn-error', (w) => told.push(w))
  const logsBefore = h.logs.length
  let failing = 0 // forks of slot 1 that fail, alternately thrown and reported by 'error'
  h.sys.failFork = (spec) => spec.slot === 1 && failing > 0 ? { error: spawnError(), sync: failing-- % 2 === 0 } : null
  failing = 6
  h.latest(1).exit(null, 'SIGKILL') // crashed: respawn in 100 ms
  await h.step()
  const slot = h.pool.handles.get(1)
  for (let i = 1; i <= 6; i++) {
    await h.advance(Math.ceil(slot.respawnDelay))
    t.equal(told.length, i, `failed fork ${i} told`)
    t.equal(slot.state, 'dead', 'waiting for its next try, not given up')
    t.equal(slot.respawnDelay, Math.min(100 * 1.5 ** i, 15000), 'with the slot\'s backoff')
  }
  t.equal(slot.bootFailures, 0, 'no boot failure counted')
  const logs = h.logs.slice(logsBefore)
  const lines = logs.filter((l) => l.event === 'spawn-error')
  t.equal(lines.length, 6)
  t.match(lines[0], { level: 'error', slot: 1, code: 'EMFILE', errno: -24, delay: 150 })
  t.match(told[0], { slot: 1, state: 'dead', error: { code: 'EMFILE', errno: -24 } })
  t.same(logs.filter((l) => l.event === 'give-up' || l.event === 'spawn'), [],
    'no give-up, and no process claimed to be spawned')
  const metrics = await h.pool.metrics.registry.getSingleMetricAsString('pool_failures_total')
  t.match(metrics, /pool_failures_total\{reason="worker_spawn_failed"\} 6/)
  await h.advance(Math.ceil(slot.respawnDelay))
  t.equal(slot.state, 'booting', 'the fork works again')
  h.latest(1).say('ready')
  await h.step()
  t.equal(slot.state, 'ready')
  t.equal(slot.restarts, 1, 'only processes that ran count as restarts')
  t.equal(h.pool.handles.get(2).state, 'ready', 'the other slot never noticed')
})

t.test('a failed fork during start: the slot keeps trying, start() waits for it', async (t) => {
  const h = harness(t, { workers: 2, maxBootFailures: 1 })
  let failing = 3
  h.sys.failFork = (spec) => spec.slot === 2 && failing-- > 0 ? { error: spawnError('EAGAIN', -11) } : null
  const starting = h.pool.start()
  await h.step()
  h.latest(1).say('ready')
  for (let i = 0; i < 3; i++) await h.advance(Math.ceil(h.pool.handles.get(2).respawnDelay))
  t.equal(h.pool.phase, 'starting')
  t.match(h.logs.filter((l) => l.event === 'spawn-error').map((l) => l.code), ['EAGAIN', 'EAGAIN', 'EAGAIN'])
  await h.step()
  h.latest(2).say('ready')
  await h.step()
  await starting
  t.equal(h.pool.phase, 'running')
})

// A ready worker crashes, then its next `failures` processes die before ready.
async function giveUp (h, slot, failures) {
  h.latest(slot).exit(1)
  await h.step()
  for (let i = 0; i < failures; i++) {
    await h.advance(Math.ceil(h.pool.handles.get(slot).respawnDelay))
    h.latest(slot).exit(1)
    await h.step()
  }
}

t.test('--given-up-retry: a given-up slot starts over after the delay, not before', async (t) => {
  const h = harness(t, { workers: 2, maxBootFailures: 2, givenUpRetry: 60000, heartbeatTimeout: 3600000 })
  await started(h, 2)
  await giveUp(h, 1, 2)
  const slot = h.pool.handles.get(1)
  t.equal(slot.state, 'given-up')
  const forks = h.sys.forks.length
  await h.advance(59999)
  t.equal(h.sys.forks.length, forks, 'not before --given-up-retry')
  t.equal(slot.state, 'given-up')
  await h.advance(1)
  t.equal(h.sys.forks.length, forks + 1, 'tried again')
  t.match(h.logs.find((l) => l.event === 'given-up-retry'), { slot: 1, after: 60000 })
  h.latest(1).say('ready')
  await h.step()
  t.equal(slot.state, 'ready')
  t.equal(slot.bootFailures, 0)
})

t.test('--given-up-retry 0: only a reload revives a given-up slot', async (t) => {
  const h = harness(t, { workers: 2, maxBootFailures: 1, givenUpRetry: 0, heartbeatTimeout: 48 * 3600000 })
  await started(h, 2)
  await giveUp(h, 1, 1)
  t.equal(h.pool.handles.get(1).state, 'given-up')
  const forks = h.sys.forks.length
  await h.advance(24 * 3600000)
  t.equal(h.pool.handles.get(1).state, 'given-up')
  t.equal(h.sys.forks.length, forks)
})

t.test('the ceiling: min(8 × CPUs, free memory ÷ 128 MB), --max-workers over it, 0 for none', async (t) => {
  const GB = 1024 ** 3
  t.equal(workerCeiling({}, { cpus: 2, memory: 22 * GB }).max, 16, 'CPUs bound it')
  t.equal(workerCeiling({}, { cpus: 64, memory: 1 * GB }).max, 8, 'memory bounds it')
  t.equal(workerCeiling({}, { cpus: 2, memory: 10 * 1024 * 1024 }).max, 1, 'never below 1')
  t.match(workerCeiling({}, { cpus: 2, memory: 22 * GB }).why,
    'the default ceiling of 16 (min(8 × 2 CPUs, 22528 MB free ÷ 128 MB))')
  t.same(workerCeiling({ maxWorkers: 40 }, { cpus: 2, memory: 0 }), { max: 40, why: '--max-workers 40' })
  t.equal(workerCeiling({ maxWorkers: 0 }).max, Infinity)
  t.throws(() => harness(t, { workers: 5, maxWorkers: 4 }),
    {
      code: 'POOL_E_BAD_OPTION',
      message: 'workers (-n) 5 is above --max-workers 4: lower -n, or raise --max-workers (0: no ceiling)'
    })
  const h = harness(t, { workers: 2, maxWorkers: 3 })
  await started(h, 2)
  await t.rejects(h.pool.scale(4),
    {
      code: 'POOL_E_BAD_OPTION',
      message: 'cannot scale to 4 workers: above --max-workers 3; start the pool with a higher --max-workers (0: ' +
        'no ceiling)'
    })
  t.equal(h.pool.target, 2)
  t.equal(h.sys.forks.length, 2, 'nothing forked')
})

t.test('1000 workers: a batch boots at a time; the control socket and a stop are answered while they ' +
  'boot', async (t) => {
  const N = 1000
  const h = harness(t, { workers: N, maxWorkers: 0, maxBooting: 8, workerPort: 20000 })
  const booting = () => h.pool.slots().filter((x) => x.state === 'booting').length
  const starting = h.pool.start()
  starting.catch(() => {}) // the stop below answers it
  await h.step()
  t.equal(h.sys.forks.length, 8, 'the first batch, not a thousand forks in one tick')
  let most = 0
  for (let round = 0; round < 10; round++) {
    for (const c of h.sys.forks.slice(-8)) c.say('ready')
    await h.step()
    most = Math.max(most, booting())
  }
  t.equal(most, 8, 'never more than --max-booting booting')
  t.equal(h.sys.forks.length, 88, 'each ready worker lets the next one boot')
  t.equal(h.pool.slotsWithoutProcess, N - 88, 'the descriptor reserve knows what is still to come')

  const dir = tempDir(t, 'pool-unit-')
  const control = await createControlServer({ path: path.join(dir, 'c.sock'), pool: h.pool })
  t.teardown(() => control.close())
  const status = await sendCommand(control.path, 'status', {}, { timeout: 10000 })
  t.equal(status.workers.length, N, 'the control socket answers while they boot')
  t.equal(status.phase, 'starting')
  await t.rejects(sendCommand(control.path, 'scale', { workers: 2 }, { timeout: 10000 }),
    { code: 'POOL_E_NOT_STARTED' })

  // Heartbeats by the thousand cost no tick; a tick over a thousand slots is linear (its time is
  // only a sanity bound).
  const ticks = countTicks(h.pool)
  for (let i = 0; i < 12; i++) for (const c of h.sys.forks) c.checkIn()
  await h.step()
  t.equal(ticks(), 0, `${12 * h.sys.forks.length} check-ins, no tick`)
  const began = performance.now()
  h.pool.tick()
  const ms = performance.now() - began
  t.comment(`one tick, ${N} slots: ${ms.toFixed(1)} ms`)
  t.ok(ms < 2000, 'sanity bound only')

  const stopped = h.pool.stop()
  await h.step()
  for (const c of h.sys.forks) if (c.sent.some((m) => m.type === 'stop')) c.exit(0)
  await h.step()
  t.same(await stopped, { clean: true }, 'the stop completes while most slots never started')
  t.equal(h.sys.forks.length, 88, 'and nothing was forked after it')
})

t.test('an exit reaches the fronts at the exit event, before the tick, and once', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const exits = []
  h.pool.on('exit', (w) => exits.push(w.slot))
  h.latest(2).exit(null, 'SIGKILL')
  t.same(h.front.calls.filter((c) => c.startsWith('gone')), ['gone 2'], 'out of rotation from the exit event itself')
  t.same(exits, [], 'the exit itself is still the tick\'s to handle')
  await h.step()
  t.same(exits, [2], 'handled by the tick')
  t.same(h.front.calls.filter((c) => c.startsWith('gone')), ['gone 2'], 'the tick does not announce it again')
  t.equal(h.pool.handles.get(2).lastExit.reason, 'crashed')
})

t.test('a worker that says its listener closed: out of ready at once, drained, respawned with the crash backoff, ' +
  'told once', async (t) => {
  const h = harness(t, { workers: 2 })
  await started(h, 2)
  const told = []
  h.pool.on('listener-closed', (w) => told.push({ slot: w.slot, by: w.by, error: w.error }))
  const old = h.latest(1)
  old.say('listener-closed')
  old.say('listener-closed') // an app may close twice, or lie: still one replacement
  await h.step()
  t.same(told, [{ slot: 1, by: 'worker', error: null }], 'told once')
  t.equal(h.pool.handles.get(1).state, 'draining', 'no longer ready: /status and the agent do not count it')
  t.same(h.front.calls.filter((c) => c.startsWith('drain')), ['drain 1'], 'the fronts stop sending it work')
  t.match(old.sent, [{ type: 'stop' }], 'released by the fronts: asked to exit')
  t.match(h.logs.filter((l) => l.event === 'listener-closed'),
    [{ level: 'error', slot: 1, pid: old.pid, by: 'worker' }], 'one log line')
  const metric = await h.pool.metrics.registry.getSingleMetric('pool_failures_total').get()
  t.same(metric.values.filter((v) => v.labels.reason === 'worker_listener_closed').map((v) => v.value), [1],
    'counted once')
  old.exit(0)
  await h.step()
  const slot = h.pool.handles.get(1)
  t.equal(slot.lastExit.reason, 'listener-closed')
  t.equal(slot.respawnDelay, 100, 'the crash backoff: an app that closes at every start is not forked in a tight loop')
  t.equal(h.latest(1), old, 'not respawned before its time')
  await h.advance(100)
  t.not(h.latest(1), old, 'replaced')
  h.latest(1).say('listener-closed', { error: { message: 'accept EMFILE', code: 'EMFILE' } })
  await h.step()
  t.same(told[1], { slot: 1, by: 'worker', error: { message: 'accept EMFILE', code: 'EMFILE' } },
    'a server that failed: the same, with its error')
  t.equal(h.pool.handles.get(2).state, 'ready', 'the other slot is untouched')
})

t.test('a front reporting a worker that refuses connections (its FrontContext): the worker is replaced; ' +
  'a report about an old process is ignored', async (t) => {
  const h = harness(t, { workers: 1 })
  await started(h)
  const old = h.latest(1)
  h.front.context.workerRefusing({ slot: 1, pid: old.pid + 1000 }, { refusals: 3, front: 'fake' })
  h.front.context.workerRefusing({ slot: 7, pid: old.pid }, { refusals: 3, front: 'fake' })
  await h.step()
  t.equal(h.pool.handles.get(1).state, 'ready', 'another pid, or no such slot: nothing happens')
  h.front.context.workerRefusing({ slot: 1, pid: old.pid }, { refusals: 3, front: 'fake' })
  t.equal(h.pool.handles.get(1).state, 'ready', 'acted on in the tick')
  await h.step()
  t.equal(h.pool.handles.get(1).state, 'draining')
  t.match(h.logs.filter((l) => l.event === 'listener-closed'), [{ by: 'fake', refusals: 3 }])
  old.exit(0)
  await h.step()
  await h.advance(100)
  t.not(h.latest(1), old, 'replaced')
})

t.test('a reload with streams open: each drained worker leaves its port and retires, its slot boots at once; ' +
  'the retiree is SIGTERMed at the graceful timeout; a stop waits for it', async (t) => {
  const h = harness(t, { workers: 2, gracefulTimeout: 10000, killTimeout: 500 })
  await started(h, 2)
  const old = [h.latest(1), h.latest(2)]
  for (const c of old) c.checkIn({ open: 5 })
  const reloaded = h.pool.reload()
  await h.step()
  const canary = h.sys.forks.at(-1)
  canary.say('ready')
  await h.step()
  canary.exit(null, 'SIGKILL') // it served its purpose
  for (const [i, slot] of [1, 2].entries()) {
    await h.step()
    t.match(old[i].sent, [{ type: 'stop' }], `slot ${slot}: asked to leave its port`)
    old[i].say('left-port', { open: 5 })
    await h.step()
    t.not(h.latest(slot), old[i], `slot ${slot}: its next process is forked at once, its streams still open`)
    t.equal(h.pool.retirees.size, i + 1)
    h.latest(slot).say('ready')
  }
  await h.step()
  const r = await reloaded
  t.ok(r, 'the reload ends with both slots replaced, not after the streams')
  t.match(h.logs.filter((l) => l.event === 'retiring'), [{ slot: 1, open: 5, reason: 'reload' }, { slot: 2, open: 5 }])
  old[0].say('request-ended', { id: 'x' })
  await h.step()
  t.ok(h.front.calls.includes('ended 1 x (retired)'), 'what a retiree says of its requests still reaches the fronts')
  old[0].exit(0) // its streams ended within the graceful timeout
  await h.step()
  t.ok(h.front.calls.includes('gone 1'), 'its exit told to the fronts')
  t.same(old[0].signals, [])
  await h.advance(10000)
  t.same(old[1].signals, ['SIGTERM'], 'the other, still streaming at the graceful timeout: SIGTERM')
  const stopped = h.pool.stop()
  await h.step()
  for (const slot of [1, 2]) { h.latest(slot).exit(0) }
  await h.advance(500)
  t.same(old[1].signals, ['SIGTERM', 'SIGKILL'], 'then SIGKILL; the stop waited for it')
  old[1].exit(null, 'SIGKILL')
  await h.step()
  t.same(await stopped, { clean: false }, 'a stop that had to signal a retiree is not clean')
})

t.test('a step of the wall clock, ±60 s, moves no deadline: only the labels people read', async (t) => {
  const h = harness(t, { workers: 2, timeout: 3000, gracefulTimeout: 5000 })
  await started(h, 2)
  const readyAt = h.pool.workers()[0].readyAt
  h.latest(1).checkIn({ open: 1 })
  h.latest(2).checkIn({ open: 1 })
  await h.step()
  h.sys.wall += 60000
  t.equal(h.pool.workers()[0].readyAt, readyAt + 60000, 'a snapshot reads the stepped wall clock')
  for (let i = 0; i < 10; i++) {
    h.latest(1).checkIn({ open: 1 })
    await h.advance(500)
  }
  t.same(h.latest(1).signals, [], '+60 s: the busy worker that checks in lives')
  t.same(h.latest(2).signals, ['SIGKILL'],
    'the one that stopped checking in is killed at --timeout + 500 ms of the pool\'s own clock')
  const hung = h.logs.find((l) => l.event === 'hung')
  t.ok(hung.slot === 2 && hung.ms >= 3501 && hung.ms <= 4000,
    `killed ${hung.ms} ms after its last check-in (this clock moves 500 ms a step)`)
  h.sys.wall -= 120000
  const stopped = h.pool.stop()
  await h.step()
  for (let i = 0; i < 9; i++) {
    h.latest(1).checkIn({ open: 1 })
    await h.advance(500)
  }
  h.latest(1).checkIn({ open: 1 })
  await h.advance(499)
  t.same(h.latest(1).signals, [], '−60 s: the graceful timeout is still 5 s of the pool\'s clock away')
  await h.advance(1)
  t.same(h.latest(1).signals, ['SIGTERM'])
  h.latest(1).exit(null, 'SIGTERM')
  h.latest(2).exit(null, 'SIGKILL')
  await h.step()
  await stopped
})
