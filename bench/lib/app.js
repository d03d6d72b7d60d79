'use strict'

// The benchmark's stand-in for a server-side render: it blocks its event loop for the service
// time given in `?ms=` with Atomics.wait, which, unlike a busy loop, burns no CPU. So 15 such
// workers behave like a 15-core machine even on a 2-core one: a worker is unavailable for
// exactly its service time, and the balancing in front is what is measured.
//
// `?busy=1` burns the CPU for the service time instead (a busy loop), for the CPU-bound variant.
// `?wait=` awaits that many ms before answering, its event loop idle meanwhile, as a page that
// awaits its data does (the worker still takes one request at a time), and `?after=` blocks the
// event loop that many ms more once the data is there (the render's second half).
// `?kb=` sends a body of that many KB (for the buffering measurement). `?late=MS` streams the
// answer, as React's renderToPipeableStream writes a page: a shell of `?shell=` KB (4 by
// default) as soon as the render is done, then the `kb` KB of the rest MS later, chunked: the
// data a Suspense boundary waits for (a timer, no CPU), or with `?lateCpu=1` the rest of the page
// rendered (the event loop blocked, as by the render). `?hang=1` never answers:
// it blocks the event loop for good, as an endless loop in a render would, still without burning
// a core (only the supervisor's request timeout ends it). With `onBusy`, each
// request reports how long the worker was taken by it: from its headers to its last byte
// handed to the kernel, upload and download included (or to the connection's end, if the
// client gave up first: `finished` false).

const sleeper = new Int32Array(new SharedArrayBuffer(4))

function block (ms) {
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms)
}

// A render that burns its core for `ms`, for the CPU-bound variant (bench/costs.js), where the
// front has to compete with the renders for the machine's cores.
function spin (ms) {
  const end = performance.now() + ms
  while (performance.now() < end) { /* a CPU-bound render */ }
}

function createApp ({ onBusy } = {}) {
  return (req, res) => {
    const started = performance.now()
    const q = req.url.indexOf('?')
    const params = new URLSearchParams(q >= 0 ? req.url.slice(q + 1) : '')
    const ms = Number(params.get('ms') || 0)
    const kb = Number(params.get('kb') || 0)
    const hang = params.get('hang') === '1'
    const busy = params.get('busy') === '1'
    const wait = Number(params.get('wait') || 0)
    const after = Number(params.get('after') || 0)
    let received = 0
    req.on('data', (c) => { received += c.length })
    req.on('end', () => {
      if (hang) Atomics.wait(sleeper, 0, 0) // no timeout: never returns
      if (busy) spin(ms)
      else block(ms)
      if (wait > 0) setTimeout(() => { block(after); answer() }, wait)
      else answer()
    })
    const answer = () => {
      if (params.has('late')) streamPage(res, Number(params.get('shell') || 4), kb, Number(params.get('late')), params.get('lateCpu') === '1')
      else {
        const body = kb > 0 ? Buffer.alloc(kb * 1024, 'x') : Buffer.from('ok\n')
        res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': body.length })
        res.end(body)
      }
      if (!onBusy) return
      let finishedAt = 0
      res.on('finish', () => { finishedAt = performance.now() })
      res.on('close', () => onBusy({ url: req.url, received, finished: finishedAt > 0, busyMs: (finishedAt || performance.now()) - started }))
    }
  }
}

function streamPage (res, shellKb, restKb, lateMs, cpu) {
  res.writeHead(200, { 'Content-Type': 'text/html' })
  res.write(Buffer.alloc(shellKb * 1024, 's'))
  if (cpu) {
    // As React goes on rendering after it flushed the shell: in a task of its own, so that the
    // shell's write (corked by Node until the next tick) goes out first.
    return setImmediate(() => {
      block(lateMs)
      res.end(Buffer.alloc(restKb * 1024, 'r'))
    })
  }
  const rest = setTimeout(() => res.end(Buffer.alloc(restKb * 1024, 'r')), lateMs)
  res.on('close', () => clearTimeout(rest))
}

module.exports = { createApp, block }
