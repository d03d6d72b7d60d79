'use strict'

// The workload: Poisson arrivals (open loop: a request arrives when its time comes, whether or
// not earlier ones were answered) with lognormal service times, from a seeded generator so that
// every front replays exactly the same requests.

// mulberry32: small, fast, good enough for a benchmark, and seedable.
function rng (seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function normal (rand) {
  // Box-Muller
  const u = 1 - rand()
  const v = rand()
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v)
}

// Mean of a lognormal with this median and sigma, capped service times aside.
function lognormalMean (median, sigma) { return median * Math.exp(sigma * sigma / 2) }

// { at: ms from start, ms: service time } for `durationMs` of arrivals at utilisation `rho` of
// `workers` servers.
function makeSchedule ({ rho, workers, durationMs, median, sigma, capMs, seed }) {
  const rand = rng(seed)
  const rate = rho * workers / lognormalMean(median, sigma) // arrivals per ms
  const at = []
  const ms = []
  let t = 0
  for (;;) {
    t += -Math.log(1 - rand()) / rate
    if (t >= durationMs) break
    at.push(t)
    ms.push(Math.min(capMs, median * Math.exp(sigma * normal(rand))))
  }
  return { at, ms, ratePerSecond: rate * 1000 }
}

module.exports = { makeSchedule, lognormalMean, rng, normal }
