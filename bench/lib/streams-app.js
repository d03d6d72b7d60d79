'use strict'

// The streams part's app (bench/streams.js), a plain Node server on $PORT (127.0.0.1) that runs
// unchanged as one process, under `pool start`, as Node cluster's worker and under PM2 ($APP).
//
//   GET /stream?ms=&every=&id=   server-sent events: a token at once, then one every `every` ms
//                                until `ms` have passed or the file $STREAMS_CLOSES/end appears
//                                (looked for every 100 ms: the bench ends every stream at once
//                                when its steps are done), then `data: end N` (N tokens sent) and
//                                the end. Each token is `data: t K HRTIME`, HRTIME the sender's
//                                process.hrtime.bigint() (CLOCK_MONOTONIC, one clock for every
//                                process on Linux) just before the write, so the client reads
//                                each token's delay. A response closed before its end (the
//                                client hung up, or a front cut it) appends `ID HRTIME` of its
//                                'close' to $STREAMS_CLOSES/PID.log, synchronously.
//   GET /render?ms=              blocks the event loop `ms` ms (Atomics.wait: no CPU burnt), then
//                                answers: a CPU-bound page.

const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')

const sleeper = new Int32Array(new SharedArrayBuffer(4))
const dir = process.env.STREAMS_CLOSES
const closes = dir ? path.join(dir, `${process.pid}.log`) : null
const live = new Set() // the end() of every stream open

if (dir) {
  setInterval(() => {
    if (live.size && fs.existsSync(path.join(dir, 'end'))) for (const end of live) end()
  }, 100).unref()
}

function stream (res, params) {
  const every = Math.max(1, Number(params.get('every')) || 1000)
  const ms = Math.max(0, Number(params.get('ms')) || 0)
  const id = params.get('id') || ''
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  const endAt = performance.now() + ms
  let sent = 0
  let ended = false
  const token = () => res.write(`data: t ${sent++} ${process.hrtime.bigint()}\n\n`)
  const end = () => {
    clearInterval(timer)
    live.delete(end)
    ended = true
    res.end(`data: end ${sent}\n\n`)
  }
  token()
  const timer = setInterval(() => (performance.now() < endAt ? token() : end()), every)
  live.add(end)
  res.on('close', () => {
    clearInterval(timer)
    live.delete(end)
    if (!ended && closes) fs.appendFileSync(closes, `${id} ${process.hrtime.bigint()}\n`)
  })
}

function render (res, params) {
  const ms = Number(params.get('ms')) || 0
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms)
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 3 })
  res.end('ok\n')
}

const server = http.createServer((req, res) => {
  const q = req.url.indexOf('?')
  const route = q >= 0 ? req.url.slice(0, q) : req.url
  const params = new URLSearchParams(q >= 0 ? req.url.slice(q + 1) : '')
  req.resume()
  if (route === '/stream') return stream(res, params)
  if (route === '/render') return render(res, params)
  res.writeHead(404, { 'content-length': 0 })
  res.end()
})
server.listen(Number(process.env.PORT), '127.0.0.1')
