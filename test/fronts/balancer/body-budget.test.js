'use strict'

// Bounded memory in the embedded balancer (issue 17, item 3): request bodies are read whole
// before a worker is taken, so their total is bounded (--body-budget): a body holds the bytes it
// has sent, never the length it announces; one that would pass the budget gets 503 with
// Retry-After (before a byte of it is read when its announced length has no room), the bytes
// held come back to 0, and the memory of a burst is given back. The queue is bounded by
// default (--max-queue).

const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const http = require('node:http')
const path = require('node:path')
const { request, waitFor, sleep, freePorts, startPool, runPool, FIXTURES } = require('../../helpers')
const { setup, openRequest } = require('../../helpers/balancer')
const { createBalancer } = require('../../../lib/fronts/balancer')
const { defaultBodyBudget, availableMemory } = require('../../../lib/fronts/balancer/body-budget')
const { Reclaimer } = require('../../../lib/fronts/balancer/reclaim')

const MiB = 1024 * 1024
const APP = path.join(FIXTURES, 'upload-app.js')

// Raw bytes (a request's head, alone or with some of its body) on a socket kept open, and
// `closed`: all the balancer sent once it closed the connection (a request that asks for
// Connection: close, or one refused before its body was all read). Node aborts the requests of
// a client that half-closes, so the socket is not ended.
function rawConnection (base, head) {
  const socket = net.connect(Number(new URL(base).port), '127.0.0.1')
  const closed = new Promise((resolve, reject) => {
    let got = ''
    socket.setEncoding('latin1')
    socket.on('data', (d) => { got += d })
    socket.on('error', reject)
    socket.on('close', () => resolve(got))
    socket.setTimeout(10000, () => socket.destroy())
  })
  socket.write(head)
  return { socket, closed }
}

const headOnly = (base, head) => rawConnection(base, head).closed

// A POST of `body`; resolves with the answer (status, headers, parsed JSON) even when the
// balancer answers and closes while the body is still being sent, or with { status: code }
// when the connection broke before any answer.
function post (url, body, { headers = {} } = {}) {
  return new Promise((resolve) => {
    let answered = false
    const options = { method: 'POST', agent: false, headers: { 'Content-Length': body.length, ...headers } }
    const req = http.request(url, options, (res) => {
      answered = true
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { text += d })
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }))
      res.on('error', () => resolve({ status: res.statusCode, headers: res.headers, text }))
    })
    req.on('error', (err) => { if (!answered) resolve({ status: err.code }) })
    req.end(body)
  })
}

// The supervisor's resident memory and its peak so far, in bytes (/proc/PID/status).
function memoryOf (pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)[1]) * 1024
  return { rss: kb('VmRSS'), peak: kb('VmHWM') }
}

const json = async (url) => JSON.parse((await request(url)).body)
const metric = (text, name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)[1])

t.test('options: a finite queue and a body budget by default; a budget below --max-body is refused', async (t) => {
  const o = createBalancer({}).options
  t.equal(o.maxQueue, 1024, 'the queue is bounded by default')
  t.equal(o.bodyBudget, Math.max(10 * MiB, Math.min(256 * MiB, Math.floor(availableMemory() / 16))),
    '1/16 of RAM, at most 256 MiB')
  t.ok(availableMemory() <= os.totalmem(), 'RAM: the machine\'s, or a container\'s limit')
  t.equal(defaultBodyBudget(10 * MiB, 64 * MiB), 10 * MiB, 'never below one body of --max-body')
  t.equal(defaultBodyBudget(MiB, 64 * 1024 * MiB), 256 * MiB, 'capped')
  t.equal(createBalancer({ maxBody: MiB, bodyBudget: 0 }).options.bodyBudget, 0, '0: no limit')
  t.throws(() => createBalancer({ maxBody: 2 * MiB, bodyBudget: MiB }),
    { code: 'POOL_E_BAD_OPTION', message: /bodyBudget \(--body-budget\) must be at least maxBody/ })
  const [port] = await freePorts(1)
  const cli = await runPool(['start', APP, '-n', '1', '--port', String(port), '--body-budget', '1000'])
  t.equal(cli.code, 2, 'the CLI refuses it before anything starts')
  t.match(cli.stderr, /--body-budget\) must be at least maxBody/)
  t.equal(cli.stderr.trim().split('\n').length, 1, 'in one line')
})

t.test('a burst of large POSTs behind busy workers: bodies past the budget get 503, ' +
  'memory stays bounded and comes back', async (t) => {
  const BODY = 4 * MiB
  const BUDGET = 16 * MiB // four bodies
  const BURST = 64 // 256 MiB of bodies
  const [port, statsPort, workerPort] = await freePorts(4)
  const pool = startPool(['start', APP, '-n', '2', '--port', String(port), '--worker-port', String(workerPort),
    '--stats-port', String(statsPort),
    '--log-format', 'json', '--access-log', 'false', '--queue-timeout', '60', '--max-body', String(BODY),
    '--body-budget', String(BUDGET)])
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started')
  const base = `http://127.0.0.1:${port}`
  const stats = `http://127.0.0.1:${statsPort}`
  const external = async () => metric((await request(`${stats}/metrics`)).body,
    'pool_supervisor_nodejs_external_memory_bytes')
  const before = { rss: memoryOf(pool.pid).rss, external: await external() }

  // Both workers render for a while (Atomics.wait), so every POST must wait for one.
  const renders = [request(`${base}/?ms=6000&r=1`, { timeout: 30000 }),
    request(`${base}/?ms=6000&r=2`, { timeout: 30000 })]
  await waitFor(async () => (await json(`${stats}/status`)).front.inFlight === 2, { what: 'both workers busy' })

  const body = Buffer.alloc(BODY, 'b')
  const answers = Promise.all(Array.from({ length: BURST }, (_, i) => post(`${base}/?burst=${i}`, body)))
  await waitFor(async () => (await json(`${stats}/status`)).front.bodyBytes === BUDGET, { what: 'the budget full' })

  // While it is full, a request that announces a body is answered at once, its body unsent.
  const refused = await headOnly(base, `POST /?unsent HTTP/1.1\r\nHost: x\r\nContent-Length: ${BODY}\r\n\r\n`)
  t.match(refused, /^HTTP\/1\.1 503 /, 'a body past the budget: 503 before a byte of it was sent')
  t.match(refused, /\r\nRetry-After: 1\r\n/i)
  t.match(refused, /\r\nConnection: close\r\n/i, 'and the connection closes: its body is never read')
  t.match(refused, /--body-budget/)
  const small = await headOnly(base, 'GET /?ms=0&nobody HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  t.match(small, /^HTTP\/1\.1 200 /, 'a request without a body is not held back by the budget')

  const got = await answers
  const statuses = got.map((a) => a.status)
  t.equal(statuses.filter((s) => s === 200).length, BUDGET / BODY, 'the bodies that fit were queued, then served')
  for (const a of got.filter((a) => a.status === 200)) t.equal(JSON.parse(a.text).bytes, BODY, 'whole')
  const turnedAway = got.filter((a) => a.status !== 200)
  t.equal(turnedAway.length, BURST - BUDGET / BODY)
  const answered503 = turnedAway.filter((a) => a.status === 503)
  t.ok(answered503.length >= turnedAway.length * 0.9,
    `the others got 503 (${answered503.length} of ${turnedAway.length}; the rest saw the closed connection first)`)
  for (const a of answered503) t.equal(a.headers['retry-after'], '1', 'with Retry-After')
  await Promise.all(renders)

  // Bounded by the budget, not by the burst: what the peak holds besides the budget is mostly
  // the bytes of bodies refused part-way, garbage until V8's next collection, which it starts by
  // itself once some 64 MiB of memory outside its heap has been allocated since the last one.
  // Without a budget the peak grows by every body of the burst.
  const peak = memoryOf(pool.pid).peak
  t.ok(peak - before.rss < BUDGET + 128 * MiB,
    `peak RSS grew by ${Math.round((peak - before.rss) / MiB)} MiB for ${BURST * BODY / MiB} MiB of bodies ` +
      `(budget ${BUDGET / MiB} MiB)`)

  const status = await json(`${stats}/status`)
  t.equal(status.front.bodyBytes, 0, 'no body is held once the burst is over')
  t.equal(status.front.queue, 0)
  const metrics = (await request(`${stats}/metrics`)).body
  t.equal(metric(metrics, 'pool_request_body_bytes'), 0)
  t.equal(metric(metrics, 'pool_request_body_budget_bytes'), BUDGET)
  t.equal(metric(metrics, 'pool_failures_total\\{reason="body_budget"\\}'), BURST - BUDGET / BODY + 1)

  // The bodies' memory is given back once the burst is over, not kept until the next one: their
  // Buffers are collected (the supervisor's external memory is back where it was), and RSS
  // comes down by at least half of what the budget held.
  await waitFor(async () => (await external()) < before.external + 4 * MiB,
    { timeout: 8000, what: 'the bodies\' Buffers collected' })
  await waitFor(() => memoryOf(pool.pid).rss < peak - BUDGET / 2,
    { timeout: 8000, what: `RSS down from its peak of ${Math.round(peak / MiB)} MiB` })
  t.pass(`RSS ${Math.round(memoryOf(pool.pid).rss / MiB)} MiB after the burst, ` +
    `${Math.round(before.rss / MiB)} MiB before, ${Math.round(peak / MiB)} MiB at its peak`)
})

t.test('a chunked body stops at the budget; Expect: 100-continue is not invited past it', async (t) => {
  const { balancer, seen } = await setup(t, 1, { maxBody: 64 * 1024, bodyBudget: 64 * 1024 })
  const hold = request(`${balancer.base}/sleep?ms=3000&hold`, { timeout: 20000 })
  await waitFor(() => balancer.status().inFlight === 1)
  // A queued body of 48 KiB holds most of the budget.
  const queued = request(`${balancer.base}/echo?queued`,
    { method: 'POST', body: Buffer.alloc(48 * 1024, 'q'), timeout: 20000 })
  await waitFor(() => balancer.status().queue === 1 && balancer.status().bodyBytes === 48 * 1024)

  const chunked = await new Promise((resolve) => {
    let answered = false
    const req = http.request(`${balancer.base}/echo?chunked`, { method: 'POST', agent: false }, (res) => {
      answered = true
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers }))
    })
    req.on('error', (err) => { if (!answered) resolve({ status: err.code }) })
    let sent = 0
    const more = () => { // 8 KiB at a time until the answer comes, 40 KiB at most
      if (answered || sent >= 40 * 1024) return req.end()
      sent += 8 * 1024
      req.write(Buffer.alloc(8 * 1024, 'c'), () => setTimeout(more, 20))
    }
    more()
  })
  t.equal(chunked.status, 503, 'a chunked body that outgrows the budget: 503')
  t.equal(chunked.headers['retry-after'], '1')
  t.equal(chunked.headers.connection, 'close')
  t.equal(balancer.status().bodyBytes, 48 * 1024, 'what it had been given is given back')

  const unasked = await headOnly(balancer.base,
    'POST /echo?continue HTTP/1.1\r\nHost: x\r\nContent-Length: 32768\r\nExpect: 100-continue\r\n\r\n')
  t.notMatch(unasked, /100 Continue/, 'a body that would not fit is not invited')
  t.match(unasked, /^HTTP\/1\.1 503 /)
  const fits = await headOnly(balancer.base,
    'POST /echo?fits HTTP/1.1\r\nHost: x\r\nContent-Length: 16384\r\nExpect: 100-continue\r\nConnection: ' +
      'close\r\n\r\n' + 'f'.repeat(16384))
  t.match(fits, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /, 'one that fits is invited, queued and served')

  t.equal((await queued).status, 200)
  await hold
  t.same(seen().map((r) => r.url).sort(), ['/echo?fits', '/echo?queued', '/sleep?ms=3000&hold'],
    'no worker saw a refused body')
  t.equal(balancer.status().bodyBytes, 0)
})

t.test('clients that announce bodies and send nothing hold nothing: a small POST is still served', async (t) => {
  const { balancer } = await setup(t, 1, { maxBody: MiB, bodyBudget: 2 * MiB })
  let announced = 0
  balancer.server.on('request', (req) => { if (req.url.startsWith('/echo?idle')) announced++ })
  // Twice the budget announced, not a byte of it sent.
  const idle = Array.from({ length: 4 },
    (_, i) => rawConnection(balancer.base,
      `POST /echo?idle=${i} HTTP/1.1\r\nHost: x\r\nContent-Length: ${MiB}\r\nConnection: close\r\n\r\n`))
  t.teardown(() => { for (const c of idle) c.socket.destroy() })
  await waitFor(() => announced === idle.length, { what: 'every announced body arrived' })
  t.equal(balancer.status().bodyBytes, 0, 'an announced body holds nothing until its bytes come')

  const small = await request(`${balancer.base}/echo?small`, { method: 'POST', body: 'hello' })
  t.equal(small.status, 200, 'a small POST is served')
  t.match(small.body, /"bodyLength":5\b/)

  // A stalled upload holds what it sent, and one that goes on is served.
  idle[0].socket.write(Buffer.alloc(256 * 1024, 'a'))
  await waitFor(() => balancer.status().bodyBytes === 256 * 1024, { what: 'what was sent held' })
  idle[1].socket.write(Buffer.alloc(MiB, 'b'))
  const whole = await idle[1].closed
  t.match(whole, /^HTTP\/1\.1 200 /, 'a body sent whole beside stalled ones is served')
  t.match(whole, /"bodyLength":1048576/)
  t.equal(balancer.status().bodyBytes, 256 * 1024, 'its hold given back; the stalled one keeps what it sent')
  for (const c of idle) c.socket.destroy()
  await waitFor(() => balancer.status().bodyBytes === 0, { what: 'the stalled bodies given back' })
})

t.test('a body is refused at arrival when the budget has no room for it, ' +
  'and mid-upload when it would pass it', async (t) => {
  const { balancer, seen } = await setup(t, 1, { maxBody: MiB, bodyBudget: MiB })
  const KiB = 1024
  const a = rawConnection(balancer.base,
    `POST /echo?a HTTP/1.1\r\nHost: x\r\nContent-Length: ${MiB}\r\n\r\n` + 'a'.repeat(512 * KiB))
  await waitFor(() => balancer.status().bodyBytes === 512 * KiB, { what: 'half of a held' })
  const b = rawConnection(balancer.base,
    `POST /echo?b HTTP/1.1\r\nHost: x\r\nContent-Length: ${512 * KiB}\r\nConnection: close\r\n\r\n` +
      'b'.repeat(256 * KiB))
  await waitFor(() => balancer.status().bodyBytes === 768 * KiB, { what: 'half of b held' })

  const noRoom = await headOnly(balancer.base,
    `POST /echo?c HTTP/1.1\r\nHost: x\r\nContent-Length: ${512 * KiB}\r\n\r\n`)
  t.match(noRoom, /^HTTP\/1\.1 503 [^]*\r\nRetry-After: 1\r\n[^]*--body-budget/i,
    'more than the room left: 503 at arrival, unread')

  a.socket.write('a'.repeat(384 * KiB)) // 512 + 256 + 384 KiB: past the budget
  const refused = await a.closed
  t.match(refused, /^HTTP\/1\.1 503 /, 'the body that would pass the budget mid-upload: 503')
  t.match(refused, /\r\nRetry-After: 1\r\n/i)
  t.match(refused, /\r\nConnection: close\r\n/i, 'and its connection closed')
  await waitFor(() => balancer.status().bodyBytes === 256 * KiB, { what: 'what it had sent given back' })

  b.socket.write('b'.repeat(256 * KiB))
  t.match(await b.closed, /^HTTP\/1\.1 200 [^]*"bodyLength":524288/, 'the other body, whole, is served')
  t.equal(balancer.status().bodyBytes, 0)
  t.same(seen().map((r) => r.url), ['/echo?b'], 'no worker saw a refused body')
})

t.test('bodies held by clients that leave (while sending, while queued) are given back', async (t) => {
  const { balancer } = await setup(t, 1, { maxBody: MiB, bodyBudget: MiB })
  const hold = request(`${balancer.base}/sleep?ms=2000&hold`, { timeout: 20000 })
  await waitFor(() => balancer.status().inFlight === 1)
  // Announces 512 KiB, sends half of it, leaves.
  const sending = net.connect(Number(new URL(balancer.base).port), '127.0.0.1')
  sending.on('error', () => {})
  sending.write(`POST /echo?half HTTP/1.1\r\nHost: x\r\nContent-Length: ${512 * 1024}\r\n\r\n` + 'h'.repeat(256 * 1024))
  // A whole 256 KiB body, queued behind the busy worker, whose client then leaves.
  const queued = openRequest(`${balancer.base}/echo?queued`,
    { method: 'POST', headers: { 'Content-Length': 256 * 1024 }, body: Buffer.alloc(256 * 1024, 'w') })
  await waitFor(() => balancer.status().bodyBytes === 512 * 1024 && balancer.status().queue === 1,
    { what: 'what both sent held' })
  sending.destroy()
  queued.req.destroy()
  await waitFor(() => balancer.status().bodyBytes === 0 && balancer.status().queue === 0,
    { what: 'the budget given back' })
  t.equal((await hold).status, 200)
  t.equal(balancer.status().bodyBytes, 0)
})

t.test('the default --max-queue is enforced: the 1025th waiting request gets 503 at once', async (t) => {
  const { balancer } = await setup(t, 1) // the defaults
  const limit = balancer.options.maxQueue
  const hold = request(`${balancer.base}/sleep?ms=60000&hold`, { timeout: 90000 })
  hold.catch(() => {})
  await waitFor(() => balancer.status().inFlight === 1)
  const waiting = []
  t.teardown(() => { for (const w of waiting) w.req.destroy() })
  for (let i = 0; i < limit; i++) waiting.push(openRequest(`${balancer.base}/sleep?q=${i}`))
  await waitFor(() => balancer.status().queue === limit, { timeout: 30000, what: `${limit} requests queued` })
  const over = await request(`${balancer.base}/sleep?over`)
  t.equal(over.status, 503, 'the queue is full')
  t.equal(over.headers['retry-after'], '1')
  t.match(over.body, /max-queue/)
  const body = await headOnly(balancer.base, 'POST /echo?body HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n')
  t.match(body, /^HTTP\/1\.1 503 [^]*max-queue/, 'a body that could not be queued is refused before it is read')
  t.equal(balancer.status().bodyBytes, 0, 'and holds nothing')
  for (const w of waiting) w.req.destroy()
  await waitFor(() => balancer.status().queue === 0,
    { timeout: 30000, what: 'the queue emptied by the clients leaving' })
})

t.test('the reclaimer: one full collection per burst, once no body has been held for quietMs; ' +
  'never under steady traffic', async (t) => {
  let emptySince = null // a burst is on
  let garbage = 200
  let collections = 0
  const r = new Reclaimer({
    emptySince: () => emptySince,
    garbage: () => garbage,
    collect: () => { collections++; garbage = 0 },
    minBytes: 100,
    quietMs: 60
  })
  t.teardown(() => r.stop())
  r.onRelease(150)
  t.equal(r.timer, null, 'bodies are still held: nothing scheduled')

  // Steady traffic: a body held for 15 ms, then 5 ms with none, for 400 ms. Never quiet for
  // 60 ms, so never collected, even though nothing is held at some moments.
  for (let i = 0; i < 20; i++) {
    emptySince = null
    await sleep(15)
    emptySince = performance.now()
    r.onRelease(50)
    await sleep(5)
  }
  t.equal(collections, 0, 'no collection during steady traffic')
  await waitFor(() => collections === 1, { what: 'one collection once quiet' })
  const at = performance.now()
  t.ok(at - emptySince >= 60, 'after quietMs with nothing held')

  garbage = 200
  r.onRelease(50)
  await sleep(150) // past quietMs: no second collection may come
  t.equal(collections, 1, 'too little let go since: once per burst')
  r.onRelease(60) // a new burst's worth, in a new quiet moment
  await waitFor(() => collections === 2, { what: 'the next burst\'s collection' })
  garbage = 10 // V8 collected on its own meanwhile
  emptySince = performance.now()
  r.onRelease(200)
  await waitFor(() => r.timer === null)
  t.equal(collections, 2, 'nothing left to reclaim: no collection')
})

t.test('the library never changes V8\'s flags; without globalThis.gc the reclaimer does nothing', async (t) => {
  const v8 = require('node:v8')
  const setFlags = v8.setFlagsFromString
  const flags = []
  v8.setFlagsFromString = (flag) => { flags.push(flag); return setFlags.call(v8, flag) }
  t.teardown(() => { v8.setFlagsFromString = setFlags })
  t.equal(typeof globalThis.gc, 'undefined', 'this test process has no gc')
  const balancer = createBalancer({})
  t.same(flags, [], 'a balancer set no V8 flag')
  t.equal(balancer.reclaimer.collect, null, 'and has no collection to run')
  balancer.reclaimer.onRelease(1024 * MiB)
  t.equal(balancer.reclaimer.timer, null, 'so it schedules none')
})
