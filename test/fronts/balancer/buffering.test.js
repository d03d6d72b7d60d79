'use strict'

// Buffering and protection of the embedded balancer: slow clients must not hold a worker, large
// responses still arrive whole, and the front refuses slowloris and smuggling attempts.
// Speeds here only make the cases happen; the measurement is in bench/balancer.js.

const t = require('tap')
const net = require('node:net')
const http = require('node:http')
const { request, waitFor } = require('../../helpers')
const { setup } = require('../../helpers/balancer')

// POST `total` bytes in `chunks` pieces, `gapMs` apart. Resolves with the parsed /echo answer.
function slowUpload (url, total, chunks, gapMs) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { 'Content-Length': total } }, (res) => {
      let body = ''
      res.on('data', (c) => { body += c })
      res.on('end', () => resolve(JSON.parse(body)))
    })
    req.on('error', reject)
    const piece = Buffer.alloc(total / chunks, 'u')
    let sent = 0
    const next = () => {
      sent++
      if (sent === chunks) return req.end(piece)
      req.write(piece)
      setTimeout(next, gapMs)
    }
    next()
  })
}

t.test('a slow upload does not hold the worker: the body is read before a worker is taken', async (t) => {
  const { balancer, seen } = await setup(t, 1)
  let uploadDone = false
  const upload = slowUpload(`${balancer.base}/echo?upload`, 64 * 1024, 16, 100)
    .then((r) => { uploadDone = true; return r })
  await waitFor(() => balancer.status().workers.length === 1)
  await new Promise((resolve) => setTimeout(resolve, 300))
  const quick = await request(`${balancer.base}/sleep?quick`)
  t.equal(quick.status, 200)
  t.equal(uploadDone, false, 'the quick request was served while the upload was still arriving')
  t.same(seen().map((r) => r.url), ['/sleep?quick'], 'the worker has not seen the upload yet')
  const echoed = await upload
  t.equal(echoed.bodyLength, 64 * 1024, 'the whole body arrived')
})

t.test('a client that does not read does not hold the worker: the response is buffered', async (t) => {
  const size = 12 * 1024 // KB, far more than the sockets between balancer and client can hold
  const { balancer } = await setup(t, 1, { maxResponseBuffer: 16 * 1024 * 1024 })
  let res
  const req = http.get(`${balancer.base}/big?kb=${size}`, { agent: false }, (r) => { res = r; r.pause() })
  t.teardown(() => req.destroy())
  await waitFor(() => res, { what: 'the big response to start' })
  const quick = await request(`${balancer.base}/sleep?quick`)
  t.equal(quick.status, 200, 'the worker served another client meanwhile')
  await waitFor(() => balancer.status().inFlight === 0,
    { what: 'the worker free: the balancer read it all, the client nothing' })
  t.equal(balancer.status().inFlight, 0, 'and is free')
  let received = 0
  res.on('data', (c) => { received += c.length })
  res.resume()
  await new Promise((resolve) => res.on('end', resolve))
  t.equal(received, size * 1024, 'the slow reader still got it all')
})

t.test('--send-timeout: a client that stops reading is cut off, ' +
  'and a streamed response frees its worker', async (t) => {
  const { balancer } = await setup(t, 1, { maxResponseBuffer: 256 * 1024, sendTimeout: 1000 })
  let res
  const req = http.get(`${balancer.base}/big?kb=${12 * 1024}`, { agent: false }, (r) => { res = r; r.pause() })
  req.on('error', () => {})
  t.teardown(() => req.destroy())
  await waitFor(() => res, { what: 'the big response to start' })
  t.equal(balancer.status().inFlight, 1, 'streaming to a client that does not read holds the worker...')
  await waitFor(() => balancer.status().inFlight === 0, { timeout: 5000, what: 'the worker released' })
  t.equal((await request(`${balancer.base}/sleep?after`)).status, 200,
    '...until the send timeout frees it for the next client')
  const metrics = (await request(`${balancer.statsBase}/metrics`)).body
  t.match(metrics, /pool_failures_total\{reason="client_send_timeout"\} 1/, 'counted in /metrics')
  // The stalled client, reading again, finds its response cut short: it was not sent in full.
  let received = 0
  res.on('data', (c) => { received += c.length })
  await new Promise((resolve) => { res.on('close', resolve); res.resume() })
  t.ok(!res.complete && received < 12 * 1024 * 1024,
    `the cut-off client got ${received} of ${12 * 1024 * 1024} bytes, and no complete response`)
})

t.test('a response larger than the buffer streams through intact', async (t) => {
  const { balancer } = await setup(t, 1, { maxResponseBuffer: 256 * 1024 })
  const r = await new Promise((resolve, reject) => {
    http.get(`${balancer.base}/big?kb=2048`, { agent: false }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
    }).on('error', reject)
  })
  t.equal(r.status, 200)
  t.equal(r.body.length, 2048 * 1024)
  t.equal(r.body.toString('latin1', 0, 26), 'abcdefghijklmnopqrstuvwxyz')
  t.equal(r.body.toString('latin1', r.body.length - 26),
    Buffer.alloc(2048 * 1024, 'abcdefghijklmnopqrstuvwxyz').toString('latin1', 2048 * 1024 - 26))
  const head = await request(`${balancer.base}/big?kb=2048`, { method: 'HEAD' })
  t.equal(head.headers['content-length'], String(2048 * 1024))
  t.equal(head.body, '')
  t.equal(balancer.status().inFlight, 0)
})

t.test('a chunked response that outgrows the buffer and ends in the same read', async (t) => {
  const { balancer } = await setup(t, 1, { maxResponseBuffer: 1000 })
  const r = await request(`${balancer.base}/chunks?n=50&size=100`, { timeout: 5000 })
  t.equal(r.status, 200)
  t.equal(r.body.length, 5000)
  t.equal(r.body.slice(4900), 'x'.repeat(100), 'the last chunk is there')
  t.equal(balancer.status().inFlight, 0, 'the worker was released')
})

// Send raw bytes, resolve with everything received until the balancer closes the connection.
function raw (port, text, { timeout = 8000 } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    let data = ''
    const timer = setTimeout(() => { socket.destroy(); reject(new Error(`connection still open after ${timeout} ms`)) },
      timeout)
    socket.setEncoding('latin1')
    socket.on('data', (d) => { data += d })
    socket.on('error', () => {})
    socket.on('close', () => { clearTimeout(timer); resolve(data) })
    socket.write(text)
  })
}

t.test('slowloris: a client that never finishes its headers is cut off', async (t) => {
  const { balancer, seen } = await setup(t, 1, { headersTimeout: 500, requestTimeout: 1000 })
  const answer = await raw(balancer.options.port, 'GET /sleep HTTP/1.1\r\nHost: x\r\nX-Slow: ')
  t.match(answer, /^HTTP\/1\.1 408/)
  t.same(seen(), [])
})

t.test('strict parsing: an ambiguous request is refused, not passed on', async (t) => {
  const { balancer, seen } = await setup(t, 1)
  const smuggle = 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG'
  t.match(await raw(balancer.options.port, smuggle), /^HTTP\/1\.1 400/)
  const badHeader = 'GET /sleep HTTP/1.1\r\nHost: x\r\nX-Bad : y\r\n\r\n'
  t.match(await raw(balancer.options.port, badHeader), /^HTTP\/1\.1 400/)
  t.same(seen(), [])
})
