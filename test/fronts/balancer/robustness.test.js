'use strict'

// What a misbehaving worker can do to the embedded balancer, each item once reproduced on a
// version that crashed or wedged: malformed responses (buffered and streamed), resets that
// bench every worker, --read-timeout handing a still-rendering worker the next request, a
// failed exchange releasing its worker before benching it, a POST replayed after its worker may
// have read it, a throw inside the balancer's own code. Workers are test/fixtures/raw-worker.js,
// which logs every request and whether it overlapped another in the same process.

const t = require('tap')
const net = require('node:net')
const { request, waitFor, tempDir, readJsonLines } = require('../../helpers')
const { setup, openRequest, RAW_WORKER } = require('../../helpers/balancer')

const raw = (text) => Buffer.from(text, 'latin1').toString('base64url')
const metricsOf = async (balancer) => (await request(`${balancer.statsBase}/metrics`)).body
const starts = (logFile, pathPrefix) =>
  readJsonLines(logFile).filter((l) => l.ev === 'start' && l.url.startsWith(pathPrefix))

// The balancer holds nothing: every worker free, the queue empty.
function settled (balancer) {
  const s = balancer.status()
  return s.queue === 0 && s.inFlight === 0
}

t.test('a header value or reason phrase with a control character: 502 for that request, ' +
  'the pool lives on', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  const bad = [
    'HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nhi',
    'HTTP/1.1 200 O\x07K\r\nContent-Length: 2\r\n\r\nhi',
    'HTTP/1.1 200 OK\r\nX-Bad: a\rb\r\nContent-Length: 2\r\n\r\nhi',
    'HTTP/1.1 200 OK\r\nX-Bad: a\x00b\r\nContent-Length: 2\r\n\r\nhi'
  ]
  for (const [i, bytes] of bad.entries()) {
    const r = await request(`${balancer.base}/raw?i=${i}&b=${raw(bytes)}`)
    t.equal(r.status, 502, `case ${i}: 502`)
    t.match(r.body, /malformed HTTP response/, `case ${i}: says the worker answered garbage`)
    t.notMatch(r.body, /closed the connection/, `case ${i}: not "the worker died"`)
  }
  t.equal(starts(logFile, '/raw').length, bad.length, 'each sent once: a worker that answered is not replayed')
  t.match(await metricsOf(balancer), new RegExp(`pool_failures_total\\{reason="bad_response"\\} ${bad.length}`))
  t.equal((await request(`${balancer.base}/ok`)).status, 200, 'the same worker serves the next request')
  t.ok(settled(balancer))
})

t.test('a malformed header on a response too large to buffer (the streamed path): 502, ' +
  'the pool lives on', async (t) => {
  const { balancer } = await setup(t, 1, { maxResponseBuffer: 64 * 1024 }, { script: RAW_WORKER })
  const r = await request(`${balancer.base}/big?kb=512&bad=1`)
  t.equal(r.status, 502)
  t.match(r.body, /malformed HTTP response/)
  const ok = await request(`${balancer.base}/big?kb=512`)
  t.equal(ok.status, 200)
  t.equal(ok.body.length, 512 * 1024, 'a good large response still streams whole')
  t.ok(settled(balancer))
})

t.test('the queue never waits while a worker could take its head: resets bench every worker, ' +
  'the next GET is still served', async (t) => {
  const { balancer, logFile } = await setup(t, 2, { queueTimeout: 5000 }, { script: RAW_WORKER })
  const reset = await request(`${balancer.base}/reset`)
  t.equal(reset.status, 502, 'the GET was replayed once, and reset again')
  t.equal(balancer.status().workers.filter((w) => w.state === 'benched').length, 2, 'both workers are benched')
  const r = await request(`${balancer.base}/ok?after-reset`)
  t.equal(r.status, 200, 'served once a bench ended, not 503 after --queue-timeout')
  t.equal(starts(logFile, '/ok?after-reset').length, 1)
  t.notOk(balancer.dispatcher.stuck(), 'invariant: nothing waits while a worker is free')
})

t.test('--read-timeout: the request ends with 504 and its connection closes; ' +
  'the worker gets no request until it says that one ended', async (t) => {
  const watched = []
  const context = { watchRequest: (w, id) => { watched.push({ w, id }); return true } }
  const { balancer, logFile } = await setup(t, 1, { readTimeout: 200 }, { script: RAW_WORKER, context })
  const slow = await request(`${balancer.base}/ok?ms=1200&slow`)
  t.equal(slow.status, 504)
  t.match(watched, [{ w: { slot: 1 }, id: readJsonLines(logFile)[0].exchange }],
    'the worker is asked to say when that request ends (its exchange)')
  t.equal(balancer.status().workers[0].state, 'busy', 'still held: its app may still be working on it')
  const next = openRequest(`${balancer.base}/ok?next`)
  await waitFor(() => balancer.status().queue === 1, { what: 'the next request queued' })
  await new Promise((resolve) => setTimeout(resolve, 1200)) // the old request's own end, in the worker
  t.equal(starts(logFile, '/ok?next').length, 0, 'not sent while the old one may still run')
  balancer.workerRequestEnded({ slot: 1, pid: watched[0].w.pid }, watched[0].id)
  t.equal((await next.response).status, 200, 'the next request is served once the worker said so')
  await waitFor(() => readJsonLines(logFile).filter((l) => l.ev === 'end').length === 2,
    { what: 'both logged as ended' })
  t.notOk(readJsonLines(logFile).some((l) => l.overlap), 'never two at once in one worker')
  t.ok(settled(balancer))
})

t.test('a failed exchange benches its worker before giving its place back: ' +
  'a queued POST never meets the dying worker', async (t) => {
  const { balancer, logFile } = await setup(t, 2, { balance: 'first' }, { script: RAW_WORKER })
  // Worker 1 renders; worker 2 takes /die: it closes its port and resets the connection, as a
  // worker does in the moment before its exit reaches the supervisor.
  const slow = openRequest(`${balancer.base}/ok?ms=400&slow`)
  await waitFor(() => starts(logFile, '/ok?ms=400').length === 1, { what: 'worker 1 busy' })
  const dying = openRequest(`${balancer.base}/die?ms=200`, { method: 'POST', body: 'x' })
  await waitFor(() => starts(logFile, '/die').length === 1, { what: 'worker 2 busy' })
  const queued = openRequest(`${balancer.base}/ok?queued`, { method: 'POST', body: 'charge once' })
  await waitFor(() => balancer.status().queue === 1, { what: 'the POST queued' })
  t.equal(starts(logFile, '/ok?queued').length, 0, 'queued before worker 2 failed')
  t.equal((await dying.response).status, 502)
  t.equal((await queued.response).status, 200, 'the queued POST is served')
  t.equal((await slow.response).status, 200)
  t.equal(starts(logFile, '/ok?queued').length, 1, 'by the live worker, once')
  t.notMatch(await metricsOf(balancer), /pool_failures_total\{reason="worker_refused"\} [1-9]/,
    'and never sent to the worker that had closed its port')
})

t.test('a POST whose worker reset after reading its head is not replayed, however large its body', async (t) => {
  // Larger than what the kernel buffers on loopback, so the write is still going on when the
  // worker resets: "not written yet" by the write callback, yet the worker has read the head.
  const { balancer, logFile } = await setup(t, 2, { maxBody: 64 * 1024 * 1024 }, { script: RAW_WORKER })
  const body = Buffer.alloc(48 * 1024 * 1024, 'p')
  const r = await request(`${balancer.base}/reset-after-head`, { method: 'POST', body })
  t.equal(r.status, 502)
  t.match(r.body, /never replayed/)
  t.equal(starts(logFile, '/reset-after-head').length, 1, 'the second worker never saw it')
  const get = await request(`${balancer.base}/reset-after-head?get`)
  t.equal(get.status, 502, 'a GET is replayed once, then 502')
  t.equal(starts(logFile, '/reset-after-head?get').length, 2, 'a GET may run twice')
})

t.test('a response with bytes after its end (a 204 with a body) cannot be read as the next response', async (t) => {
  const { balancer, logFile } = await setup(t, 1, {}, { script: RAW_WORKER })
  const smuggled = 'HTTP/1.1 204 No Content\r\nContent-Length: 38\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'
  const r = await request(`${balancer.base}/raw?b=${raw(smuggled)}`)
  t.equal(r.status, 204)
  t.equal(r.headers['content-length'], undefined, 'a 204 goes out without Content-Length')
  const next = await request(`${balancer.base}/ok?next`)
  t.equal(next.status, 200)
  t.equal(JSON.parse(next.body).url, '/ok?next', 'the next response is the worker\'s answer to the next request')
  t.equal(starts(logFile, '/ok?next').length, 1)
})

t.test('an unexpected throw in the balancer costs one request (500), is logged with its stack, ' +
  'and frees the worker', async (t) => {
  const { balancer } = await setup(t, 1, {}, { script: RAW_WORKER })
  const { pipeline } = balancer // the request pipeline (pipeline.js) answers the client
  const original = pipeline.writeHead // passes the head of the worker's answer on
  pipeline.writeHead = function () { this.writeHead = original; throw new Error('boom in the balancer') }
  const r = await request(`${balancer.base}/ok?first`)
  t.equal(r.status, 500)
  t.match(r.body, /internal error|failed while handling/)
  const line = balancer.logs.find((l) => l.event === 'balancer-internal-error')
  t.ok(line, 'logged')
  t.equal(line.level, 'error')
  t.match(line.err.stack, /boom in the balancer/, 'with the stack')
  t.equal((await request(`${balancer.base}/ok?second`)).status, 200, 'the next request is served')
  t.ok(settled(balancer))
  t.match(await metricsOf(balancer), /pool_failures_total\{reason="internal_error"\} 1/)
})

t.test('a worker that resets in the middle of a streamed response: the client sees it cut, ' +
  'the worker is freed', async (t) => {
  const { balancer } = await setup(t, 1, { maxResponseBuffer: 16 * 1024 }, { script: RAW_WORKER })
  const r = await new Promise((resolve) => {
    const socket = net.connect(Number(new URL(balancer.base).port), '127.0.0.1')
    let got = ''
    socket.setEncoding('latin1')
    socket.on('data', (d) => { got += d })
    socket.on('close', () => resolve(got))
    socket.write('GET /stall-body?kb=64&stall=300 HTTP/1.1\r\nHost: x\r\n\r\n')
  })
  t.match(r, /^HTTP\/1\.1 200/, 'the response had started')
  t.ok(r.length < 128 * 1024, 'and was cut short, not completed')
  t.ok(settled(balancer), 'the worker holds nothing')
  t.match(await metricsOf(balancer), /pool_failures_total\{reason="worker_broken_response"\} 1/)
})

t.test('a throw in the bookkeeping of a release cannot keep the worker\'s place', async (t) => {
  const { balancer } = await setup(t, 1, {}, { script: RAW_WORKER })
  const observe = balancer.metrics.workerBusy.observe
  balancer.metrics.workerBusy.observe = function () {
    balancer.metrics.workerBusy.observe = observe
    throw new Error('boom in the metrics')
  }
  const r = await request(`${balancer.base}/ok?first`)
  t.equal(r.status, 500, 'that request is the one that pays')
  t.equal((await request(`${balancer.base}/ok?second`)).status, 200,
    'the worker was given back: the next request is served, not queued')
  t.ok(settled(balancer))
})

t.test('a worker whose app goes on after its answer failed gets no request until it is idle', async (t) => {
  const fs = require('node:fs')
  const path = require('node:path')
  const pino = require('pino')
  const { Pool } = require('../../..')
  const { createBalancer } = require('../../../lib/fronts/balancer')
  const { FIXTURES, freePorts } = require('../../helpers')
  const dir = tempDir(t, 'pool-idle-')
  const appLog = path.join(dir, 'app.log')
  const [port, workerPort] = await freePorts(2)
  const front = createBalancer({ port, accessLog: false })
  const pool = new Pool({
    app: path.join(FIXTURES, 'fails-then-works.js'),
    workers: 1,
    workerPort,
    logger: pino({ level: 'silent' }),
    logLevel: 'silent',
    env: { APP_LOG: appLog },
    fronts: [front]
  })
  t.teardown(() => pool.kill())
  let queued = 0
  pool.on('queued', () => queued++)
  await pool.start()
  // POSTs, never replayed: one run of each failing request, whatever its bytes got to.
  for (const failing of ['/cut', '/drop']) {
    const first = request(`http://127.0.0.1:${port}${failing}`, { method: 'POST', body: 'x' })
      .catch((err) => ({ error: err.message }))
    await waitFor(() => fs.existsSync(appLog) && fs.readFileSync(appLog, 'utf8').includes(failing),
      { what: `${failing} running` })
    const next = await request(`http://127.0.0.1:${port}/ok`)
    t.equal(next.status, 200, `after ${failing}: the next request is served`)
    const failed = await first
    t.ok(failed.error || failed.status === 502, `${failing}: its client gets a 502 or a cut response`)
  }
  const read = () => readJsonLines(appLog)
  await waitFor(() => read().length === 8, { what: 'the last request logged as ended' })
  const lines = read()
  t.same(lines.map((l) => `${l.ev} ${l.url}`),
    ['start /cut', 'end /cut', 'start /ok', 'end /ok', 'start /drop', 'end /drop', 'start /ok', 'end /ok'],
    'one request at a time, the next only once the app was done')
  t.equal(queued, 0, 'no request reached the worker while it was busy')
})
