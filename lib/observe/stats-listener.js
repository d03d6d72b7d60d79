'use strict'

// The pool's observability listener, in every mode, apart from the traffic ports so that it can
// stay on 127.0.0.1 while the front faces the network: GET /metrics (the pool's Prometheus
// registry, the front's series included), GET /status (JSON, what `pool status --json` shows),
// and GET / (the status page, for a person, drawn in the browser from the other two).

const http = require('node:http')
const { listen, closeServer, trackClose, urlOf } = require('../net/listen')
const { statusPage } = require('./status-page')
const { guardAccept } = require('../net/descriptors')

// On stop, a scrape still open this long is cut.
const STOP_GRACE_MS = 1000

class StatsListener {
  // registry(): the prom-client Registry to serve, read per scrape; status(): a JSON-able object;
  // onRefused(): a connection refused for want of file descriptors.
  constructor ({ host, port, registry, status, logger, onRefused }) {
    this.host = host
    this.port = port
    this.url = urlOf(host, port)
    this.server = trackClose(http.createServer((req, res) => { serve(req, res, { registry, status }) }))
    guardAccept(this.server, { name: 'stats listener', logger, onRefused })
  }

  async start () {
    const bound = await listen(this.server, { port: this.port, host: this.host, flag: 'stats-port' })
    if (bound.fd !== undefined) this.url = urlOf(bound.address, bound.port) // a socket handed over: where it listens
  }

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
    if (path === '/') return sendPage(res)
    send(res, 404, 'text/plain', 'not found: try /, /metrics or /status\n')
  } catch (err) {
    if (!res.headersSent) send(res, 500, 'text/plain', `stats failed: ${err.message}\n`)
    else res.destroy()
  }
}

function send (res, status, type, body, headers = {}) {
  res.writeHead(status,
    { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store', ...headers })
  res.end(res.req.method === 'HEAD' ? undefined : body)
}

// The page runs its own inline script and style, and nothing else: the policy names them by
// hash, lets it fetch only from this listener, and keeps it out of other sites' frames.
function sendPage (res) {
  const { html, contentSecurityPolicy } = statusPage()
  send(res, 200, 'text/html; charset=utf-8', html, {
    'Content-Security-Policy': contentSecurityPolicy,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY'
  })
}

module.exports = { StatsListener }
