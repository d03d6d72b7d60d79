'use strict'

// The load generator, in a process of its own so that its timers do not share an event loop
// with the front under test. Open loop: request i is sent at its scheduled time on a new
// connection, whatever happened to the ones before. It reports, per request, when it was
// actually sent, how long until the last byte of the answer, and its status. With `deadlineMs`
// (the overload bench) each client gives up after that long, as browsers and upstream proxies
// do: it closes its connection and the request counts as unanswered (status 0).
//
// Every run also says how late it sent its requests against their schedule (`lag`: p50, p99
// and max in ms): a generator that falls behind (a busy machine) offers a different load than
// the one asked for, and the run must not count as if it had not (bench/lib/stats.js).
//
// With `firstByte` it also reports, per request, how long until the first byte of the answer's
// body (a streamed page's shell: what a browser can paint first). With `keepAlive`, requests go
// over kept-alive connections (as many as are in flight at once) instead of a new connection each.
//
// Messages: { cmd: 'run', url, at, ms, deadlineMs?, query?, firstByte?, keepAlive? } → { sent,
// latency, status, lag, first? };
// { cmd: 'sequential', url, count } → { latency }; { cmd: 'idle', url, probes } → { idle }.

const http = require('node:http')
const { lagSummary } = require('./stats')

// `query`: more query parameters for every request (`busy=1`).
function run ({ url, at, ms, deadlineMs = 0, query = '', firstByte = false, keepAlive = false }) {
  const agent = keepAlive ? new http.Agent({ keepAlive: true, maxSockets: Infinity }) : false
  return new Promise((resolve) => {
    const n = at.length
    const sent = new Float64Array(n)
    const first = firstByte ? new Float64Array(n).fill(NaN) : null
    const latency = new Float64Array(n)
    const status = new Int32Array(n)
    const done = new Uint8Array(n)
    let finished = 0
    let next = 0
    const t0 = performance.now() + 50
    const finish = (i, code) => {
      if (done[i]) return // a client that gave up hears nothing more
      done[i] = 1
      latency[i] = performance.now() - sent[i]
      status[i] = code
      if (++finished === n) {
        if (agent) agent.destroy()
        const sentAt = Array.from(sent, (s) => s - t0)
        resolve({ sent: sentAt, latency: Array.from(latency), status: Array.from(status), lag: lagSummary(sentAt.map((s, j) => s - at[j])), ...(first ? { first: Array.from(first) } : {}) })
      }
    }
    const fire = (i) => {
      sent[i] = performance.now()
      const req = http.get(`${url}/?ms=${ms[i].toFixed(3)}${query ? `&${query}` : ''}`, { agent }, (res) => {
        if (first) res.once('data', () => { first[i] = performance.now() - sent[i] })
        res.resume()
        res.on('end', () => { clearTimeout(giveUp); finish(i, res.statusCode) })
        res.on('error', () => finish(i, -1))
      })
      const giveUp = deadlineMs > 0 ? setTimeout(() => { finish(i, 0); req.destroy() }, deadlineMs) : null
      req.on('error', () => { clearTimeout(giveUp); finish(i, -1) })
    }
    // Wake up a little early and send whatever is due; setTimeout alone is late by up to ~1 ms.
    const tick = () => {
      const now = performance.now() - t0
      while (next < n && at[next] <= now) fire(next++)
      if (next < n) setTimeout(tick, Math.max(0, at[next] - (performance.now() - t0) - 1))
    }
    if (n === 0) resolve({ sent: [], latency: [], status: [], lag: null })
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

const COMMANDS = { run, sequential, idle }

process.on('message', async (m) => {
  const result = await COMMANDS[m.cmd](m)
  process.send({ result })
})
process.send({ ready: true })
process.on('disconnect', () => process.exit(0))
