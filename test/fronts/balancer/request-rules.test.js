'use strict'

// What the embedded balancer's front refuses or rewrites before a request reaches a worker:
// two Host headers, WebSocket and other upgrades, CONNECT, Expect: 100-continue over --max-body,
// forwarding headers from untrusted peers (--trust-proxy), requests whose head is too large,
// and which requests may go out on a reused worker connection.

const t = require('tap')
const net = require('node:net')
const { request, waitFor, readJsonLines } = require('../../helpers')
const { setup, RAW_WORKER } = require('../../helpers/balancer')
const { createBalancer } = require('../../../lib/fronts/balancer')
const { MAX_HEADER_BYTES } = require('../../../lib/fronts/balancer/server')

// Raw bytes to the balancer; resolves with everything it sent back before closing (or after
// `settleMs` of silence, for answers that keep the connection open).
function exchange (base, bytes, { settleMs = 500, sendAfterFirstReply } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(base).port), '127.0.0.1')
    let got = ''
    let timer = null
    const done = () => { socket.destroy(); resolve(got) }
    socket.setEncoding('latin1')
    socket.on('data', (d) => {
      got += d
      if (sendAfterFirstReply) { socket.write(sendAfterFirstReply); sendAfterFirstReply = null }
      clearTimeout(timer)
      timer = setTimeout(done, settleMs)
    })
    socket.on('close', () => { clearTimeout(timer); resolve(got) })
    socket.on('error', () => {})
    socket.write(bytes)
    timer = setTimeout(done, settleMs * 4)
  })
}

const seenBy = (logFile) => readJsonLines(logFile).filter((l) => l.ev === 'start')

t.test('two Host headers: 400 from the front, nothing reaches a worker', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  const answer = await exchange(balancer.base, 'GET /ok HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n')
  t.match(answer, /^HTTP\/1\.1 400 /)
  t.match(answer, /more than one Host header/)
  t.equal(seenBy(logFile).length, 0)
})

t.test('a target in absolute form names the host (RFC 9112 §3.2.2): ' +
  'the worker gets the origin form and the target\'s authority as Host', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  const answer = await exchange(balancer.base, 'GET http://evil.example/x?y=1 HTTP/1.1\r\nHost: good.example\r\n\r\n')
  t.match(answer, /^HTTP\/1\.1 200 /)
  const got = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))
  t.equal(got.url, '/x?y=1', 'origin form')
  t.equal(got.headers.host, 'evil.example', 'the target wins over Host, as nginx passes it on (HAProxy refuses it)')
  for (const target of ['ftp://evil.example/', 'http:///nohost', 'http://user:pw@evil.example/']) {
    const refused = await exchange(balancer.base, `GET ${target} HTTP/1.1\r\nHost: good.example\r\n\r\n`)
    t.match(refused, /^HTTP\/1\.1 400 /, `${target}: 400`)
  }
  t.equal(seenBy(logFile).length, 1, 'none of those reached a worker')
})

// Probes where HTTP parsers disagree (request smuggling lives in such gaps), each decided: what
// the front answers, and that nothing of it reaches a worker.
t.test('parsing differentials, each decided: folded headers, a bare LF, TE other than chunked, HTTP/1.2, ' +
  'an empty Host', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  const probes = [
    ['obs-fold (RFC 9112 §5.2 allows the 400)', 'GET /ok HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n', 400],
    ['a line ended by a bare LF', 'GET /ok HTTP/1.1\nHost: a\n\n', 400],
    ['Transfer-Encoding: identity, chunked (501, as nginx)',
      'POST /ok HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', 501],
    ['Transfer-Encoding: gzip, chunked',
      'POST /ok HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', 501],
    ['HTTP/1.2 (no client sends it; Node\'s parser refuses it)', 'GET /ok HTTP/1.2\r\nHost: a\r\n\r\n', 400],
    ['an empty Host (RFC 9112 §3.2: 400)', 'GET /ok HTTP/1.1\r\nHost:\r\n\r\n', 400],
    ['a Host with a path in it', 'GET /ok HTTP/1.1\r\nHost: a/b\r\n\r\n', 400]
  ]
  for (const [name, bytes, status] of probes) {
    const answer = await exchange(balancer.base, bytes)
    t.match(answer, new RegExp(`^HTTP/1\\.1 ${status} `), `${name}: ${status}`)
  }
  t.equal(seenBy(logFile).length, 0, 'none reached a worker')
  const chunked = await exchange(balancer.base,
    'POST /ok HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n')
  t.match(chunked, /^HTTP\/1\.1 200 /, 'chunked itself, in any case, is served')
  t.equal(JSON.parse(chunked.slice(chunked.indexOf('\r\n\r\n') + 4)).bodyLength, 3, 'its body re-framed for the worker')
})

t.test('a WebSocket handshake goes to a worker, whose answer other than 101 is passed on; a malformed one is 400; ' +
  'Upgrade: h2c is served as HTTP/1.1', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  const handshake = 'Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ' +
    'dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'
  const ws = await exchange(balancer.base, `GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n${handshake}`)
  t.match(ws, /^HTTP\/1\.1 200 /, 'a worker that speaks no WebSocket answers as it would any GET')
  t.match(ws, /Connection: close/i, 'and the connection closes after it')
  t.equal(seenBy(logFile).length, 1, 'the worker saw the handshake')
  for (const [name, head] of [['a POST',
    'POST /chat HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: Upgrade\r\n'],
  ['no Connection: upgrade', 'GET /chat HTTP/1.1\r\nHost: x\r\n']]) {
    const bad = await exchange(balancer.base, head + handshake)
    t.match(bad, /^HTTP\/1\.1 400 /, `${name}: 400`)
    t.match(bad, /a WebSocket handshake is a GET with Connection: upgrade/)
  }
  t.equal(seenBy(logFile).length, 1, 'no worker saw those')
  const h2c = await exchange(balancer.base,
    'GET /ok?h2c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: ' +
      'AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n')
  t.match(h2c, /^HTTP\/1\.1 200 /, 'answered over HTTP/1.1')
  const got = JSON.parse(h2c.slice(h2c.indexOf('\r\n\r\n') + 4))
  t.equal(got.headers.upgrade, undefined, 'the worker sees no Upgrade header')
  t.equal(got.headers['http2-settings'], undefined, 'nor what Connection listed')
})

t.test('CONNECT gets 501 at once instead of a silent close', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  const answer = await exchange(balancer.base, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')
  t.match(answer, /^HTTP\/1\.1 501 Not Implemented/)
  t.match(answer, /not a forward proxy/)
  t.equal(seenBy(logFile).length, 0)
})

t.test('CONNECT then a reset: no uncaught error (this test process hosts the balancer), ' +
  'the next request is served', async (t) => {
  const { balancer } = await setup(t, 1, {}, { script: RAW_WORKER })
  for (let i = 0; i < 5; i++) {
    await new Promise((resolve) => {
      const socket = net.connect(Number(new URL(balancer.base).port), '127.0.0.1')
      socket.on('error', () => {})
      socket.on('close', resolve)
      // Reset at once, and after the answer has started: both were uncaught ECONNRESETs.
      socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', () => {
        if (i % 2 === 0) socket.resetAndDestroy()
      })
      socket.once('data', () => socket.resetAndDestroy())
    })
  }
  await waitFor(() => balancer.connectSockets.size === 0, { what: 'the refused sockets to be closed' })
  t.equal((await request(`${balancer.base}/ok`)).status, 200)
})

t.test('a CONNECT client that keeps its side open is cut after its answer, ' +
  'and cannot keep a stop waiting', async (t) => {
  const { balancer } = await setup(t, 1, {}, { script: RAW_WORKER })
  const socket = net.connect(Number(new URL(balancer.base).port), '127.0.0.1')
  let got = ''
  socket.setEncoding('latin1')
  socket.on('data', (d) => { got += d })
  socket.on('error', () => {})
  const closed = new Promise((resolve) => socket.on('close', resolve))
  socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n') // and never ends
  await closed
  t.match(got, /^HTTP\/1\.1 501 /, 'answered, then closed by the balancer')
  let stopped = false
  balancer.stop().then(() => { stopped = true })
  await waitFor(() => stopped, { timeout: 5000, what: 'the stop to finish' })
  t.ok(stopped)
})

t.test('Expect: 100-continue: 413 without an invitation when the length is over --max-body; ' +
  '100 then 200 otherwise', async (t) => {
  const { balancer, logFile } = await setup(t, 1, { maxBody: 1000 }, { script: RAW_WORKER })
  const big = await exchange(balancer.base,
    'POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n')
  t.notMatch(big, /100 Continue/, 'the client is not invited to send what will be refused')
  t.match(big, /^HTTP\/1\.1 413 /)
  const small = await exchange(balancer.base,
    'POST /ok?small HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n',
    { sendAfterFirstReply: 'hello' })
  t.match(small, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)
  t.equal(JSON.parse(small.slice(small.lastIndexOf('\r\n\r\n') + 4)).bodyLength, 5)
  t.same(seenBy(logFile).map((l) => l.url), ['/ok?small'])
})

t.test('--trust-proxy: forwarding headers are believed only from the listed peers', async (t) => {
  const spoof = {
    'X-Forwarded-For': '6.6.6.6',
    'X-Forwarded-Proto': 'https',
    Forwarded: 'for=6.6.6.6',
    'X-Real-IP': '6.6.6.6'
  }
  const headersSeen = async (options) => {
    const { balancer } = await setup(t, 1, options, { script: RAW_WORKER })
    return JSON.parse((await request(`${balancer.base}/ok`, { headers: spoof })).body).headers
  }
  const trusted = await headersSeen({}) // the default trusts loopback: this client
  t.equal(trusted['x-forwarded-for'], '6.6.6.6, 127.0.0.1', 'a trusted proxy\'s chain is kept, the peer appended')
  t.equal(trusted['x-forwarded-proto'], 'https')
  t.equal(trusted.forwarded, 'for=6.6.6.6')
  for (const trustProxy of ['none', '10.0.0.0/8, 192.168.1.1']) {
    const untrusted = await headersSeen({ trustProxy })
    t.equal(untrusted['x-forwarded-for'], '127.0.0.1', `${trustProxy}: the peer's address only`)
    t.equal(untrusted['x-forwarded-proto'], 'http', `${trustProxy}: what the front saw`)
    t.equal(untrusted.forwarded, undefined, `${trustProxy}: Forwarded dropped`)
    t.equal(untrusted['x-real-ip'], undefined, `${trustProxy}: X-Real-IP dropped`)
  }
  t.throws(() => createBalancer({ trustProxy: '10.0.0.0/99' }),
    { code: 'POOL_E_BAD_OPTION', message: /trustProxy \(--trust-proxy\).*bad prefix length/ })
  t.throws(() => createBalancer({ trustProxy: 'localhost' }),
    { code: 'POOL_E_BAD_OPTION', message: /'localhost' is not an IP address/ })
})

t.test('a request head over the front\'s limit gets 431 from the front, not from a worker', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  const filler = (n) => 'X-Filler: ' + 'f'.repeat(n) + '\r\n'
  const over = await exchange(balancer.base, `GET /ok?over HTTP/1.1\r\nHost: x\r\n${filler(MAX_HEADER_BYTES)}\r\n`)
  t.match(over, /^HTTP\/1\.1 431 /)
  t.equal(seenBy(logFile).length, 0)
})

t.test('only GET and HEAD go out on a reused worker connection; anything else opens its own', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  for (const method of ['GET', 'GET', 'POST', 'GET', 'PUT', 'DELETE', 'HEAD']) {
    const r = await request(`${balancer.base}/ok?${method}`,
      { method, body: method === 'POST' || method === 'PUT' ? 'b' : undefined })
    t.equal(r.status, 200, method)
  }
  const used = new Set()
  for (const { method, conn } of seenBy(logFile)) {
    if (method !== 'GET' && method !== 'HEAD') t.notOk(used.has(conn), `${method} on a connection of its own`)
    used.add(conn)
  }
  const [first, second] = seenBy(logFile)
  t.equal(second.conn, first.conn, 'a GET reuses the connection of the GET before it')
})

t.test('a head just under the front\'s limit reaches a real worker of the pool: ' +
  'only the front ever answers 431', async (t) => {
  const path = require('node:path')
  const pino = require('pino')
  const { Pool } = require('../../..')
  const { FIXTURES, freePorts } = require('../../helpers')
  const [port, workerPort] = await freePorts(2)
  const front = createBalancer({ port })
  const pool = new Pool({
    app: path.join(FIXTURES, 'handler.js'),
    workers: 1,
    workerPort,
    logger: pino({ level: 'silent' }),
    fronts: [front]
  })
  t.teardown(() => pool.kill())
  await pool.start()
  // What the front adds (X-Forwarded-*, X-Request-Id, Connection) pushes this past Node's
  // default 16 KiB at the worker.
  const filler = 'f'.repeat(MAX_HEADER_BYTES - 200)
  const r = await request(`http://127.0.0.1:${port}/`, { headers: { 'X-Filler': filler } })
  t.equal(r.status, 200, 'served by the worker')
  t.equal(JSON.parse(r.body).form, 'handler')
})
