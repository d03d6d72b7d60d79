'use strict'

// A closed-loop load for tests: `concurrency` clients each send a request, await the answer,
// send the next, until `stop()` is called, `maxRequests` were sent, or `maxMs` passed, whichever
// comes first. Every answer other than 2xx, and every error, is a failure kept for the report.

const http = require('node:http')
const { waitFor } = require('../helpers')

function startLoad (url, {
  concurrency = 4,
  maxRequests = 5000,
  maxMs = 30000,
  timeout = 15000,
  path = () => '/',
  keepAlive = true
} = {}) {
  const stats = { sent: 0, ok: 0, failed: 0, failures: [], statuses: {} }
  const deadline = Date.now() + maxMs
  // Without keep-alive, no socket cap: Node's agent sends `Connection: keep-alive` when its
  // maxSockets is finite and hands a finished socket to a queued request, so a capped
  // "keepAlive: false" agent still reuses a third of its connections. The closed loop already
  // bounds the connections to `concurrency`.
  const agent = new http.Agent({ keepAlive, maxSockets: keepAlive ? concurrency : Infinity })
  let stopped = false

  function once (i) {
    return new Promise((resolve) => {
      const req = http.get(url + path(i), { agent }, (res) => {
        res.resume()
        res.on('end', () => {
          stats.statuses[res.statusCode] = (stats.statuses[res.statusCode] || 0) + 1
          if (res.statusCode >= 200 && res.statusCode < 300) stats.ok++
          else { stats.failed++; stats.failures.push(`status ${res.statusCode}`) }
          resolve()
        })
      })
      req.setTimeout(timeout, () => req.destroy(new Error('timeout')))
      req.on('error', (err) => { stats.failed++; stats.failures.push(err.message); resolve() })
    })
  }

  async function client () {
    while (!stopped && stats.sent < maxRequests && Date.now() < deadline) {
      await once(stats.sent++)
    }
  }

  const clients = Promise.all(Array.from({ length: concurrency }, client))
  return {
    stats,
    done: clients, // resolves once the clients stopped by themselves (maxRequests, maxMs) or by stop()
    async stop () {
      stopped = true
      await clients
      agent.destroy()
      return stats
    }
  }
}

// Until a startLoad `load` has had `n` more answers than now: it has run on whatever serves now.
async function moreAnswers (load, n = 10) {
  const ok = load.stats.ok
  await waitFor(() => load.stats.ok >= ok + n, { timeout: 10000, what: `${n} more answers than ${ok}` })
}

// An open-loop load for tests: `rate` requests per second for `seconds`, each on a new
// connection, sent when its time comes whether or not earlier ones were answered (as real users
// arrive). A client gives up after `deadlineMs` and closes its connection. Resolves, once every
// request has been answered or given up, with the counts: ok (200 within the deadline),
// turnedAway (503), gaveUp, failed (anything else), sent.
function openLoad (url, { rate, seconds, deadlineMs, path = () => '/' }) {
  const counts = { sent: 0, ok: 0, turnedAway: 0, gaveUp: 0, failed: 0 }
  const total = Math.round(rate * seconds)
  const pending = []
  const started = performance.now()
  return new Promise((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor((performance.now() - started) * rate / 1000))
      while (counts.sent < due) pending.push(once(counts.sent++))
      if (counts.sent === total) {
        clearInterval(tick)
        resolve(Promise.all(pending).then(() => counts))
      }
    }, 5)
  })

  function once (i) {
    return new Promise((resolve) => {
      let done = false
      const end = (key) => { if (!done) { done = true; counts[key]++; clearTimeout(timer); resolve() } }
      const req = http.get(url + path(i), { agent: false }, (res) => {
        res.resume()
        res.on('end', () => end(res.statusCode === 200 ? 'ok' : res.statusCode === 503 ? 'turnedAway' : 'failed'))
        res.on('error', () => end('failed'))
      })
      const timer = setTimeout(() => { end('gaveUp'); req.destroy() }, deadlineMs)
      req.on('error', () => end('failed'))
    })
  }
}

module.exports = { startLoad, moreAnswers, openLoad }
