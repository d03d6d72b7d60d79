'use strict'

// The observability listener, apart from the traffic port so that it can stay on 127.0.0.1
// while the front faces the network: GET /metrics (Prometheus text) and GET /status (JSON).

const http = require('node:http')

// registry(): the Prometheus registry to serve (the pool's, once the balancer has started).
function createStatsServer ({ registry, status }) {
  return http.createServer(async (req, res) => {
    const path = req.url.split('?')[0]
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'text/plain', 'GET only\n')
      if (path === '/metrics') return send(res, 200, registry().contentType, await registry().metrics())
      if (path === '/status') return send(res, 200, 'application/json', JSON.stringify(status(), null, 2) + '\n')
      send(res, 404, 'text/plain', 'not found: try /metrics or /status\n')
    } catch (err) {
      send(res, 500, 'text/plain', `stats failed: ${err.message}\n`)
    }
  })
}

function send (res, status, type, body) {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' })
  res.end(res.req.method === 'HEAD' ? undefined : body)
}

module.exports = { createStatsServer }
