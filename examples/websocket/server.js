'use strict'
// WebSockets with `ws` beside an Express 5 app, listening on PORT itself: run it with
// `PORT=3000 node examples/websocket/server.js` or, unchanged, under
// `pool start examples/websocket/server.js -n 2`, where the balancer tunnels each socket to a
// worker (docs/guide/embedded-balancer.md, "WebSockets").
//
//   GET /        a page that opens a websocket, sends what you type and shows what comes back
//   GET /whoami  {"pid", "slot", "sockets"}: which worker answered, and how many sockets it holds
//   ws /ws       says {"type":"hello","pid","slot"}, echoes each message as {"type":"echo","data"},
//                pushes {"type":"push","n","at"} every second
//
// The server pings every socket every 30 s, ws's heartbeat: a client that has not answered one
// ping with its pong by the next is gone (a laptop closed, a network cut) and is terminated.
// The pings also keep a quiet socket's tunnel busy, below the pool's --tunnel-timeout (1 h).
//
// When the pool tells the worker to drain (a reload, a recycle, a scale-down, a stop), each
// socket is closed with 1001 (going away); the page reconnects, and the balancer sends the new
// handshake to a worker that is not leaving.
const http = require('node:http')
const express = require('express')
const { WebSocketServer } = require('ws')
// The package's name on npm; `require('pool')` where it is installed as `pool`. `draining` is
// an AbortSignal that aborts when the worker drains; a version of the package without it gives
// undefined, hence the `?.`.
const { draining } = require('pool-supervisor')

const port = Number(process.env.PORT) || 3000
const slot = process.env.POOL_WORKER_ID ?? null
const HEARTBEAT_MS = 30000
const PUSH_MS = 1000

const app = express()
const server = http.createServer(app)
const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 })

app.get('/', (req, res) => res.type('html').send(PAGE))
app.get('/whoami', (req, res) => res.json({ pid: process.pid, slot, sockets: wss.clients.size }))

// Express sees requests only; a handshake comes as the server's 'upgrade'.
server.on('upgrade', (req, socket, head) => {
  if (new URL(req.url, 'http://localhost').pathname !== '/ws') return refuse(socket, '404 Not Found')
  if (draining?.aborted) return refuse(socket, '503 Service Unavailable') // leaving: try again
  wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req))
})

function refuse (socket, status) {
  socket.end(`HTTP/1.1 ${status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`)
}

wss.on('connection', (ws) => {
  ws.isAlive = true
  ws.on('pong', () => { ws.isAlive = true })
  ws.on('error', console.error)
  ws.send(JSON.stringify({ type: 'hello', pid: process.pid, slot }))
  let n = 0
  const pusher = setInterval(() => ws.send(JSON.stringify({ type: 'push', n: ++n, at: Date.now() })), PUSH_MS)
  ws.on('message', (data, isBinary) => {
    ws.send(JSON.stringify({ type: 'echo', data: isBinary ? data.toString('base64') : String(data) }))
  })
  ws.on('close', () => clearInterval(pusher))
})

const heartbeat = setInterval(() => {
  for (const ws of wss.clients) {
    if (ws.isAlive === false) {
      ws.terminate()
      continue
    }
    ws.isAlive = false
    ws.ping()
  }
}, HEARTBEAT_MS)
wss.on('close', () => clearInterval(heartbeat))

draining?.addEventListener('abort', () => {
  for (const ws of wss.clients) ws.close(1001, 'server going away')
}, { once: true })

server.listen(port, () => console.log(`http://localhost:${port}/ (websocket on ws://localhost:${port}/ws)`))

const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>WebSocket echo</title>
<link rel="icon" href="data:,">
<p id="status">connecting…</p>
<form id="send"><input id="text" autocomplete="off" placeholder="a message to echo"> <button>Send</button></form>
<pre id="log"></pre>
<script>
const status = document.getElementById('status')
const log = document.getElementById('log')
const text = document.getElementById('text')
let ws
function show (line) { log.textContent = line + '\\n' + log.textContent.split('\\n').slice(0, 50).join('\\n') }
function connect () {
  ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws')
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data)
    if (m.type === 'hello') status.textContent = 'connected to pid ' + m.pid + (m.slot ? ', worker ' + m.slot : '')
    else if (m.type === 'echo') show('echo: ' + m.data)
    else if (m.type === 'push') show('push ' + m.n)
  }
  // 1001: the worker is leaving (a reload, say); the next handshake reaches another one.
  ws.onclose = (e) => {
    status.textContent = 'closed (' + e.code + '), reconnecting…'
    setTimeout(connect, 500 + Math.random() * 1000)
  }
}
document.getElementById('send').onsubmit = (e) => {
  e.preventDefault()
  if (ws.readyState === WebSocket.OPEN && text.value) ws.send(text.value)
  text.value = ''
}
connect()
</script>
`
