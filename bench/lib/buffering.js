'use strict'

// How long a slow client holds a worker, per front. One client uploads 300 KB at 100 KB/s,
// another reads 4 MB at 100 KB/s (more than the kernel's socket buffers hold; it gives up after
// 10 s); the render itself takes 50 ms. The worker reports its own busy time (from the
// request's headers to its last byte handed to the kernel). With buffering, that stays close
// to the render time; without, it grows to the client's transfer time.

const http = require('node:http')

const RATE = 100 * 1024 // bytes per second, both ways
const TICK_MS = 50

// A POST whose body of `bytes` trickles in at `rate` bytes/s. Resolves the client's total time.
function slowUpload (url, bytes, rate = RATE) {
  const started = performance.now()
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { 'Content-Length': bytes } }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - started }))
    })
    req.on('error', (err) => resolve({ status: err.code || 'error', ms: performance.now() - started }))
    const chunk = Buffer.alloc(Math.max(1, Math.round(rate * TICK_MS / 1000)), 'u')
    let sent = 0
    const tick = () => {
      const n = Math.min(chunk.length, bytes - sent)
      sent += n
      if (sent >= bytes) return req.end(chunk.subarray(0, n))
      req.write(chunk.subarray(0, n))
      setTimeout(tick, TICK_MS)
    }
    tick()
  })
}

// A GET whose response is read at `rate` bytes/s; gives up (closing) after `giveUpMs`.
function slowRead (url, rate = RATE, giveUpMs) {
  const started = performance.now()
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false }, (res) => {
      const reading = performance.now() // paced from the first byte of the answer, after the render
      let received = 0
      const giveUp = setTimeout(() => { req.destroy(); resolve({ received, complete: false, ms: performance.now() - started }) }, giveUpMs)
      res.on('data', (c) => {
        received += c.length
        const ahead = (received / rate) * 1000 - (performance.now() - reading)
        if (ahead > 0) {
          res.pause()
          setTimeout(() => res.resume(), ahead)
        }
      })
      res.on('end', () => { clearTimeout(giveUp); resolve({ received, complete: true, ms: performance.now() - started }) })
    })
    req.on('error', () => resolve({ complete: false, ms: performance.now() - started }))
  })
}

// fronts: [{ name, url, worker }] where worker is the forked bench worker (REPORT_BUSY) that
// serves that front alone. Resolves [{ name, uploadBusyMs, readBusyMs }].
async function measureBuffering (fronts, { renderMs = 50, uploadKb = 300, readKb = 4096, giveUpMs = 10000 } = {}) {
  const busy = new Map()
  for (const f of fronts) {
    busy.set(f.name, [])
    f.worker.on('message', (m) => { if (m.busy) busy.get(f.name).push(m.busy) })
  }
  const results = await Promise.all(fronts.map(async (f) => {
    await slowUpload(`${f.url}/upload?ms=${renderMs}`, uploadKb * 1024)
    const read = await slowRead(`${f.url}/download?ms=${renderMs}&kb=${readKb}`, RATE, giveUpMs)
    await new Promise((resolve) => setTimeout(resolve, 200)) // let the last busy report arrive
    const reports = busy.get(f.name)
    const of = (path) => reports.find((r) => r.url.startsWith(path))
    return { name: f.name, upload: of('/upload'), read: of('/download'), readComplete: read.complete }
  }))
  return { renderMs, uploadKb, readKb, rateKbps: RATE / 1024, results }
}

module.exports = { measureBuffering, slowUpload, slowRead }
