'use strict'

// The embedded balancer's dispatcher (lib/fronts/balancer/dispatcher.js, overload control
// included) on a simulated clock, with the loads of bench/overload.js: open-loop arrivals whose
// clients give up after a deadline, closed-loop clients, a burst of fast requests before either.
// What would take minutes of real load (and a quiet machine) runs in milliseconds, exactly the
// same every time: bench/overload-sim.js prints it, and the overload tests assert on it.
//
// A worker here is a place that holds its request for the request's service time; nothing else
// (no parsing, no proxying) takes time.

const path = require('node:path')
const { rng, normal } = require('./schedule')
const { percentile } = require('./stats')
const { RENDERS, BURST, openSchedule } = require('./overload-shapes')

// How long an answer takes to reach its client, and a request to reach the balancer.
const NETWORK_MS = 0.1

const LIB = path.join(__dirname, '..', '..', 'lib', 'fronts', 'balancer')

// Timers in a heap, ordered by time and then by the order they were set.
class SimClock {
  constructor () {
    this.t = 0
    this.heap = []
    this.seq = 0
  }

  now () { return this.t }

  setTimeout (fn, ms) {
    const timer = { at: this.t + Math.max(0, ms || 0), seq: this.seq++, fn, cancelled: false, unref: () => timer }
    const h = this.heap
    h.push(timer)
    for (let i = h.length - 1; i > 0;) {
      const p = (i - 1) >> 1
      if (!before(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]]
      i = p
    }
    return timer
  }

  clearTimeout (timer) { if (timer) timer.cancelled = true }

  // No socket callback to leave on a simulated clock: a hand-off runs at once.
  defer (fn) { fn() }

  pop () {
    const h = this.heap
    const top = h[0]
    const last = h.pop()
    if (h.length > 0) {
      h[0] = last
      for (let i = 0; ;) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < h.length && before(h[l], h[m])) m = l
        if (r < h.length && before(h[r], h[m])) m = r
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]]
        i = m
      }
    }
    return top
  }

  // Fire every timer due up to `until`, in order.
  run (until = Infinity) {
    while (this.heap.length > 0 && this.heap[0].at <= until) {
      const timer = this.pop()
      if (timer.cancelled) continue
      this.t = timer.at
      timer.fn()
    }
    if (until < Infinity) this.t = Math.max(this.t, until)
  }
}

function before (a, b) { return a.at < b.at || (a.at === b.at && a.seq < b.seq) }

// One worker's places, as the Dispatcher changes them (lib/fronts/balancer/workers.js
// WorkerRecord), without a process behind it.
function simRecord (slot) {
  return {
    slot,
    inFlight: 0,
    draining: false,
    benched: false,
    take () { this.inFlight++ },
    giveBack () { this.inFlight-- },
    drain () { this.draining = true }
  }
}

// A pool of `workers` single-request places behind one dispatcher, with the balancer's options
// as `pool start` resolves them (`options`: more of them; `fifo`: --no-overload-control).
// `submit(request)`: request = { ms }, answered through request.answer(status) (200 once
// served, 503 when turned away). `giveUp(request)`: its client left.
function simPool ({ clock, workers, fifo = false, options = {}, lib = LIB }) {
  const { Dispatcher } = require(path.join(lib, 'dispatcher'))
  const { resolveBalancerOptions } = require(path.join(lib, 'options'))
  const o = resolveBalancerOptions({ ...options, overloadControl: !fifo })
  const records = Array.from({ length: workers }, (_, i) => simRecord(i + 1))
  const set = {
    take: (r) => r.take(),
    giveBack: (r) => r.giveBack(),
    forgetIfDone: () => {},
    rendering: () => records.reduce((n, r) => n + r.inFlight, 0),
    pickFree: () => records.find((r) => r.inFlight === 0),
    anyFree: () => records.some((r) => r.inFlight === 0),
    places: () => records.length
  }
  // A worker's render: its place back after request.ms, then the answer.
  const render = (request, record) => clock.setTimeout(() => {
    d.release(record, request)
    request.answer(200)
  }, request.ms)
  const d = new Dispatcher({
    workers: set,
    queueTimeout: o.queueTimeout,
    maxQueue: o.maxQueue,
    overload: o.overload,
    priorityOf: o.priorityOf,
    clock,
    onAssign: (request, record) => render(request, record),
    onTurnedAway: (request, reason) => { request.reason = reason; request.answer(503) }
  })
  return {
    dispatcher: d,
    submit (request) {
      request.req = { url: '/', headers: {}, socket: {} }
      const taken = d.submit(request)
      if (taken === 'full') {
        request.reason = 'queue_full'
        request.answer(503)
      } else if (taken !== 'queued') render(request, taken)
    },
    giveUp (request) { d.cancel(request) }
  }
}

// One request's life, from its client's side: sent at `sentAt`, answered `status` (0: its client
// gave up first) after `latency` ms.
function sendRequest (clock, pool, { ms, deadline = Infinity, onEnd }) {
  const r = { ms, sentAt: clock.now(), status: null, latency: null, reason: null }
  let timer = null
  const end = (status) => {
    if (r.status !== null) return
    r.status = status
    r.latency = clock.now() - r.sentAt
    clock.clearTimeout(timer)
    if (onEnd) onEnd(r)
  }
  // An answer reaches its client a moment later, as over a socket: never inside the call that
  // gave it (a closed-loop client's next request must not re-enter the dispatcher).
  const request = {
    ms,
    answer: (status) => { r.reason = request.reason || null; clock.setTimeout(() => end(status), NETWORK_MS) }
  }
  if (deadline < Infinity) timer = clock.setTimeout(() => { end(0); pool.giveUp(request) }, deadline)
  pool.submit(request)
  return r
}

// Service times: a seeded lognormal (median, sigma, capped), a fixed time, or a mix of routes
// [{ share, ms | median }]: each request draws its route, then its time.
function services ({ ms, median = 30, sigma = 0.8, cap = 2000, routes, seed = 42 }) {
  const rand = rng(seed)
  const draw = (s) => s.ms !== undefined ? s.ms : Math.min(s.cap ?? cap, s.median * Math.exp((s.sigma ?? sigma) * normal(rand)))
  if (routes) {
    return () => {
      let u = rand()
      for (const route of routes) {
        if ((u -= route.share) < 0) return { ms: draw(route) }
      }
      const last = routes[routes.length - 1]
      return { ms: draw(last) }
    }
  }
  return () => ({ ms: draw({ ms, median, sigma, cap }) })
}

// `clients` closed-loop clients from now for `seconds`: each sends its next request the moment
// the last one ends (answered, or given up after `timeout` ms). Returns the requests' records.
function closedLoop (clock, pool, { clients, seconds, service, timeout = 10000 }) {
  const requests = []
  const endAt = clock.now() + seconds * 1000
  const next = () => {
    if (clock.now() >= endAt) return
    requests.push(sendRequest(clock, pool, { ms: service().ms, deadline: timeout, onEnd: next }))
  }
  for (let i = 0; i < clients; i++) next()
  return requests
}

// Open-loop arrivals from now: request i at at[i] ms, each client giving up after `deadline`.
function openLoop (clock, pool, { at, ms, deadline }) {
  const requests = []
  at.forEach((a, i) => clock.setTimeout(() => requests.push(sendRequest(clock, pool, { ms: ms[i], deadline })), a))
  return requests
}

// A burst of fast requests from a few closed-loop clients, run to its end (BURST).
function fastBurst (clock, pool, { count, clients, ms } = BURST) {
  let sent = 0
  const one = () => { if (sent++ < count) sendRequest(clock, pool, { ms, onEnd: one }) }
  for (let i = 0; i < clients; i++) one()
  clock.run(clock.now() + count * (ms + 1) + 1000)
}

// What a set of requests came to: answered 200 (and within `deadline`), turned away (503),
// given up; the latency of those answered.
function summarize (requests, { deadline = Infinity } = {}) {
  const ok = requests.filter((r) => r.status === 200)
  const latency = ok.map((r) => r.latency)
  return {
    requests: requests.length,
    ok: ok.length,
    inTime: ok.filter((r) => r.latency <= deadline).length,
    turnedAway: requests.filter((r) => r.status === 503).length,
    gaveUp: requests.filter((r) => r.status === 0).length,
    p50: percentile(latency, 50),
    p99: percentile(latency, 99),
    max: latency.reduce((a, b) => Math.max(a, b), null)
  }
}

// One shape of bench/lib/overload-shapes.js on the dispatcher as `pool start` configures it, or
// as a FIFO (`fifo`), after a burst of fast requests (`burst: false`: none). A closed-loop shape
// comes to the requests' summary; an open-loop one also to `share`: the answers within the
// deadline of the requests sent after the warm-up, per second of the measured time, as a share of
// what the workers can render (as bench/overload.js counts them).
function runShape (shape, { fifo = false, lib, seed = 42, options = shape.options } = {}) {
  const clock = new SimClock()
  const pool = simPool({ clock, workers: shape.workers, fifo, options, lib })
  if (shape.burst !== false) fastBurst(clock, pool)
  const t0 = clock.now()
  const render = typeof shape.render === 'string' ? RENDERS[shape.render] : shape.render
  if (shape.kind === 'closed') {
    const requests = closedLoop(clock, pool, { clients: shape.clients, seconds: shape.seconds, service: services({ ...render, seed }), timeout: shape.timeout })
    clock.run()
    return { ...summarize(requests), stands: standCount(pool) }
  }
  const schedule = openSchedule(shape, seed)
  const requests = openLoop(clock, pool, { ...schedule, deadline: shape.deadline })
  clock.run()
  const counted = requests.filter((r) => r.sentAt - t0 >= shape.warmup * 1000)
  const capacity = shape.workers * 1000 / (counted.reduce((a, r) => a + r.ms, 0) / Math.max(1, counted.length)) // req/s
  const s = summarize(counted, { deadline: shape.deadline })
  // `inTime`: per request sent (the warm-up's too), in the order sent, whether it was answered
  // within the deadline: two runs of one shape compare request by request.
  const inTime = requests.map((r) => r.status === 200 && r.latency <= shape.deadline)
  return { ...s, share: s.inTime / shape.measure / capacity, stands: standCount(pool), inTimeEach: inTime }
}

function standCount (pool) {
  const o = pool.dispatcher.overload
  return o ? o.byClass.reduce((a, c) => a + (c.stands || 0), 0) : 0
}

module.exports = { SimClock, simPool, sendRequest, closedLoop, openLoop, fastBurst, services, summarize, runShape }
