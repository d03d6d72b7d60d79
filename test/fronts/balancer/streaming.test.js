'use strict'

// Streamed responses through the embedded balancer (issue 24): write-through with read-ahead.
// A page's shell reaches the client while its late part does not exist yet, framed as the
// worker framed it; the worker is free once its response ends, whatever its client's pace,
// within --max-response-buffer, and the bytes held for all clients stay within
// --response-budget (past it the workers wait); --send-timeout cuts a client that takes
// nothing; X-Accel-Buffering asks for no read-ahead or for store-and-forward, and is not passed
// on; 103 Early Hints reach the client before the response. The stand-in worker
// (test/fixtures/balancer-worker.js) writes a late part only when the test releases it.

const t = require('tap')
const net = require('node:net')
const http = require('node:http')
const { request, waitFor, sleep, readJsonLines } = require('../../helpers')
const { setup, release } = require('../../helpers/balancer')
const { READ_BYTES } = require('../../../lib/fronts/balancer/response-budget')

const KiB = 1024
const MiB = 1024 * KiB

// A GET on a raw socket: what arrives, and when. `read: false`: the client reads nothing (the
// kernel's buffers fill, then TCP stops the sender; nor does it see the connection close) until
// readNow().
function rawGet (port, path, { version = '1.1', read = true } = {}) {
  const socket = net.connect(port, '127.0.0.1')
  const client = { socket, text: '', bytes: 0, firstByteAt: null, sentAt: 0 }
  client.closed = new Promise((resolve) => {
    socket.on('error', () => {})
    socket.on('close', resolve)
  })
  const take = (d) => {
    if (client.firstByteAt === null) client.firstByteAt = performance.now()
    client.bytes += d.length
    client.text += d.toString('latin1')
  }
  if (read) socket.on('data', take)
  else socket.pause()
  client.readNow = () => { socket.on('data', take); socket.resume() }
  client.sentAt = performance.now()
  socket.write(`GET ${path} HTTP/${version}\r\nHost: x\r\n${version === '1.1' ? 'Connection: close\r\n' : ''}\r\n`)
  client.when = (what, fn) => waitFor(() => fn(client.text), { timeout: 5000, what })
  return client
}

const port = (balancer) => Number(new URL(balancer.base).port)
const headOf = (text) => text.slice(0, text.indexOf('\r\n\r\n'))
const metricsOf = async (balancer) => (await request(`${balancer.statsBase}/metrics`)).body
const logged = (logFile, ev) => readJsonLines(logFile).filter((l) => l.ev === ev)

t.test('a streamed page: the shell reaches the client before its late part exists, ' +
  'framed as the worker framed it', async (t) => {
  const { balancer, workers } = await setup(t, 1)
  for (const [framing, cl] of [['chunked', ''], ['Content-Length', '&cl=1']]) {
    const name = `late-${framing}`
    const client = rawGet(port(balancer), `/stream?late=${name}&shellBytes=4000${cl}`)
    await client.when('the shell', (text) => text.includes('<shell>' + 's'.repeat(4000)))
    const releasedAt = performance.now()
    t.notMatch(client.text, /<late>/, `${framing}: the shell came while the late part was not written yet`)
    t.ok(client.firstByteAt < releasedAt,
      `${framing}: first byte ${Math.round(client.firstByteAt - client.sentAt)} ms after the request, ` +
        'before the late part was produced')
    if (cl) t.match(headOf(client.text), /\r\nContent-Length: 5037\b/i, 'the worker\'s Content-Length is kept')
    else t.match(headOf(client.text), /\r\nTransfer-Encoding: chunked\b/i, 'a chunked page stays chunked')
    release(workers[0], name)
    await client.closed
    t.ok(client.text.indexOf('<shell>') < client.text.indexOf('<late>'), `${framing}: shell, then late part`)
    t.match(client.text, /<late>l{1024}/, `${framing}: the late part, whole`)
  }
  t.equal(balancer.status().inFlight, 0)
  t.equal(balancer.status().responseBytes, 0, 'nothing is held once it is sent')
})

t.test('the worker is free once its streamed response ends, while its client still reads (read-ahead)', async (t) => {
  const { balancer, logFile } = await setup(t, 1)
  // 2 MiB in 32 writes, 5 ms apart; the client reads none of it for now.
  let res
  const req = http.get(`${balancer.base}/pieces?kb=2048&n=32&gap=5`, { agent: false }, (r) => { res = r; r.pause() })
  t.teardown(() => req.destroy())
  await waitFor(() => logged(logFile, 'finished').length === 1, { what: 'the worker to send its last byte' })
  await waitFor(() => balancer.status().inFlight === 0, { what: 'the worker freed' })
  t.equal((await request(`${balancer.base}/sleep?next`)).status, 200,
    'and serving the next client while the first has read nothing')
  let received = 0
  res.on('data', (c) => { received += c.length })
  res.resume()
  await new Promise((resolve) => res.on('end', resolve))
  t.equal(received, 2 * MiB, 'the client got all of it')
  await waitFor(() => balancer.status().responseBytes === 0, { what: 'nothing held once taken' })
})

t.test('a client reading 500 KB at 100 KB/s: its worker is free long before it has read the page', async (t) => {
  const { balancer, logFile } = await setup(t, 1)
  const client = rawGet(port(balancer), '/pieces?kb=500&n=10&gap=10')
  t.teardown(() => client.socket.destroy())
  // 5 KB more allowed every 50 ms; the socket pauses whenever it is ahead.
  let read = 0
  let allowed = 5000
  client.socket.on('data', (d) => {
    read += d.length
    if (read >= allowed) client.socket.pause()
  })
  const tick = setInterval(() => {
    allowed += 5000
    if (read < allowed) client.socket.resume()
  }, 50)
  t.teardown(() => clearInterval(tick))
  await waitFor(() => logged(logFile, 'finished').length === 1 && balancer.status().inFlight === 0,
    { what: 'the worker freed' })
  t.ok(read < 250 * 1000, `the worker was free when the client had read ${read} of 512000 bytes`)
  allowed = Infinity // the rest at full speed
  client.socket.resume()
  await client.closed
  const body = client.text.slice(headOf(client.text).length)
  t.equal(body.split('p').length - 1, 500 * KiB, 'the client got all of it')
})

t.test('the response budget: clients that read nothing hold at most the budget, and their workers wait', async (t) => {
  const BUDGET = MiB
  const { balancer } = await setup(t, 3, { responseBudget: BUDGET, maxResponseBuffer: 4 * MiB, sendTimeout: 0 })
  let peak = 0
  const budget = balancer.responseBudget
  const take = budget.take
  budget.take = function (bytes) { take.call(this, bytes); peak = Math.max(peak, this.held) }
  // 16 MiB each: more than the sockets on loopback take from a client that reads nothing.
  const clients = Array.from({ length: 3 }, (_, i) => rawGet(port(balancer), `/big?kb=16384&c=${i}`, { read: false }))
  t.teardown(() => { for (const c of clients) c.socket.destroy() })
  await waitFor(() => budget.waiting.size === 3, { what: 'every relay waiting for room in the budget' })
  await sleep(300) // time for the peak to pass the budget, were it to
  t.ok(peak <= BUDGET + 3 * READ_BYTES,
    `peak held ${peak} bytes: within the budget (${BUDGET}) and one read per response`)
  t.equal(balancer.status().responseBudget, BUDGET)
  t.equal(balancer.status().inFlight, 3, 'the workers wait for their clients rather than the balancer holding more')
  t.match(await metricsOf(balancer), new RegExp(`pool_response_budget_bytes ${BUDGET}\\b`))
  for (const c of clients) c.socket.destroy()
  await waitFor(() => balancer.status().inFlight === 0 && balancer.status().responseBytes === 0,
    { what: 'the clients gone: workers read to their end and freed, bytes given back' })
  t.equal((await request(`${balancer.base}/sleep?after`)).status, 200)
})

t.test('--send-timeout: a client that takes nothing of a response read whole is cut off, ' +
  'and what it held is given back', async (t) => {
  const { balancer } = await setup(t, 1, { maxResponseBuffer: 64 * MiB, sendTimeout: 800 })
  const client = rawGet(port(balancer), '/big?kb=24576', { read: false })
  t.teardown(() => client.socket.destroy())
  await waitFor(() => balancer.status().inFlight === 1, { what: 'the response under way' })
  await waitFor(() => balancer.status().inFlight === 0, { what: 'the worker done, the rest held for the client' })
  await waitFor(async () => /pool_failures_total\{reason="client_send_timeout"\} 1/.test(await metricsOf(balancer)),
    { timeout: 5000, what: 'the client cut off for --send-timeout' })
  await waitFor(() => balancer.status().responseBytes === 0, { what: 'what it held given back' })
  client.readNow()
  await client.closed
  t.ok(client.bytes < 24 * MiB, `it got ${client.bytes} bytes, not the whole response`)
})

t.test('--send-timeout never cuts a client whose worker is slow to send the next part', async (t) => {
  const { balancer } = await setup(t, 1, { sendTimeout: 300 })
  const client = rawGet(port(balancer), '/stream?gap=1000')
  await client.closed
  t.match(client.text, /<shell>s{1024}[^]*<late>l{1024}/, 'the whole page, across a pause three times --send-timeout')
  t.notMatch(await metricsOf(balancer), /client_send_timeout"\} [1-9]/)
})

t.test('X-Accel-Buffering: no: no read-ahead, the worker waits for its client', async (t) => {
  const { balancer, logFile } = await setup(t, 1, { maxResponseBuffer: 64 * MiB })
  // 32 MiB, well within --max-response-buffer, but more than the kernel's buffers on loopback
  // hold between a worker and a client that reads nothing.
  const client = rawGet(port(balancer), '/pieces?kb=32768&n=256&xab=no', { read: false })
  t.teardown(() => client.socket.destroy())
  await waitFor(() => balancer.status().inFlight === 1, { what: 'the response under way' })
  await sleep(600) // time for the worker to send it all, were nothing holding it back
  t.equal(logged(logFile, 'finished').length, 0, 'the worker has not sent it all')
  t.equal(balancer.status().inFlight, 1, 'and is held by the client that does not read')
  t.ok(balancer.status().responseBytes <= READ_BYTES + 64 * KiB,
    `the balancer holds no more than a read and the socket's share (${balancer.status().responseBytes} bytes)`)
  client.readNow()
  await client.closed
  t.notMatch(headOf(client.text), /X-Accel-Buffering/i, 'the header is the balancer\'s, not the client\'s')
  t.ok(client.bytes > 32 * MiB, 'the client got it all')
  t.equal(balancer.status().inFlight, 0)
})

t.test('X-Accel-Buffering: yes: stored whole, sent with its length; ' +
  'a worker that fails midway gets a 502', async (t) => {
  const { balancer, workers, logFile } = await setup(t, 1)
  const client = rawGet(port(balancer), '/stream?late=stored&xab=yes')
  await waitFor(() => logged(logFile, 'shell').length === 1, { what: 'the worker to write its shell' })
  await sleep(200) // time for the shell to go out, were it to
  t.equal(client.bytes, 0, 'nothing goes out before the whole response is there')
  release(workers[0], 'stored')
  await client.closed
  const head = headOf(client.text)
  t.match(head, /^HTTP\/1\.1 200 /)
  t.match(head, /\r\nContent-Length: 2061\r\n/i, 'with its length')
  t.notMatch(head, /X-Accel-Buffering|Transfer-Encoding/i)
  const failed = await request(`${balancer.base}/stream?xab=yes&fail=1&gap=50`)
  t.equal(failed.status, 502, 'a response stored whole is never sent cut short')
})

t.test('103 Early Hints reach the client before the response, and never an HTTP/1.0 client', async (t) => {
  const { balancer, workers } = await setup(t, 1)
  const client = rawGet(port(balancer), '/stream?hint=1&late=hinted')
  await client.when('the shell', (text) => text.includes('<shell>'))
  t.match(client.text,
    /^HTTP\/1\.1 103 Early Hints\r\nLink: <\/app\.css>; rel=preload; as=style\r\n\r\nHTTP\/1\.1 200 /,
    'the hints first, then the response')
  release(workers[0], 'hinted')
  await client.closed
  const old = rawGet(port(balancer), '/stream?hint=1&gap=0', { version: '1.0' })
  await old.closed
  t.match(old.text, /^HTTP\/1\.1 200 /, 'an HTTP/1.0 client gets the response alone')
  t.notMatch(old.text, /103/)
})

t.test('a page cut short by its worker after the shell: the client sees it cut, never complete', async (t) => {
  const { balancer, workers } = await setup(t, 1)
  const client = rawGet(port(balancer), '/stream?late=cut&fail=1&cl=1')
  await client.when('the shell', (text) => text.includes('<shell>'))
  release(workers[0], 'cut')
  await client.closed
  t.match(client.text, /^HTTP\/1\.1 200 /)
  t.notMatch(client.text, /<late>/)
  t.match(await metricsOf(balancer), /pool_failures_total\{reason="worker_broken_response"\} 1/)
  await waitFor(() => balancer.status().inFlight === 0 && balancer.status().responseBytes === 0,
    { what: 'nothing held' })
})

t.test('X-Accel-Buffering: yes meets a full response budget: ' +
  'written through rather than waiting for ever', async (t) => {
  const { balancer } = await setup(t, 2, { responseBudget: MiB, maxResponseBuffer: 8 * MiB })
  // Two responses to be stored whole, each larger than the budget: neither could ever be.
  const answers = await Promise.all([1, 2].map((i) => request(`${balancer.base}/pieces?kb=2048&n=32&xab=yes&i=${i}`,
    { timeout: 10000 })))
  t.same(answers.map((a) => [a.status, a.body.length]), [[200, 2 * MiB], [200, 2 * MiB]], 'both whole')
  await waitFor(() => balancer.status().inFlight === 0 && balancer.status().responseBytes === 0,
    { what: 'nothing held' })
})
