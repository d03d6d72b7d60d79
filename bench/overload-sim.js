'use strict'

// The embedded balancer's dispatcher (lib/fronts/balancer/dispatcher.js, overload control
// included) on a simulated clock (bench/lib/dispatcher-sim.js): what its defaults decide, against
// a FIFO queue (--no-overload-control) given the same requests, in seconds instead of hours and
// the same in every run. Not a part of `npm run bench` (nothing real runs): it is how the
// defaults of lib/fronts/balancer/overload.js were chosen, kept to check them.
//
//   node bench/overload-sim.js [--warmup S]
//                                         the loads of bench/overload.js (bench/lib/overload-shapes.js):
//                                         closed-loop clients after a burst of fast requests,
//                                         open loop, mixed routes; with --warmup, every open
//                                         loop counts from S s (bench/overload.js measures the
//                                         loads a FIFO fails within a run in their steady state)
//   node bench/overload-sim.js --grid [--load 0.5,0.8,0.9,1] [--workers 1,2,4,8,15,32]
//                                     [--median 30,300,1000] [--renders 8000]
//                                         Poisson arrivals of lognormal renders (σ 0.8) from
//                                         clients that never give up, `renders` requests' worth
//                                         of time per cell: what the defaults turn away, and their
//                                         p99 against the FIFO's
//
// The rule they are held to (docs/guide/embedded-balancer.md): never turn a request away, nor
// answer it later, where a FIFO answers every request within what clients wait.

const { runShape } = require('./lib/dispatcher-sim')
const { closedShapes, openShapes, mixedShapes } = require('./lib/overload-shapes')

const ms = (x) => (x === null || x === undefined ? '–' : String(Math.round(x)))
const pct = (x) => `${(x * 100).toFixed(0)}%`
const row = (cells, widths) => cells.map((c, i) => String(c).padStart(widths[i])).join('  ')

function shapes (args) {
  const closedWidths = [20, 9, 9, 9, 9, 7]
  console.log('Closed-loop clients for 20 s after a burst of fast requests: FIFO | the defaults')
  console.log(row(['', '503 FIFO', '503 def.', 'p99 FIFO', 'p99 def.', 'ratio'], closedWidths))
  for (const s of closedShapes({ seconds: 20 })) {
    const fifo = runShape(s, { fifo: true })
    const def = runShape(s)
    console.log(row([s.id, fifo.turnedAway, def.turnedAway, ms(fifo.p99), ms(def.p99), `${(def.p99 / fifo.p99).toFixed(2)}×`], closedWidths))
  }
  const openWidths = [20, 9, 12, 12, 9, 9, 16, 16]
  console.log('\nOpen loop, clients give up after 1 s: in time ÷ capacity, FIFO | the defaults; over the whole run, how many')
  console.log('requests the defaults answered in time, and how many of those a FIFO answered in time they did not')
  console.log(row(['', 'warm-up', 'FIFO', 'defaults', '503 def.', 'p99 def.', 'in time, def.', 'FIFO\'s lost'], openWidths))
  for (const shape of [...openShapes(), ...mixedShapes()]) {
    const s = args.warmup === undefined ? shape : { ...shape, warmup: args.warmup }
    const fifo = runShape(s, { fifo: true })
    const def = runShape(s)
    const lost = fifo.inTimeEach.filter((ok, i) => ok && !def.inTimeEach[i]).length
    console.log(row([s.id, `${s.warmup} s`, pct(fifo.share), pct(def.share), pct(def.turnedAway / def.requests), ms(def.p99), `${def.inTimeEach.filter(Boolean).length} of ${def.inTimeEach.length}`, lost], openWidths))
  }
}

function grid (args) {
  const widths = [9, 7, 5, 11, 9, 9]
  console.log('Clients that never give up: what the defaults turn away, and p99 against a FIFO\'s')
  console.log(row(['median ms', 'workers', 'load', 'turned away', 'p99 FIFO', 'p99 def.'], widths))
  for (const median of args.median) {
    for (const workers of args.workers) {
      for (const load of args.load) {
        const mean = median * Math.exp(0.32)
        const measure = args.renders * mean / workers / load / 1000
        const s = { kind: 'open', workers, load, render: { median, sigma: 0.8 }, deadline: Infinity, warmup: 0, measure, burst: false }
        const fifo = runShape(s, { fifo: true })
        const def = runShape(s)
        console.log(row([median, workers, load.toFixed(2), `${(def.turnedAway / def.requests * 100).toFixed(2)}%`, ms(fifo.p99), ms(def.p99)], widths))
      }
    }
  }
}

function parseArgs (argv) {
  const args = { grid: false, warmup: undefined, load: [0.5, 0.8, 0.9, 1], workers: [1, 2, 4, 8, 15, 32], median: [30, 300, 1000], renders: 8000 }
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '')
    if (key === 'grid') { args.grid = true; continue }
    if (!(key in args) || argv[i + 1] === undefined) throw new Error(`unknown option or missing value: ${argv[i]}`)
    const value = argv[++i]
    args[key] = Array.isArray(args[key]) ? value.split(',').map(Number) : Number(value)
  }
  return args
}

let args
try {
  args = parseArgs(process.argv.slice(2))
} catch (err) {
  console.error(err.message)
  process.exit(2)
}
if (args.grid) grid(args)
else shapes(args)
