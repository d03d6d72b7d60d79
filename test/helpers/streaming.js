'use strict'

// A streamed page and a client that times it, for the tests of what sits in front of a worker
// (HAProxy, nginx, the fleet's edge): both in the test's process, so that one clock times the
// worker's writes and the client's reads.

const net = require('node:net')
const http = require('node:http')

// A worker that streams, in this process so that its clock is the client's: a 4 KB shell at
// once, then the rest `gap` ms later, noting when it wrote each. ?cl=1: with a Content-Length;
// ?xab=VALUE: with X-Accel-Buffering.
async function startStreamingWorker (t, port, { gap = 400 } = {}) {
  const writes = new Map() // url → { shellAt, lateAt }, performance.now()
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x')
    const shell = '<shell>' + 's'.repeat(4089)
    const late = '<late>'
    const headers = { 'Content-Type': 'text/html' }
    if (url.searchParams.get('cl') === '1') headers['Content-Length'] = shell.length + late.length
    if (url.searchParams.get('xab')) headers['X-Accel-Buffering'] = url.searchParams.get('xab')
    res.writeHead(200, headers)
    const w = { shellAt: performance.now(), lateAt: null }
    writes.set(req.url, w)
    res.write(shell)
    setTimeout(() => { w.lateAt = performance.now(); res.end(late) }, gap)
  })
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  return writes
}

// GET `pathname` on a raw connection to `port`: { head, shellAt, lateAt } (performance.now()).
function timedGet (port, pathname) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    let text = ''
    let shellAt = null
    let lateAt = null
    socket.setEncoding('latin1')
    socket.on('data', (d) => {
      text += d
      if (shellAt === null && text.includes('<shell>')) shellAt = performance.now()
      if (lateAt === null && text.includes('<late>')) lateAt = performance.now()
    })
    socket.on('error', reject)
    socket.on('close', () => resolve({ head: text.slice(0, text.indexOf('\r\n\r\n')), shellAt, lateAt }))
    socket.write(`GET ${pathname} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
  })
}

module.exports = { startStreamingWorker, timedGet }
