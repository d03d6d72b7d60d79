'use strict'

// The ideal to compare with: one FIFO queue over `servers` identical servers, zero overhead.
// Each arrival starts on the server that frees up first, at once if one is free.

function idealLatencies (arrivals, services, servers) {
  const order = arrivals.map((_, i) => i).sort((a, b) => arrivals[a] - arrivals[b])
  const freeAt = new Float64Array(servers)
  const latency = new Float64Array(arrivals.length)
  for (const i of order) {
    let k = 0
    for (let j = 1; j < servers; j++) if (freeAt[j] < freeAt[k]) k = j
    const start = Math.max(arrivals[i], freeAt[k])
    freeAt[k] = start + services[i]
    latency[i] = freeAt[k] - arrivals[i]
  }
  return latency
}

module.exports = { idealLatencies }
