'use strict'
// Server-sent events, as a plain Node server writes them, listening on PORT itself: run it with
// `node examples/sse/server.js` or, unchanged, under `pool start examples/sse/server.js`. GET
// /events sends one event every ?every= ms (1000), ?count= of them (forever without), then ends;
// each stream is long-lived and holds its worker only while it writes. A client that leaves ends
// its stream: the server sees the response close and stops its timer.
const http = require('node:http')

const port = Number(process.env.PORT) || 3000

http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost')
  if (url.pathname !== '/events') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
    return res.end('<!doctype html><pre id=log></pre><script>new EventSource("/events").onmessage=(e)=>{log.textContent+=e.data+"\\n"}</script>\n')
  }
  const every = Math.max(10, Number(url.searchParams.get('every')) || 1000)
  const count = Number(url.searchParams.get('count')) || Infinity
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  let sent = 0
  const timer = setInterval(() => {
    res.write(`id: ${++sent}\ndata: ${JSON.stringify({ n: sent, at: Date.now(), pid: process.pid })}\n\n`)
    if (sent >= count) {
      clearInterval(timer)
      res.end()
    }
  }, every)
  res.on('close', () => clearInterval(timer))
}).listen(port, () => console.log(`server-sent events on http://localhost:${port}/events`))
