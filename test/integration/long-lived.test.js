'use strict'
// Long-lived responses under the pool (issue 37), on the embedded balancer: a worker is
// hung when its event loop stops, never because a request lasts; streams hold no render place,
// so a thousand of them on two workers are all served and a render beside them still is; a
// client's hang-up reaches the app; a limit ends one request, not its worker; a reload with
// streams open ends within --graceful-timeout. test/fixtures/long-lived.js is the app.
// On main, streams were cut at --timeout with their worker SIGKILLed, 32 at most were served at
// once on two workers, and a hang-up never reached the app. Behind HAProxy and nginx:
// long-lived-haproxy.test.js.
const t = require('tap')
const path = require('node:path')
const { FIXTURES, freePorts, request, runPool, waitFor, sleep } = require('../helpers')
const { startAppPool } = require('../helpers/app-pool')
const { manyStreams, tally, appClosedAt, hangUpDelays, killed } = require('../helpers/streams')

const APP = path.join(FIXTURES, 'long-lived.js')
const SSE = { accept: 'text/event-stream' }

// The app under `pool start` on the embedded balancer, its control socket the default one.
const embeddedPool = (t, args = [], options = {}) => startAppPool(t, APP, { ...options, args, control: false })

t.test('the embedded balancer: 1,000 streams three times --timeout long on two workers, all served; ' +
  'a render beside them', async (t) => {
  const { child: pool, url } = await embeddedPool(t, ['--timeout', '1s'])
  // As EventSource sends them (Accept: text/event-stream): an undeclared stream whose head comes
  // with its first event, 100 ms in, holds a render place until then, as a page awaiting data.
  const streams = manyStreams(1000, (i) => `${url}/stream?ms=3000&every=100&id=s${i}`, { headers: SSE })
  await waitFor(async () => (await request(`${url}/`)).status === 200, { what: 'the pool answering' })
  await waitFor(() => streams.answered === 1000, { what: 'the 1,000 streams under way' })
  const began = performance.now()
  const render = await request(`${url}/render?ms=50`, { timeout: 10000 })
  const renderMs = performance.now() - began
  t.equal(render.status, 200, `a render beside 1,000 open streams, answered in ${Math.round(renderMs)} ms`)
  t.ok(renderMs < 2500, 'it did not wait for the streams to end')
  t.same(tally(await streams), { 200: 1000, done: 1000, cut: 0 }, 'every stream complete: none cut, none 503')
  t.same(killed(pool), [], 'no worker killed')
})

t.test('the embedded balancer: 1,000 streams opened at 1,000 a second go to the workers at once, ' +
  'none turned away', async (t) => {
  // Declared long-lived (they accept text/event-stream, or --stream-routes names them), they take
  // no render place: none waits for a worker's word that its loop is free. On main (words only),
  // 451 of 1,000 were turned away 503 by overload control after waiting in the queue.
  const { child: pool, url } = await embeddedPool(t, ['--stream-routes', '/wait'])
  const opened = manyStreams(1000, (i) => `${url}/stream?ms=2000&every=100&id=r${i}`, { headers: SSE, perSecond: 1000 })
  const routed = manyStreams(200, (i) => `${url}/wait?ms=2000&id=w${i}`, { perSecond: 1000 })
  const [streams, waits] = await Promise.all([opened, routed])
  t.same(tally(streams), { 200: 1000, done: 1000, cut: 0 }, 'every event stream complete: none cut, none 503')
  t.same(waits.map((r) => r.status).filter((s) => s !== 200), [], 'every request of a --stream-routes route answered')
  const queued = pool.logs.filter((l) => l.event === 'request' && l.queueMs > 0)
  t.same(queued.map((l) => l.url), [], 'none waited in the queue')
  t.same(killed(pool), [], 'no worker killed')
})

t.test('the embedded balancer: a hang-up reaches the app; a limit ends its request alone', async (t) => {
  const { child: pool, url } = await embeddedPool(t, ['--read-timeout', '1s', '--max-request-time', '4s'])
  const delays = await hangUpDelays(pool, url, 10)
  t.ok(Math.max(...delays) < 100,
    `the app saw each of 10 hang-ups within ${Math.max(...delays)} ms (${delays.join(', ')})`)
  const before = pool.logs.filter((l) => l.event === 'spawn').length

  const began = performance.now()
  const silentHead = await request(`${url}/wait?ms=3000&id=wait-1`, { timeout: 10000 })
  const ms = performance.now() - began
  t.equal(silentHead.status, 504, 'no head within --read-timeout: 504')
  t.ok(ms >= 1000 && ms < 2500, `after ${Math.round(ms)} ms`)
  await waitFor(() => appClosedAt(pool.logs, 'wait-1') !== undefined, { what: 'the app to see its response close' })

  const silent = await manyStreams(1, () => `${url}/silent?ms=3000&id=silent-1`)
  t.same(tally(silent), { 200: 1, done: 0, cut: 1 }, 'a stream silent past --read-timeout is cut')
  await waitFor(() => appClosedAt(pool.logs, 'silent-1') !== undefined, { what: 'the app to see it close' })

  const long = await manyStreams(1, () => `${url}/stream?ms=6000&every=100&id=long-1`)
  t.same(tally(long), { 200: 1, done: 0, cut: 1 }, 'a stream past --max-request-time is cut, however much it sends')
  t.equal(pool.logs.filter((l) => l.event === 'spawn').length, before, 'no worker replaced: each limit cut one request')
})

t.test('the embedded balancer: a reload with 50 streams open ends within --graceful-timeout; ' +
  'each stream ends as it would, or at it', async (t) => {
  const { child: pool, url, port } = await embeddedPool(t, ['--graceful-timeout', '8s', '--timeout', '1s'])
  const short = manyStreams(25, (i) => `${url}/stream?ms=2500&every=100&id=short${i}`)
  const long = manyStreams(25, (i) => `${url}/stream?ms=60000&every=100&id=long${i}`)
  await waitFor(() => short.answered + long.answered === 50, { what: 'the 50 streams under way' })
  const began = performance.now()
  const reload = await runPool(['reload', '--port', String(port)], { timeout: 30000 })
  const reloadMs = performance.now() - began
  t.equal(reload.code, 0, reload.stdout.trim() || reload.stderr.trim())
  t.ok(reloadMs < 8000,
    `the reload took ${Math.round(reloadMs)} ms: within --graceful-timeout, not the streams' length`)
  t.same(tally(await short), { 200: 25, done: 25, cut: 0 }, 'the streams shorter than --graceful-timeout complete')
  const cutAt = performance.now() - began
  t.same(tally(await long), { 200: 25, done: 0, cut: 25 }, 'the longer ones are ended at it')
  t.ok(performance.now() - began < 16000,
    `ended ${Math.round(performance.now() - began)} ms after the reload began (short ones ${Math.round(cutAt)})`)
  t.equal(pool.logs.filter((l) => l.event === 'retiring').length, 2,
    'both old workers retired, finishing their streams off their ports')
  t.same((await request(`${url}/`)).status, 200, 'the new workers serve')
})

t.test('the embedded balancer at its descriptor limit: clients wait or are refused, ' +
  'no worker is blamed for the balancer\'s own EMFILE', async (t) => {
  const { spawnSync } = require('node:child_process')
  if (spawnSync('prlimit', ['--version']).status !== 0) return t.skip('prlimit (util-linux) is missing')
  const [statsPort] = await freePorts(1)
  const { child: pool, url } = await embeddedPool(t, ['--stats-port', String(statsPort)])
  // 200 descriptors for the supervisor: 150 streams need 300 (a client's and a worker's each).
  const limited = spawnSync('prlimit', ['--pid', String(pool.pid), '--nofile=200:200'])
  t.equal(limited.status, 0, `prlimit: ${limited.stderr}`)
  const streams = manyStreams(150, (i) => `${url}/stream?ms=3000&every=200&id=fd${i}`, { timeout: 20000 })
  const pages = Promise.all(Array.from({ length: 20 },
    () => request(`${url}/`, { timeout: 20000 }).then((r) => r.status, (err) => err.code ?? err.message)))
  const results = await streams
  const served = results.filter((r) => r.done).length
  t.comment(JSON.stringify(tally(results)))
  t.ok(served > 0, `${served} of 150 streams served whole; the rest refused at the door or answered 503`)
  t.same(results.filter((r) => r.status === 502), [], 'none answered 502: no worker was blamed')
  await pages
  const metrics = (await request(`http://127.0.0.1:${statsPort}/metrics`)).body
  t.notMatch(metrics, /pool_failures_total\{reason="worker_refused"\} [1-9]/,
    'no connection counted as a worker refusing')
  t.same(pool.logs.filter((l) => l.event === 'balancer-redispatch' && /refused it/.test(l.msg)), [],
    'no worker benched for refusing')
  spawnSync('prlimit', ['--pid', String(pool.pid), '--nofile=20000:20000'])
  const after = await Promise.all([1, 2, 3, 4].map(() => request(`${url}/`)))
  t.same(after.map((r) => r.status), [200, 200, 200, 200], 'the pool serves as before once descriptors are free')
})

t.test('the embedded balancer: clients that read nothing fill the response budget; the others keep their pace, ' +
  'no worker is killed', async (t) => {
  const net = require('node:net')
  const { child: pool, url, port } = await embeddedPool(t, ['--response-budget', '16m', '--timeout', '2s'])
  // Pages of 500 KB fetched one after the other for 2 s: how many.
  const pages = async (ms) => {
    let n = 0
    const until = performance.now() + ms
    while (performance.now() < until) {
      const r = await request(`${url}/big?kb=500`, { timeout: 10000 })
      if (r.status === 200 && r.body.length === 500 * 1024) n++
    }
    return n
  }
  const alone = await pages(2000)
  // Eight clients each ask for 8 MB and read none of it: together more than the budget.
  const stalled = Array.from({ length: 8 }, (_, i) => {
    const socket = net.connect(port, '127.0.0.1',
      () => socket.write(`GET /big?kb=8192&stalled=${i} HTTP/1.1\r\nHost: x\r\n\r\n`))
    socket.pause()
    socket.on('error', () => {})
    return socket
  })
  t.teardown(() => { for (const s of stalled) s.destroy() })
  await sleep(1500) // the stalled answers fill every buffer on their way
  const beside = await pages(2000)
  t.ok(beside >= alone / 2, `${beside} pages of 500 KB in 2 s beside them, ${alone} alone: they kept their pace`)
  t.same(killed(pool), [], 'no worker killed: a worker held by a client that does not read is not hung')
  t.ok(stalled.every((s) => !s.destroyed), 'the stalled clients are still connected (--send-timeout cuts them, 60 s)')
})
