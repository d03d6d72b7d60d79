'use strict'

// The embedded balancer's dispatcher (lib/fronts/balancer/dispatcher.js, overload control included) on
// a simulated clock: how many requests its defaults turn away below capacity, for pools of many
// sizes and render times, in seconds instead of hours. Not a part of `npm run bench` (nothing
// real runs): it is how the defaults of lib/fronts/balancer/overload.js were chosen, kept to check them.
//
//   node bench/overload-sim.js [--load 0.5,0.8,0.9] [--workers 1,2,4,8,15,32]
//                              [--median 30,300,1000] [--sigma 0.8] [--renders 8000]
//                              [--deadline MS] [--max-queue N] [--fifo]
//
// Poisson arrivals at `load` × capacity, lognormal renders (bench/lib/schedule.js), `renders`
// requests' worth of time per cell. With --deadline, clients give up (leave the queue) after
// that many ms, and "in time" counts the answers within it. --max-queue N --fifo: a FIFO queue
// capped at N, as the generated HAProxy config does (pool config haproxy --max-queue).

const path = require('node:path')
const { makeSchedule, lognormalMean } = require('./lib/schedule')

// The clock: performance.now() and the timers the dispatcher uses, driven by the loop in
// simulate(). Nothing else in this process needs real ones.
let now = 0
let timers = []
globalThis.performance = { now: () => now }
global.setTimeout = (fn, ms) => {
  const timer = { at: now + Math.max(0, ms || 0), fn, unref () { return timer } }
  timers.push(timer)
  return timer
}
global.clearTimeout = (timer) => { if (timer) timer.cancelled = true }
const { Dispatcher } = require(path.join('..', 'lib', 'fronts', 'balancer', 'dispatcher'))
const { resolveBalancerOptions } = require(path.join('..', 'lib', 'fronts', 'balancer', 'options'))

function nextTimer () {
  let best = null
  timers = timers.filter((t) => !t.cancelled)
  for (const t of timers) if (!best || t.at < best.at) best = t
  return best
}

// One cell: `workers` single-request workers; returns what happened to the requests.
function simulate ({ workers, load, median, sigma, renders, deadline, maxQueue, fifo, seed = 1 }) {
  now = 0
  timers = []
  const o = resolveBalancerOptions({ overloadControl: !fifo })
  const records = Array.from({ length: workers }, (_, i) => ({ slot: i + 1, inFlight: 0 }))
  const set = { pickFree: () => records.find((r) => r.inFlight === 0) || null, anyFree: () => records.some((r) => r.inFlight === 0), places: () => workers }
  const mean = lognormalMean(median, sigma)
  const durationMs = renders * mean / workers / load
  const { at, ms } = makeSchedule({ rho: load, workers, durationMs, median, sigma, capMs: median * 60, seed })
  const counts = { sent: at.length, turnedAway: 0, gaveUp: 0, inTime: 0 }
  const d = new Dispatcher({
    workers: set,
    queueTimeout: 0,
    maxQueue,
    overload: o.overload,
    onAssign: (job, record) => {
      if (now - job.arrived + job.ms <= deadline) counts.inTime++
      setTimeout(() => d.release(record, job.ms), job.ms)
    },
    onTurnedAway: () => { counts.turnedAway++ }
  })
  let i = 0
  for (;;) {
    const timer = nextTimer()
    const arrival = i < at.length ? at[i] : Infinity
    if (!timer && arrival === Infinity) break
    if (arrival <= (timer ? timer.at : Infinity)) {
      now = arrival
      const job = { req: {}, arrived: now, ms: ms[i++] }
      if (deadline < Infinity) setTimeout(() => { if (d.cancel(job)) counts.gaveUp++ }, deadline)
      if (d.submit(job) === 'full') counts.turnedAway++
    } else {
      timer.cancelled = true
      now = timer.at
      timer.fn()
    }
  }
  const capacity = workers / mean * durationMs
  return { ...counts, turnedAwayShare: counts.turnedAway / counts.sent, goodput: counts.inTime / capacity }
}

function parseArgs (argv) {
  const list = (v) => v.split(',').map(Number)
  const args = { load: [0.5, 0.8, 0.9], workers: [1, 2, 4, 8, 15, 32], median: [30, 300, 1000], sigma: 0.8, renders: 8000, deadline: Infinity, maxQueue: undefined, fifo: false }
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase())
    if (key === 'fifo') { args.fifo = true; continue }
    if (!(key in args)) throw new Error(`unknown option ${argv[i]}`)
    const value = argv[++i]
    args[key] = Array.isArray(args[key]) ? list(value) : Number(value)
  }
  return args
}

function main () {
  const args = parseArgs(process.argv.slice(2))
  const pct = (x) => `${(x * 100).toFixed(2)}%`.padStart(7)
  console.log(`${args.fifo ? 'FIFO' : 'overload control (defaults)'}${args.maxQueue !== undefined ? `, max queue ${args.maxQueue}` : ''}${args.deadline < Infinity ? `, clients give up after ${args.deadline} ms` : ''}`)
  console.log('median ms  workers  load  turned away' + (args.deadline < Infinity ? '  in time ÷ capacity' : ''))
  for (const median of args.median) {
    for (const workers of args.workers) {
      for (const load of args.load) {
        const r = simulate({ ...args, median, workers, load })
        console.log(`${String(median).padStart(9)}  ${String(workers).padStart(7)}  ${load.toFixed(2).padStart(4)}  ${pct(r.turnedAwayShare).padStart(11)}` + (args.deadline < Infinity ? `  ${pct(r.goodput).padStart(18)}` : ''))
      }
    }
  }
}

main()
