'use strict'

function percentile (values, p) {
  const sorted = Float64Array.from(values).sort()
  if (sorted.length === 0) return NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[i]
}

function median (values) { return percentile(values, 50) }

module.exports = { percentile, median }
