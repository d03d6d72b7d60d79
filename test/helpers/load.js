'use strict'

// A closed-loop load for tests: `concurrency` clients each send a request, await the answer,
// send the next, until `stop()` is called, `maxRequests` were sent, or `maxMs` passed, whichever
// comes first. Every answer other than 2xx, and every error, is a failure kept for the report.

const http = require('node:http')

function startLoad (url, { concurrency = 4, maxRequests = 5000, maxMs = 30000, timeout = 15000, path = () => '/', keepAlive = true } = {}) {
  const stats = { sent: 0, ok: 0, failed: 0, failures: [], statuses: {} }
  const deadline = Date.now() + maxMs
  const agent = new http.Agent({ keepAlive, maxSockets: concurrency })
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
    async stop () {
      stopped = true
      await clients
      agent.destroy()
      return stats
    }
  }
}

module.exports = { startLoad }
