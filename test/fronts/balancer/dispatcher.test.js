'use strict'

// The Dispatcher alone (lib/fronts/balancer/dispatcher.js), on the balancer's real WorkerSet with
// no process behind it: the order of service, maxconn, priority classes, the queue deadline, a
// redispatched request served first, benches and drains; and after every step its invariant
// (no request waits while a worker could take it). Overload control has its own tests
// (overload.test.js).

const t = require('tap')
const { Dispatcher } = require('../../../lib/fronts/balancer/dispatcher')
const { WorkerSet } = require('../../../lib/fronts/balancer/workers')
const { CLASSES } = require('../../../lib/fronts/balancer/priority')
const { waitFor } = require('../../helpers')

const HIGH = CLASSES.indexOf('high')
const LOW = CLASSES.indexOf('low')
const NORMAL = CLASSES.indexOf('normal')

// A dispatcher over `count` workers; `assigned` lists [job name, worker slot] in the order the
// dispatcher gave them out, `turnedAway` [job name, reason].
function setup (t, { count = 1, maxconn = 1, balance = 'first', ...options } = {}) {
  const workers = new WorkerSet({ maxconn, balance })
  for (let slot = 1; slot <= count; slot++) workers.add({ slot, pid: 1000 + slot, port: 20000 + slot })
  const assigned = []
  const turnedAway = []
  const holding = new Map() // job name → the record it holds
  const d = new Dispatcher({
    workers,
    queueTimeout: 0,
    priorityOf: (req) => req.cls ?? NORMAL,
    onAssign: (job, record) => { assigned.push([job.name, record.slot]); holding.set(job.name, record) },
    onTurnedAway: (job, reason) => turnedAway.push([job.name, reason]),
    ...options
  })
  // What the balancer does when an attempt ends: give the worker's place back.
  const finish = (name) => {
    const record = holding.get(name)
    holding.delete(name)
    d.release(record)
  }
  const check = () => t.notOk(d.stuck(), 'no request waits while a worker could take it')
  t.teardown(() => d.clear(() => {}))
  return { d, workers, assigned, turnedAway, finish, check, record: (slot) => workers.get(slot) }
}

const job = (name, cls) => ({ name, req: { cls } })

t.test('one queue, first come first served; whoever frees a worker hands it the next request', async (t) => {
  const { d, assigned, finish, check } = setup(t)
  t.equal(d.submit(job('a')), 'assigned', 'a free worker takes a request at once')
  for (const name of ['b', 'c', 'd']) t.equal(d.submit(job(name)), 'queued', `${name} waits`)
  t.equal(d.queued, 3)
  check()
  for (const name of ['a', 'b', 'c']) { finish(name); check() }
  t.same(assigned.map(([name]) => name), ['a', 'b', 'c', 'd'], 'in order of arrival')
  t.equal(d.queued, 0)
})

t.test('a request goes straight to a free worker only when nobody waits', async (t) => {
  const { d, assigned, record, check } = setup(t, { count: 2 })
  d.submit(job('a'))
  d.submit(job('b'))
  t.equal(d.submit(job('c')), 'queued')
  record(2).benched = true // out of the choice, as after a refused connection
  d.release(record(2)) // b's place back: the queue has no worker to take it while 2 is benched
  t.equal(d.queued, 1, 'c still waits')
  d.unbench(record(2))
  t.same(assigned.at(-1), ['c', 2], 'the end of a bench serves the queue in the same step')
  check()
})

t.test('maxconn: a worker takes that many requests at once, the rest queue', async (t) => {
  const { d, assigned, record, finish, check } = setup(t, { count: 2, maxconn: 2 })
  for (const name of ['a', 'b', 'c', 'd']) t.equal(d.submit(job(name)), 'assigned', name)
  t.same(assigned, [['a', 1], ['b', 1], ['c', 2], ['d', 2]], '`first`: the lowest slot fills up first')
  t.equal(d.submit(job('e')), 'queued')
  t.equal(record(1).inFlight, 2)
  t.equal(record(2).inFlight, 2)
  finish('c')
  t.same(assigned.at(-1), ['e', 2])
  t.equal(record(2).inFlight, 2, 'its place taken at once')
  check()
})

t.test('balance rr: free workers in turn', async (t) => {
  const { d, assigned, finish } = setup(t, { count: 3, balance: 'rr' })
  for (const name of ['a', 'b', 'c']) d.submit(job(name))
  finish('a')
  finish('b')
  d.submit(job('d'))
  d.submit(job('e'))
  t.same(assigned.map(([, slot]) => slot), [1, 2, 3, 1, 2])
})

t.test('priority: a higher class is always served first, each class in order of arrival', async (t) => {
  const { d, assigned, finish, check } = setup(t)
  d.submit(job('running'))
  d.submit(job('low1', LOW))
  d.submit(job('normal1'))
  d.submit(job('high1', HIGH))
  d.submit(job('normal2'))
  d.submit(job('high2', HIGH))
  d.submit(job('low2', LOW))
  for (const [name] of assigned.slice()) finish(name)
  while (d.queued > 0) { finish(assigned.at(-1)[0]); check() }
  t.same(assigned.map(([name]) => name), ['running', 'high1', 'high2', 'normal1', 'normal2', 'low1', 'low2'])
})

t.test('a full queue refuses, unless a lower class gives way: the one that would be served last', async (t) => {
  const { d, turnedAway, assigned, finish } = setup(t, { maxQueue: 2 })
  d.submit(job('running'))
  d.submit(job('low1', LOW))
  d.submit(job('low2', LOW))
  t.notOk(d.wouldTake(job('low3', LOW)), 'wouldTake: no room for the same class')
  t.equal(d.submit(job('low3', LOW)), 'full', 'the caller answers it (503); the queue keeps nothing')
  t.equal(d.queued, 2)
  t.ok(d.wouldTake(job('normal1')), 'wouldTake: a higher class would find room')
  t.equal(d.queued, 2, 'wouldTake changes nothing')
  t.equal(d.submit(job('normal1')), 'queued')
  t.same(turnedAway, [['low2', 'queue_full']], 'the newest of the lowest class gave way')
  t.equal(d.submit(job('high1', HIGH)), 'queued')
  t.same(turnedAway, [['low2', 'queue_full'], ['low1', 'queue_full']])
  t.equal(d.submit(job('normal2')), 'full', 'nothing below normal is left to give way')
  finish('running')
  finish('high1')
  t.same(assigned.map(([name]) => name), ['running', 'high1', 'normal1'])
})

t.test('wouldTake: yes while a worker is free and nobody waits, whatever maxQueue', async (t) => {
  const { d } = setup(t, { maxQueue: 0 })
  t.ok(d.wouldTake(job('a')))
  t.equal(d.submit(job('a')), 'assigned')
  t.notOk(d.wouldTake(job('b')))
  t.equal(d.submit(job('b')), 'full')
})

t.test('the queue deadline: a request waiting past --queue-timeout is turned away', async (t) => {
  const { d, turnedAway, assigned, finish } = setup(t, { queueTimeout: 30 })
  d.submit(job('running'))
  d.submit(job('late'))
  await waitFor(() => turnedAway.length === 1, { interval: 5, what: 'the deadline' })
  t.same(turnedAway, [['late', 'queue_timeout']])
  t.equal(d.queued, 0)
  const late = assigned.find(([name]) => name === 'late')
  t.notOk(late, 'never given a worker')
  finish('running')
  t.same(assigned.map(([name]) => name), ['running'])
})

t.test('a cancelled request (its client left) leaves the queue and never reaches a worker', async (t) => {
  const { d, assigned, finish } = setup(t, { queueTimeout: 30 })
  d.submit(job('running'))
  const gone = job('gone')
  d.submit(gone)
  d.submit(job('next'))
  t.equal(d.cancel(gone), true)
  t.equal(d.cancel(gone), false, 'twice is harmless')
  finish('running')
  t.same(assigned.map(([name]) => name), ['running', 'next'])
  t.ok(gone.queueMs >= 0 && gone.queueTimer === null, 'its wait counted, its timer cleared')
})

t.test('a redispatched request is served before the requests that queued behind it', async (t) => {
  const { d, assigned, finish, check } = setup(t, { count: 2 })
  const x = job('x')
  d.submit(x)
  d.submit(job('y'))
  d.submit(job('a'))
  d.submit(job('b'))
  d.submit(job('high', HIGH))
  t.same(assigned, [['x', 1], ['y', 2]])
  // Worker 1 died holding x: benched, its place given back, and x comes back to the queue.
  d.bench(d.workers.get(1))
  finish('x')
  d.requeue(x)
  check()
  finish('y') // worker 2 serves the queue from here on
  finish('high')
  finish('x')
  t.same(assigned.map(([name]) => name), ['x', 'y', 'high', 'x', 'a'], 'behind a higher class only; ahead of a and b')
})

t.test('a redispatched request keeps the deadline it got on arrival', async (t) => {
  const { d, turnedAway, assigned, finish } = setup(t, { queueTimeout: 40 })
  const x = job('x')
  d.submit(x)
  const deadline = x.deadline
  d.submit(job('other'))
  await waitFor(() => turnedAway.length === 1, { interval: 5, what: 'other times out' })
  finish('x') // x's attempt failed past its deadline
  d.submit(job('holder')) // takes the worker back
  d.requeue(x)
  t.equal(x.deadline, deadline, 'not renewed')
  await waitFor(() => turnedAway.length === 2, { interval: 5, what: 'x turned away' })
  t.same(turnedAway, [['other', 'queue_timeout'], ['x', 'queue_timeout']])
  // Past its deadline, a redispatched request still goes to a worker that is free at once.
  const y = job('y')
  finish('holder')
  d.submit(y)
  await waitFor(() => performance.now() > y.deadline, { interval: 5, what: 'y past its deadline' })
  finish('y')
  d.requeue(y)
  t.same(assigned.at(-1), ['y', 1])
  t.equal(turnedAway.length, 2)
})

t.test('a benched worker gets nothing until its bench ends; the supervisor can lift it sooner', async (t) => {
  const { d, assigned, record, finish, check } = setup(t, { count: 2 })
  d.bench(record(1))
  d.submit(job('a'))
  t.same(assigned, [['a', 2]], 'slot 1 is skipped')
  d.submit(job('b'))
  t.equal(d.queued, 1)
  d.unbench(record(1)) // workerReady for the same process
  t.same(assigned.at(-1), ['b', 1])
  finish('a')
  check()
})

t.test('drain: resolves once nothing is in flight; a stopping pool waits for the queue too', async (t) => {
  const { d, record, finish } = setup(t, { count: 1 })
  d.submit(job('a'))
  d.submit(job('b'))
  let drained = false
  const draining = d.drain(record(1), { untilQueueEmpty: true }).then(() => { drained = true })
  finish('a')
  await Promise.resolve()
  t.notOk(drained, 'b still queued: a stopping pool serves it')
  t.equal(record(1).inFlight, 1, 'with the draining worker')
  finish('b')
  await draining
  t.ok(record(1).draining)
})

t.test('drain for a reload: the worker gets nothing new, the queue waits for another', async (t) => {
  const { d, record, assigned, finish } = setup(t, { count: 2 })
  d.submit(job('a'))
  d.submit(job('b'))
  d.submit(job('c'))
  const draining = d.drain(record(1), { untilQueueEmpty: false })
  finish('a')
  await draining
  t.equal(d.queued, 1, 'c is not given to the drained worker')
  finish('b')
  t.same(assigned.at(-1), ['c', 2])
})

t.test('clear (stop): every queued request leaves through the callback, every drain resolves', async (t) => {
  const { d, record } = setup(t, { queueTimeout: 10000 })
  d.submit(job('a'))
  d.submit(job('b'))
  d.submit(job('c'))
  const drained = d.drain(record(1), { untilQueueEmpty: true })
  const cleared = []
  d.clear((j) => cleared.push(j.name))
  t.same(cleared, ['b', 'c'])
  t.equal(d.queued, 0)
  await drained
})

t.test('the dispatcher writes only fields a request declares (request.js)', async (t) => {
  const { BalancedRequest } = require('../../../lib/fronts/balancer/request')
  const { d, finish } = setup(t, { queueTimeout: 10000, priorityOf: () => NORMAL })
  const make = (name) => Object.assign(new BalancedRequest({ method: 'GET', url: `/${name}`, headers: {} }, {}), { name })
  const requests = ['a', 'b', 'c'].map(make)
  const declared = Object.keys(requests[0]).sort()
  for (const r of requests) d.submit(r)
  d.cancel(requests[2])
  finish('a')
  d.requeue(requests[0])
  for (const r of requests) t.same(Object.keys(r).sort(), declared, r.name)
})

t.test('overload shedding: one pass never turns away the last round, even when all waited too long together', async (t) => {
  // A late timer (a loaded machine) finds every queued request past the maximum wait at once.
  // Those one round of the workers serves next are kept: turning them away shortens nobody's wait.
  const shedOnce = (count, queuedNames, { cls = () => NORMAL } = {}) => {
    const limits = { interval: 100, target: 100, maxWait: 600 }
    const s = setup(t, { count, overload: limits })
    for (let i = 0; i < count; i++) s.d.submit(job(`hold${i}`))
    const jobs = queuedNames.map((name, i) => job(name, cls(i)))
    for (const j of jobs) t.equal(s.d.submit(j), 'queued', `${j.name} waits`)
    const longAgo = performance.now() - 10 * limits.maxWait
    for (const j of jobs) j.queuedAt = longAgo
    for (const o of s.d.overload) o.goodAt = longAgo // nothing left the queue in time for an interval
    s.d.police()
    return s
  }
  const one = shedOnce(1, ['a', 'b', 'c'])
  t.same(one.turnedAway, [['a', 'queue_shed'], ['b', 'queue_shed']], 'one worker: the two oldest go, the last round stays')
  one.finish('hold0')
  t.same(one.assigned.at(-1), ['c', 1], 'and the one kept is served next')
  one.check()

  const two = shedOnce(2, ['a', 'b', 'c', 'd', 'e'])
  t.same(two.turnedAway.map(([name]) => name), ['a', 'b', 'c'], 'two workers: two are kept')
  t.equal(two.d.queued, 2)

  // A round counts the classes served before this one: a high request ahead leaves no place for
  // the normal ones.
  const mixed = shedOnce(1, ['h', 'n1', 'n2'], { cls: (i) => i === 0 ? HIGH : NORMAL })
  t.same(mixed.turnedAway.map(([name]) => name).sort(), ['n1', 'n2'], 'the round is the high request\'s')
  t.equal(mixed.d.queued, 1)
})
