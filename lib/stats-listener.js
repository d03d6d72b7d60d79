'use strict'

// The pool's observability listener, in every mode, apart from the traffic ports so that it can
// stay on 127.0.0.1 while the front faces the network: GET /metrics (the pool's Prometheus
// registry, the front's series included) and GET /status (JSON, what `pool status --json` shows).

const http = require('node:http')
const { listen, closeServer, trackClose, urlOf } = require('./listen')

// On stop, a scrape still open this long is cut.
const STOP_GRACE_MS = 1000

class StatsListener {
  // registry(): the prom-client Registry to serve, read per scrape; status(): a JSON-able object.
  constructor ({ host, port, registry, status }) {
    this.host = host
    this.port = port
    this.url = urlOf(host, port)
    this.server = trackClose(http.createServer((req, res) => { serve(req, res, { registry, status }) }))
  }

  start () { return listen(this.server, { port: this.port, host: this.host, flag: 'stats-port' }) }

  async stop () {
    const cut = setTimeout(() => this.server.closeAllConnections(), STOP_GRACE_MS)
    await closeServer(this.server)
    clearTimeout(cut)
  }
}

async function serve (req, res, { registry, status }) {
  const path = req.url.split('?')[0]
  try {
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'text/plain', 'GET only\n')
    if (path === '/metrics') return send(res, 200, registry().contentType, await registry().metrics())
    if (path === '/status') return send(res, 200, 'application/json', JSON.stringify(status(), null, 2) + '\n')
    send(res, 404, 'text/plain', 'not found: try /metrics or /status\n')
  } catch (err) {
    if (!res.headersSent) send(res, 500, 'text/plain', `stats failed: ${err.message}\n`)
    else res.destroy()
  }
}

function send (res, status, type, body) {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' })
  res.end(res.req.method === 'HEAD' ? undefined : body)
}

module.exports = { StatsListener }
