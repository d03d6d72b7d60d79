'use strict'

// The load generator for the overload bench, in a process of its own: open loop, as load.js
// (request i is sent at its scheduled time on a new connection, whatever happened to the ones
// before), but each client gives up after `deadlineMs`, as browsers and upstream proxies do: it
// closes its connection and the request counts as unanswered (status 0).
//
// Messages: { cmd: 'run', url, at, ms, deadlineMs } → { sent, latency, status } per request;
// { cmd: 'idle', url, probes } → resolves once `probes` concurrent 0 ms requests are all
// answered quickly, twice in a row (the front has worked off what it had queued).

const http = require('node:http')

function run ({ url, at, ms, deadlineMs }) {
  return new Promise((resolve) => {
    const n = at.length
    const sent = new Float64Array(n)
    const latency = new Float64Array(n)
    const status = new Int32Array(n)
    const done = new Uint8Array(n)
    let finished = 0
    let next = 0
    const t0 = performance.now() + 50
    const finish = (i, code) => {
      if (done[i]) return
      done[i] = 1
      latency[i] = performance.now() - sent[i]
      status[i] = code
      if (++finished === n) resolve({ sent: Array.from(sent, (s) => s - t0), latency: Array.from(latency), status: Array.from(status) })
    }
    const fire = (i) => {
      sent[i] = performance.now()
      const req = http.get(`${url}/?ms=${ms[i].toFixed(3)}`, { agent: false }, (res) => {
        res.resume()
        res.on('end', () => { clearTimeout(giveUp); finish(i, res.statusCode) })
        res.on('error', () => finish(i, -1))
      })
      const giveUp = setTimeout(() => { finish(i, 0); req.destroy() }, deadlineMs)
      req.on('error', () => { clearTimeout(giveUp); finish(i, -1) })
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

function probe (url) {
  const start = performance.now()
  return new Promise((resolve) => {
    const req = http.get(`${url}/?ms=0`, { agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(performance.now() - start))
    })
    req.setTimeout(5000, () => req.destroy())
    req.on('error', () => resolve(Infinity))
  })
}

async function idle ({ url, probes, quickMs = 50, timeoutMs = 60000 }) {
  const deadline = performance.now() + timeoutMs
  let quickRounds = 0
  while (performance.now() < deadline) {
    const times = await Promise.all(Array.from({ length: probes }, () => probe(url)))
    quickRounds = Math.max(...times) < quickMs ? quickRounds + 1 : 0
    if (quickRounds === 2) return { idle: true }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return { idle: false }
}

process.on('message', async (m) => {
  const result = m.cmd === 'run' ? await run(m) : await idle(m)
  process.send({ result })
})
process.send({ ready: true })
process.on('disconnect', () => process.exit(0))
