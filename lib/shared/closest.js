'use strict'

// "Did you mean …?": the known name nearest to a mistyped one.

// The known key at the smallest edit distance, if it is close enough to be a typo.
function closest (key, known) {
  let best = null
  let bestDistance = Infinity
  for (const candidate of known) {
    const d = distance(key.toLowerCase(), candidate.toLowerCase())
    if (d < bestDistance) { best = candidate; bestDistance = d }
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 4)) ? best : null
}

function distance (a, b) {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = row
  }
  return previous[b.length]
}

module.exports = { closest }
