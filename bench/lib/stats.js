'use strict'

// Percentiles, and what a number measured several times comes to: the median of the runs with
// a bootstrap 95% interval, after the runs whose load generator fell behind are set aside.

const { rng } = require('./schedule')

function percentile (values, p) {
  const sorted = Float64Array.from(values).sort()
  if (sorted.length === 0) return NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[i]
}

// The middle value (the mean of the two middle ones for an even count).
function median (values) {
  const s = Float64Array.from(values).sort()
  const n = s.length
  if (n === 0) return NaN
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
}

// An open-loop run whose load generator sent its requests later than scheduled measured a
// different load than the one asked for: with a send lag p99 above this, the run is set aside.
const LAG_LIMIT_MS = 5

// How late a load generator sent its requests, in ms: [sent - scheduled, ...] → { p50, p99, max }.
function lagSummary (lags) {
  if (!lags.length) return null
  const r = (x) => Number(x.toFixed(3))
  return { p50: r(percentile(lags, 50)), p99: r(percentile(lags, 99)), max: r(Math.max(...lags)) }
}

const lagTooHigh = (run) => typeof run?.lag?.p99 === 'number' && run.lag.p99 > LAG_LIMIT_MS

// The runs a figure is made of: those within the send-lag limit; all of them, flagged, when
// none is (a figure marked as unreliable beats no figure).
function keptRuns (runs) {
  const ok = runs.filter((r) => !lagTooHigh(r))
  return ok.length ? { runs: ok, rejected: runs.length - ok.length, allRejected: false } : { runs, rejected: runs.length, allRejected: runs.length > 0 }
}

// The median of `values` with a percentile-bootstrap 95% interval: the runs are resampled with
// replacement, the median taken each time. A fixed seed, so that a report rebuilt from the same
// results shows the same interval. One value: no interval (lo = hi = the value).
function bootstrap (values, { resamples = 2000, seed = 20, level = 0.95 } = {}) {
  const xs = values.filter((v) => typeof v === 'number' && Number.isFinite(v))
  const n = xs.length
  if (n === 0) return { value: null, lo: null, hi: null, n: 0 }
  const value = median(xs)
  if (n === 1) return { value, lo: value, hi: value, n }
  const rand = rng(seed)
  const medians = new Float64Array(resamples)
  const sample = new Float64Array(n)
  for (let b = 0; b < resamples; b++) {
    for (let i = 0; i < n; i++) sample[i] = xs[Math.floor(rand() * n)]
    medians[b] = median(sample)
  }
  medians.sort()
  const tail = (1 - level) / 2
  return { value, lo: medians[Math.floor(tail * (resamples - 1))], hi: medians[Math.ceil((1 - tail) * (resamples - 1))], n }
}

// A cell measured in several runs → the median of `pick(run)` over the kept runs, its interval,
// and how many runs were set aside for their send lag. `pick`: a key or a function of a run.
function interval (runs, pick) {
  const get = typeof pick === 'function' ? pick : (r) => r[pick]
  const k = keptRuns(runs ?? [])
  return { ...bootstrap(k.runs.map(get)), runs: (runs ?? []).length, rejected: k.rejected, allRejected: k.allRejected }
}

module.exports = { percentile, median, bootstrap, interval, keptRuns, lagSummary, lagTooHigh, LAG_LIMIT_MS }
