'use strict'
// A Socket.IO chat beside an Express 5 app, listening on PORT itself: run it with
// `PORT=3000 node examples/socketio-chat/server.js` or, unchanged, under
// `pool start examples/socketio-chat/server.js -n 2` (with REDIS_URL, see below).
//
//   GET /          the chat page (index.html); it loads the client script that Socket.IO
//                  serves itself, /socket.io/socket.io.js
//   GET /whoami    {"pid", "slot", "clients"}: which worker answered
//   Socket.IO      `welcome` {pid, slot} to each client that connects; a `chat` message (a
//                  string of 1 to 500 characters) goes to every client as `chat` {text, pid,
//                  slot, at}, and is acked {ok, pid}
//
// The clients use Socket.IO's default transports: long-polling first, then the upgrade to a
// WebSocket. Every request of a session must reach the worker that opened it, and under
// `pool start` the balancer sends them there (docs/guide/embedded-balancer.md, "Socket.IO with
// its default transports"); no sticky-session setup.
//
// A worker's io.emit() reaches its own clients only. With REDIS_URL set (redis://host:port),
// the Redis adapter relays each message through Redis to every worker, so that every client of
// the pool gets it. @socket.io/cluster-adapter does not apply here: it relays through Node's
// cluster IPC (process.send to the primary), and pool's workers are not cluster workers and have
// no Node IPC channel (process.send is undefined). Without REDIS_URL, one process is one chat.
//
// When the pool tells the worker to drain (a reload, a recycle, a scale-down, a stop), every
// client's connection is closed; the clients reconnect by themselves, through the balancer, to a
// worker that is not leaving. Not with io.disconnectSockets(): its disconnect packet tells a
// client the server sent it away ("io server disconnect"), and such a client does not reconnect.
// Nor with io.close(), which closes the HTTP server too, the pool's to close.
const path = require('node:path')
const http = require('node:http')
const express = require('express')
const { Server } = require('socket.io')
// The package's name on npm; `require('pool')` where it is installed as `pool`. `draining` is
// an AbortSignal that aborts when the worker drains; a version of the package without it gives
// undefined, hence the `?.`.
const { draining } = require('pool-supervisor')

const port = Number(process.env.PORT) || 3000
const slot = process.env.POOL_WORKER_ID ?? null
const MAX_TEXT = 500

const app = express()
const server = http.createServer(app)
const io = new Server(server)

app.get('/', (req, res) => res.sendFile(path.join(__dirname, 'index.html')))
app.get('/whoami', (req, res) => res.json({ pid: process.pid, slot, clients: io.engine.clientsCount }))

io.on('connection', (socket) => {
  socket.emit('welcome', { pid: process.pid, slot })
  socket.on('chat', (text, ack) => {
    const ok = typeof text === 'string' && text.length > 0 && text.length <= MAX_TEXT
    if (ok) io.emit('chat', { text, pid: process.pid, slot, at: Date.now() })
    if (typeof ack === 'function') ack({ ok, pid: process.pid })
  })
})

draining?.addEventListener('abort', () => {
  for (const conn of Object.values(io.engine.clients)) conn.close() // the transport: clients reconnect
}, { once: true })

// With Redis, the adapter is in place before the first client connects: the server listens
// once both connections are up (under the pool, the worker is ready then).
async function main () {
  if (process.env.REDIS_URL) {
    const { createClient } = require('redis')
    const { createAdapter } = require('@socket.io/redis-adapter')
    const pub = createClient({ url: process.env.REDIS_URL })
    const sub = pub.duplicate()
    // Without a listener an 'error' would end the process; the clients reconnect by themselves.
    for (const client of [pub, sub]) client.on('error', (err) => console.error('redis:', err.message))
    await Promise.all([pub.connect(), sub.connect()])
    io.adapter(createAdapter(pub, sub))
  }
  server.listen(port, () => console.log(`chat on http://localhost:${port}/${process.env.REDIS_URL ? ' (Redis adapter)' : ''}`))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
