'use strict'

// The loads overload control is judged on, each run on a FIFO queue (--no-overload-control) and
// on the defaults: by the dispatcher on a simulated clock (bench/lib/dispatcher-sim.js, for
// bench/overload-sim.js and test/fronts/balancer/overload-shapes.test.js) and by real pools
// (bench/overload.js).
//
//   closed   closed-loop clients (each sends its next request once the last is answered) on 2
//            and 15 workers, with renders on the CPU or pages that await their data, right after
//            a burst of fast requests: not overload, however many clients
//   open     Poisson arrivals at a multiple of capacity, lognormal renders, clients that give up
//            after a deadline
//   mixed    the same with a fast route and a slow one

const { makeSchedule, rng } = require('./schedule')

const DEADLINE_MS = 1000
const MEASURE_S = 2
const WORKERS = 15

// A render on the CPU (the bench app blocks its event loop with Atomics.wait: no core burnt),
// a page that awaits its data (the worker's event loop idle meanwhile), and two routes.
const RENDERS = {
  cpu: { median: 30, sigma: 0.8 },
  await: { ms: 200, await: true },
  mixed: { routes: [{ share: 0.8, ms: 10 }, { share: 0.2, ms: 250 }] }
}

// The burst of fast requests before each closed-loop run, as a pool in service has just served
// (cache hits, health checks): a pace measured on them must not judge the slow renders after.
const BURST = { count: 400, clients: 8, ms: 0 }

// Mean render, ms.
function meanRender (render) {
  if (render.routes) return render.routes.reduce((sum, r) => sum + r.share * r.ms, 0)
  if (render.ms !== undefined) return render.ms
  return render.median * Math.exp(render.sigma * render.sigma / 2)
}

// Seconds of load before an open-loop run counts. From an empty queue a FIFO's wait grows by
// (load − 1) s every second and reaches the clients' deadline after deadline ÷ (load − 1): if that
// is within the run, the run is measured once every queue has reached its steady state (one more
// deadline: the requests that were waiting then are served, or given up, by then). Otherwise the
// overload ends before a FIFO fails anyone, as in a short peak, and 1 s of warm-up is kept: there
// the defaults must do exactly what a FIFO does.
function openWarmup (load, { deadline = DEADLINE_MS, measure = MEASURE_S, base = 1 } = {}) {
  if (load <= 1) return base
  const fifoLate = deadline / 1000 / (load - 1)
  return fifoLate < base + measure ? Math.max(base, fifoLate + deadline / 1000) : base
}

function closedShapes ({ clients = [5, 13, 20, 50], workers = [2, WORKERS], renders = ['cpu', 'await'], seconds = 6 } = {}) {
  const shapes = []
  for (const w of workers) {
    for (const render of renders) {
      for (const c of clients) shapes.push({ id: `closed ${c}c ${w}w ${render}`, kind: 'closed', workers: w, clients: c, render, seconds })
    }
  }
  return shapes
}

function openShapes ({ loads = [0.8, 1, 1.2, 1.5, 2], render = 'cpu', measure = MEASURE_S, deadline = DEADLINE_MS } = {}) {
  return loads.map((load) => ({ id: `${render === 'cpu' ? 'open' : render} ${load}×`, kind: 'open', workers: WORKERS, load, render, deadline, measure, warmup: openWarmup(load, { deadline, measure }) }))
}

function mixedShapes ({ loads = [0.8, 1.2, 1.5, 2], ...rest } = {}) {
  return openShapes({ loads, render: 'mixed', ...rest })
}

// An open-loop shape's arrivals, the same for every front: Poisson at `load` × capacity over
// warmup + measure seconds, each with its render time. { at: [ms], ms: [ms] }.
function openSchedule ({ load, workers, warmup, measure, render }, seed) {
  const r = typeof render === 'string' ? RENDERS[render] : render
  const durationMs = (warmup + measure) * 1000
  if (!r.routes) return makeSchedule({ rho: load, workers, durationMs, median: r.median, sigma: r.sigma, capMs: 2000, seed })
  const rate = load * workers / meanRender(r) // per ms
  const rand = rng(seed)
  const schedule = { at: [], ms: [] }
  for (let t = -Math.log(1 - rand()) / rate; t < durationMs; t += -Math.log(1 - rand()) / rate) {
    let u = rand()
    const route = r.routes.find((x) => (u -= x.share) < 0) || r.routes[r.routes.length - 1]
    schedule.at.push(t)
    schedule.ms.push(route.ms)
  }
  return schedule
}

module.exports = { RENDERS, BURST, DEADLINE_MS, MEASURE_S, WORKERS, meanRender, openWarmup, openSchedule, closedShapes, openShapes, mixedShapes }
