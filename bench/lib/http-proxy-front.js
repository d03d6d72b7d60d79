'use strict'

// The smallest front built on http-proxy (keep-alive agent, no queue, plain rotation), only
// to measure what http-proxy itself adds per request next to the embedded balancer's own
// http.request-based forwarding. $CONFIG: JSON { port, workers: [{ port }] }.

const http = require('node:http')
const httpProxy = require('http-proxy')

const { port, workers } = JSON.parse(process.env.CONFIG)
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
const proxy = httpProxy.createProxyServer({ agent, xfwd: true })
let next = 0
proxy.on('error', (err, req, res) => { res.writeHead(502); res.end(err.message) })
http.createServer((req, res) => {
  const w = workers[next++ % workers.length]
  proxy.web(req, res, { target: `http://127.0.0.1:${w.port}` })
}).listen(port, '127.0.0.1', () => process.send({ ready: true }))
process.on('disconnect', () => process.exit(0))
