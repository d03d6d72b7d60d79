'use strict'

// autocannon in a process of its own, so that it can be pinned to a core apart from the front it
// loads (bench/costs.js: the embedded balancer's ceiling). Messages:
// { cmd: 'peak', url, connections, seconds } → { rps, total, errors, p50, p99 }.

const autocannon = require('autocannon')

function peak ({ url, connections, seconds }) {
  return new Promise((resolve) => {
    autocannon({ url, connections, duration: seconds }, (err, r) => {
      if (err) return resolve({ error: err.message })
      resolve({ rps: r.requests.total / seconds, total: r.requests.total, errors: r.errors + r.non2xx + r.timeouts, p50: r.latency.p50, p99: r.latency.p99 })
    })
  })
}

process.on('message', async (m) => {
  if (m.cmd === 'peak') process.send({ result: await peak(m) })
})
process.send({ ready: true })
process.on('disconnect', () => process.exit(0))
