'use strict'

// The websocket part's app (bench/websocket.js), a plain Node server on $PORT (127.0.0.1) that
// runs unchanged as one process, under `pool start` and as Node cluster's worker ($APP).
//
//   WebSocket /echo   every message is sent back as it came (text or binary), at once; the `ws`
//                     library's server on the http server's `upgrade` event, without
//                     permessage-deflate (its default), so a message costs what the front adds
//   GET /render?ms=   blocks the event loop `ms` ms (Atomics.wait: no CPU burnt), then answers:
//                     a CPU-bound page
//   GET /             answers `ok` at once
//
// On a drain (the pool's `draining` signal: a reload, a stop) it closes each socket with 1001
// (going away), as an app should, so that its clients reconnect to a worker that stays.

const http = require('node:http')
const { WebSocketServer } = require('ws')
const { draining } = require('../../index.js')

const sleeper = new Int32Array(new SharedArrayBuffer(4))

function render (res, params) {
  const ms = Number(params.get('ms')) || 0
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms)
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 3 })
  res.end('ok\n')
}

const server = http.createServer((req, res) => {
  const q = req.url.indexOf('?')
  const route = q >= 0 ? req.url.slice(0, q) : req.url
  req.resume()
  if (route === '/render') return render(res, new URLSearchParams(q >= 0 ? req.url.slice(q + 1) : ''))
  if (route === '/') {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 3 })
    return res.end('ok\n')
  }
  res.writeHead(404, { 'content-length': 0 })
  res.end()
})

const wss = new WebSocketServer({ server, path: '/echo', perMessageDeflate: false })
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }))
  ws.on('error', () => {})
})

draining.addEventListener('abort', () => {
  for (const ws of wss.clients) ws.close(1001, 'server draining')
})

server.listen(Number(process.env.PORT), '127.0.0.1')
