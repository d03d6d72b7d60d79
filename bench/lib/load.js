'use strict'

// The load generator, in a process of its own so that its timers do not share an event loop
// with the front under test. Open loop: request i is sent at its scheduled time on a new
// connection, whatever happened to the ones before. It reports, per request, when it was
// actually sent and how long until the last byte of the answer.

const http = require('node:http')

function run ({ url, at, ms }) {
  return new Promise((resolve) => {
    const n = at.length
    const sent = new Float64Array(n)
    const latency = new Float64Array(n)
    const status = new Int32Array(n)
    let done = 0
    let next = 0
    const t0 = performance.now() + 50
    const finish = (i, code) => {
      latency[i] = performance.now() - sent[i]
      status[i] = code
      if (++done === n) resolve({ sent: Array.from(sent, (s) => s - t0), latency: Array.from(latency), status: Array.from(status) })
    }
    const fire = (i) => {
      sent[i] = performance.now()
      const req = http.get(`${url}/?ms=${ms[i].toFixed(3)}`, { agent: false }, (res) => {
        res.resume()
        res.on('end', () => finish(i, res.statusCode))
        res.on('error', () => finish(i, -1))
      })
      req.on('error', () => finish(i, -1))
    }
    // Wake up a little early and send whatever is due; setTimeout alone is late by up to ~1 ms.
    const tick = () => {
      const now = performance.now() - t0
      while (next < n && at[next] <= now) fire(next++)
      if (next < n) setTimeout(tick, Math.max(0, at[next] - (performance.now() - t0) - 1))
    }
    if (n === 0) resolve({ sent: [], latency: [], status: [] })
    else setTimeout(tick, 50)
  })
}

// Sequential requests (one at a time, a new connection each): the latency a front adds.
async function sequential ({ url, count }) {
  const latency = []
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    await new Promise((resolve, reject) => {
      http.get(`${url}/?ms=0`, { agent: false }, (res) => {
        res.resume()
        res.on('end', resolve)
      }).on('error', reject)
    })
    latency.push(performance.now() - start)
  }
  return { latency }
}

process.on('message', async (m) => {
  const result = m.cmd === 'run' ? await run(m) : await sequential(m)
  process.send({ result })
})
process.send({ ready: true })
process.on('disconnect', () => process.exit(0))
