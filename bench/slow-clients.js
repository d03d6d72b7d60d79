'use strict'

// Slow clients, what a reverse proxy's buffering is for: how long one slow client holds a
// worker, per front, for transfers of 1 KB, 100 KB and 1 MB.
//
//   node bench/slow-clients.js [--quick] [--sizes 1,100,1024] [--rate 100] [--render 50]
//                              [--repeat 2] [--results DIR]
//
// A slow uploader sends a POST body of SIZE KB at `rate` KB/s; a slow reader fetches a response
// of SIZE KB and reads it at `rate` KB/s (giving up once it took twice as long as it should,
// plus 5 s). The render itself takes `render` ms (Atomics.wait). The worker measures its own busy
// time, from the request's headers to its last byte handed to the kernel: with buffering in
// front it stays near the render time, without it grows towards the client's transfer time.
//
// Fronts, each with a worker of its own, measured side by side: direct (no front), the embedded
// balancer, HAProxy from the generated config (it buffers neither way beyond its own buffers),
// and nginx → HAProxy from the generated configs. Loopback only: the kernel's socket buffers
// (net.ipv4.tcp_wmem/tcp_rmem, recorded in the result) take up to a few MB of a response on
// their own, which is why a reader of a small response never holds a worker, even direct.

const fs = require('node:fs')
const { startBusyFronts } = require('./lib/busy-fronts')
const { runPart, progress, round, log, sleep } = require('./lib/part')
const { slowUpload, slowRead } = require('./lib/buffering')

const defaults = { sizes: [1, 100, 1024], rate: 100, render: 50, repeat: 3 }
const quick = { sizes: [1, 100, 1024], repeat: 1 }

function sysctl (name) {
  try { return fs.readFileSync(`/proc/sys/${name.replace(/\./g, '/')}`, 'utf8').trim().split(/\s+/).map(Number) } catch { return null }
}

// One slow client on every front at once (each front has its own worker); resolves a row per
// front with the worker's busy time.
async function measure (fronts, direction, sizeKb, round_, args) {
  const bytes = sizeKb * 1024
  const rate = args.rate * 1024
  const transferMs = (bytes / rate) * 1000
  return Promise.all(fronts.map(async (f) => {
    const id = `${direction}-${sizeKb}-${round_}`
    const client = direction === 'upload'
      ? await slowUpload(`${f.url}/?ms=${args.render}&id=${id}`, bytes, rate)
      : await slowRead(`${f.url}/?ms=${args.render}&kb=${sizeKb}&id=${id}`, rate, 2 * transferMs + 5000)
    // The worker's report arrives once its side of the connection is closed.
    for (let i = 0; i < 50 && !f.worker.busy.has(id); i++) await sleep(100)
    const busy = f.worker.busy.get(id)
    return {
      front: f.name,
      direction,
      sizeKb,
      round: round_,
      busyMs: busy ? round(busy.busyMs, 1) : null,
      finished: busy ? busy.finished : null,
      clientMs: round(client.ms, 0),
      clientComplete: direction === 'upload' ? client.status === 200 : client.complete
    }
  }))
}

async function main (args) {
  const { fronts, skipped } = await startBusyFronts()
  const rows = []
  const steps = args.repeat * args.sizes.length * 2
  let done = 0
  for (let r = 1; r <= args.repeat; r++) {
    for (const sizeKb of args.sizes) {
      for (const direction of ['upload', 'read']) {
        progress(done++, steps, `${direction} ${sizeKb} KB`)
        const got = await measure(fronts, direction, sizeKb, r, args)
        rows.push(...got)
        log(`  ${direction.padEnd(6)} ${String(sizeKb).padStart(5)} KB  ` + got.map((g) => `${g.front} ${g.busyMs === null ? '?' : Math.round(g.busyMs)} ms`).join('  '))
      }
    }
  }
  progress(steps, steps, 'done')
  return {
    fronts: fronts.map((f) => f.name),
    skipped,
    socketBuffers: { tcp_wmem: sysctl('net.ipv4.tcp_wmem'), tcp_rmem: sysctl('net.ipv4.tcp_rmem') },
    rows
  }
}

runPart('slow-clients', { defaults, quick, main })
