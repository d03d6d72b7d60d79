'use strict'

// Closed-loop load: `connections` clients, each sending its next request as soon as the last one
// is answered (or failed), for `durationS` seconds or until `requests` have been sent. Clients
// keep their connection alive, or, with `keepAlive: false`, open a new one per request as
// `ab -c N` does (without -k): a front then deals each request, not each client, to a worker. Each request asks the bench app
// for a service time drawn from the bench's lognormal (or a fixed `ms`), from a seeded
// generator, so every front is given the same sequence. Every answer and every failure is kept
// with its time, so a run can be summarised as a whole or cut into a timeline.
//
// Not autocannon: when a server closes a keep-alive connection without answering (what HAProxy
// does to a client whose request died with its worker), autocannon reconnects and sends the
// request again without counting anything (measured: a server closing 1 connection in 10 got
// 0 errors reported). Here that is a failure, `closed`, as a browser would see it.

const http = require('node:http')
const { rng, normal } = require('./schedule')
const { percentile } = require('./stats')

// A seeded sequence of service times: lognormal(median, sigma) capped at `cap`, or fixed `ms`.
function serviceTimes ({ ms, median = 30, sigma = 0.8, cap = 2000, seed = 42 }) {
  if (ms !== undefined) return () => ms
  const rand = rng(seed)
  return () => Math.min(cap, median * Math.exp(sigma * normal(rand)))
}

function failureKind (err) {
  if (err.message === 'timeout') return 'timeout'
  if (err.code === 'ECONNRESET' || /hang up/.test(err.message)) return 'closed'
  if (err.code === 'ECONNREFUSED') return 'refused'
  return err.code || err.message
}

// Resolves { responses: [{ end, latency, status }], failures: [{ end, kind }], summary }, `end`
// in ms since the load began. Requests still running when the time is up are waited for (a
// client gives up after `timeoutS`), so the run ends within durationS + timeoutS.
// `query` (a string) replaces the `ms=` service time, for apps of their own (the SSR demo);
// `until()` ends the load early once it returns true (checked before each request).
async function closedLoop ({ url, connections, durationS, requests = Infinity, keepAlive = true, timeoutS = 10, service = { ms: 0 }, path = '/', query, until = () => false }) {
  const next = serviceTimes(service)
  const agent = keepAlive ? new http.Agent({ keepAlive: true, maxSockets: connections }) : false
  let sent = 0
  const responses = []
  const failures = []
  const t0 = performance.now()
  const endAt = t0 + durationS * 1000
  const once = () => new Promise((resolve) => {
    const sent = performance.now()
    let settled = false
    const settle = (record) => {
      if (settled) return
      settled = true
      if (record.kind) failures.push(record)
      else responses.push(record)
      resolve()
    }
    const req = http.get(`${url}${path}?${query ?? `ms=${next().toFixed(2)}`}`, { agent }, (res) => {
      res.resume()
      res.on('end', () => settle({ end: performance.now() - t0, latency: performance.now() - sent, status: res.statusCode }))
      res.on('close', () => { if (!res.complete) settle({ end: performance.now() - t0, kind: 'cut' }) })
    })
    req.setTimeout(timeoutS * 1000, () => req.destroy(new Error('timeout')))
    req.on('error', (err) => settle({ end: performance.now() - t0, kind: failureKind(err) }))
  })
  await Promise.all(Array.from({ length: connections }, async () => {
    while (performance.now() < endAt && sent < requests && !until()) {
      sent++
      await once()
    }
  }))
  if (agent) agent.destroy()
  const elapsedS = Math.min(durationS, (performance.now() - t0) / 1000)
  return { responses, failures, elapsedS, summary: summarize(responses, failures, elapsedS) }
}

// What a run comes to: answered (2xx) requests per second, their latency, and what failed.
function summarize (responses, failures, durationS) {
  const ok = responses.filter((r) => r.status >= 200 && r.status < 300)
  const latency = ok.map((r) => r.latency)
  const byKind = {}
  for (const r of responses) if (!(r.status >= 200 && r.status < 300)) byKind[r.status] = (byKind[r.status] || 0) + 1
  for (const f of failures) byKind[f.kind] = (byKind[f.kind] || 0) + 1
  return {
    requests: responses.length + failures.length,
    ok: ok.length,
    failed: responses.length - ok.length + failures.length,
    failedByKind: byKind,
    rps: ok.length / durationS,
    p50: percentile(latency, 50),
    p90: percentile(latency, 90),
    p99: percentile(latency, 99),
    max: latency.reduce((a, b) => Math.max(a, b), -Infinity)
  }
}

module.exports = { closedLoop, serviceTimes, summarize }
