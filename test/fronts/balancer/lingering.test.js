'use strict'

// A refused upload reaches its client as the answer, not as a reset (issue 25, item 2). The
// balancer answers 413 (over --max-body) or 503 with Retry-After (over --body-budget) while the
// body is still arriving; closing at once then made the kernel reset the connection, and Node's
// http client saw EPIPE or ECONNRESET instead of the answer on 9 to 20 of 50 tries. With a
// lingering close (lib/fronts/balancer/lingering.js) every try reads its answer, one at a time
// and 8 at a time, and what a client can make the balancer do in return is bounded: read and
// drop at most --max-body (1 MiB at least) for 5 s, 1 s of silence ending it sooner, with
// nothing served that is pipelined behind.

const t = require('tap')
const net = require('node:net')
const path = require('node:path')
const http = require('node:http')
const { request, waitFor, freePorts, startPool, FIXTURES } = require('../../helpers')
const { setup } = require('../../helpers/balancer')
const { LINGER_MS, LINGER_IDLE_MS } = require('../../../lib/fronts/balancer/lingering')

const KiB = 1024
const MiB = 1024 * KiB

// A POST through Node's http client: { status, headers } from the answer, or { error } (its
// code) when the connection broke before an answer came. chunked: no Content-Length.
function post (url, body, { chunked = false } = {}) {
  return new Promise((resolve) => {
    let answered = false
    const headers = chunked ? {} : { 'Content-Length': body.length }
    const req = http.request(url, { method: 'POST', agent: false, headers }, (res) => {
      answered = true
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers }))
      res.on('error', (err) => resolve({ status: res.statusCode, error: err.code || err.message }))
    })
    req.on('error', (err) => { if (!answered) resolve({ error: err.code || err.message }) })
    if (chunked) {
      for (let at = 0; at < body.length; at += 256 * KiB) req.write(body.subarray(at, at + 256 * KiB))
      req.end()
    } else {
      req.end(body)
    }
  })
}

// `rounds` rounds of `concurrency` POSTs; resolves with every answer.
async function tries (url, body, { rounds, concurrency, chunked }) {
  const all = []
  for (let r = 0; r < rounds; r++) {
    all.push(...await Promise.all(Array.from({ length: concurrency },
      (_, i) => post(`${url}&r=${r}&i=${i}`, body, { chunked }))))
  }
  return all
}

const tally = (answers) => {
  const counts = {}
  for (const a of answers) {
    const key = a.error ? `error ${a.error}` : String(a.status)
    counts[key] = (counts[key] || 0) + 1
  }
  return counts
}

// `pool start` on the upload app, as a process of its own: with the client in the same process
// as the balancer, the client's loop always read the answer before the reset came, and the
// reset never showed.
async function startUploadPool (t, args) {
  const [port, statsPort, workerPort] = await freePorts(3)
  const pool = startPool(['start', path.join(FIXTURES, 'upload-app.js'), '-n', '1', '--port', String(port),
    '--stats-port', String(statsPort),
    '--worker-port', String(workerPort), '--log-format', 'json', '--access-log', 'false', ...args])
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started')
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    status: async () => JSON.parse((await request(`http://127.0.0.1:${statsPort}/status`)).body)
  }
}

// 16 MiB: still being sent when the answer comes (on main, 11 to 20 of 48 such tries got EPIPE
// and no answer, one at a time and 8 at a time).
const LARGE = Buffer.alloc(16 * MiB, 'x')

t.test('a body over --max-body: every client reads its 413, one at a time and 8 at a time', async (t) => {
  const pool = await startUploadPool(t, ['--max-body', String(MiB)])
  for (const [what, chunked] of [['announced', false], ['chunked', true]]) {
    for (const [rounds, concurrency] of [[24, 1], [3, 8]]) {
      const answers = await tries(`${pool.base}/?${what}=1`, LARGE, { rounds, concurrency, chunked })
      t.same(tally(answers), { 413: rounds * concurrency },
        `${what}, ${concurrency} at a time: ${rounds * concurrency} answers of 413`)
    }
  }
  t.equal((await pool.status()).front.bodyBytes, 0, 'no body held')
})

t.test('a body over --body-budget: every client reads its 503 and Retry-After, ' +
  'one at a time and 8 at a time', async (t) => {
  const pool = await startUploadPool(t, ['--max-body', String(16 * MiB), '--body-budget', String(16 * MiB)])
  // A stalled upload holds most of the budget: no large body has room on arrival.
  const stalled = net.connect(pool.port, '127.0.0.1')
  stalled.on('error', () => {})
  t.teardown(() => stalled.destroy())
  stalled.write(`POST /?stalled HTTP/1.1\r\nHost: x\r\nContent-Length: ${16 * MiB}\r\n\r\n` + 'h'.repeat(8 * MiB))
  await waitFor(async () => (await pool.status()).front.bodyBytes === 8 * MiB, { what: 'the stalled body held' })
  const answers = [
    ...await tries(`${pool.base}/?over=1`, LARGE, { rounds: 24, concurrency: 1 }),
    ...await tries(`${pool.base}/?over=1`, LARGE, { rounds: 3, concurrency: 8 })
  ]
  t.same(tally(answers), { 503: 48 }, '48 answers of 503')
  t.ok(answers.every((a) => a.headers['retry-after'] === '1'), 'each with Retry-After')
  t.equal((await pool.status()).front.bodyBytes, 8 * MiB, 'the refused bodies held nothing')
})

// Raw bytes on a socket; `closed` resolves with what came back and when the connection closed.
function raw (port, head) {
  const socket = net.connect(port, '127.0.0.1')
  const startedAt = performance.now()
  const closed = new Promise((resolve) => {
    let got = ''
    socket.setEncoding('latin1')
    socket.on('data', (d) => { got += d })
    socket.on('error', () => {})
    socket.on('close', () => resolve({ got, ms: performance.now() - startedAt }))
  })
  socket.write(head)
  return { socket, closed }
}

t.test('the lingering is bounded: a client that sends nothing more, or sends without end, is closed', async (t) => {
  const { balancer, seen } = await setup(t, 1, { maxBody: MiB })
  const port = Number(new URL(balancer.base).port)

  const silent = raw(port, `POST /echo?silent HTTP/1.1\r\nHost: x\r\nContent-Length: ${8 * MiB}\r\n\r\n`)
  const quiet = await silent.closed
  t.match(quiet.got, /^HTTP\/1\.1 413 [^]*\r\nConnection: close\r\n/i, 'answered at once')
  t.ok(quiet.ms >= LINGER_IDLE_MS / 2 && quiet.ms < LINGER_MS,
    `closed ${Math.round(quiet.ms)} ms later, after ${LINGER_IDLE_MS} ms without a byte`)

  // Sends for ever: the balancer drops at most --max-body (1 MiB here) of it, then reads no
  // more, and closes once the idle bound has passed.
  const dropped = []
  balancer.server.on('request', (req) => req.on('data', (d) => { dropped.push(d.length) }))
  const endless = raw(port, `POST /echo?endless HTTP/1.1\r\nHost: x\r\nContent-Length: ${1024 * MiB}\r\n\r\n`)
  let sent = 0
  const chunk = Buffer.alloc(64 * KiB, 'e')
  const more = () => {
    while (!endless.socket.destroyed && endless.socket.write(chunk)) sent += chunk.length
    if (!endless.socket.destroyed) endless.socket.once('drain', more)
  }
  more()
  const cut = await endless.closed
  const read = dropped.reduce((a, b) => a + b, 0)
  t.match(cut.got, /^HTTP\/1\.1 413 /, 'it got its answer')
  t.ok(read <= MiB + 64 * KiB, `the balancer read ${read} bytes of the ${sent} it was sent`)
  t.ok(cut.ms < LINGER_MS, `and closed the connection ${Math.round(cut.ms)} ms later`)
  t.same(seen(), [])
})

t.test('a request pipelined behind a refused body is never served', async (t) => {
  const { balancer, seen } = await setup(t, 1, { maxBody: 1000 })
  const port = Number(new URL(balancer.base).port)
  const body = 'b'.repeat(2000)
  const c = raw(port,
    'POST /echo?refused ' +
      `HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
      'GET /echo?pipelined HTTP/1.1\r\nHost: x\r\n\r\n')
  const { got } = await c.closed
  t.match(got, /^HTTP\/1\.1 413 /)
  t.equal(got.match(/HTTP\/1\.1 /g).length, 1, 'one answer: the 413')
  t.same(seen(), [], 'the worker saw neither')
  t.equal((await request(`${balancer.base}/echo?after`)).status, 200, 'the balancer serves on')
})
