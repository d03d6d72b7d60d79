'use strict'
// Long-lived responses under the pool (issue 37), through each way of running it: a worker is
// hung when its event loop stops, never because a request lasts; streams hold no render place,
// so a thousand of them on two workers are all served and a render beside them still is; a
// client's hang-up reaches the app; a limit ends one request, not its worker; a reload with
// streams open ends within --graceful-timeout. test/fixtures/long-lived.js is the app.
// On main, streams were cut at --timeout with their worker SIGKILLed, 32 at most were served at
// once on two workers, and a hang-up never reached the app.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { nginxConfig } = require('../../lib/generate/nginx')
const { FIXTURES, freePorts, request, startPool, runPool, waitFor, sleep } = require('../helpers')
const { startNginx, NGINX_WORKER_USER } = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool, allUp } = require('../helpers/haproxy-pool')
const { manyStreams, tally, hangUpAfterFirstBytes, appClosedAt } = require('../helpers/streams')

const APP = path.join(FIXTURES, 'long-lived.js')
const SSE = { accept: 'text/event-stream' }

async function embeddedPool (t, args = [], workers = 2) {
  const [port, workerPort] = await freePorts(workers + 1)
  const pool = startPool(['start', APP, '-n', String(workers), '--port', String(port), '--worker-port', String(workerPort), '--log-format', 'json', ...args])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started', 20000)
  return { pool, url: `http://127.0.0.1:${port}`, workerUrl: `http://127.0.0.1:${workerPort}`, port }
}

const killed = (pool) => pool.logs.filter((l) => l.event === 'hung' || (l.event === 'exit' && l.reason !== 'stop' && l.reason !== 'reload'))

// Hang up `n` streams one after the other; each delay from the hang-up to the app's close, ms.
async function hangUpDelays (t, pool, url, n, { headers = {}, route = '/stream?ms=20000&every=1000' } = {}) {
  const delays = []
  for (let i = 0; i < n; i++) {
    const id = `gone-${process.pid}-${i}-${Math.random()}`
    const at = await hangUpAfterFirstBytes(`${url}${route}&id=${id}`, { headers })
    await waitFor(() => appClosedAt(pool.logs, id) !== undefined, { timeout: 5000, what: `the app to see hang-up ${i + 1}` })
    delays.push(appClosedAt(pool.logs, id) - at)
  }
  return delays
}

t.test('the embedded balancer: 1,000 streams three times --timeout long on two workers, all served; a render beside them', async (t) => {
  const { pool, url } = await embeddedPool(t, ['--timeout', '1s'])
  const streams = manyStreams(1000, (i) => `${url}/stream?ms=3000&every=100&id=s${i}`)
  await waitFor(async () => (await request(`${url}/`)).status === 200, { what: 'the pool answering' })
  await sleep(500) // the streams under way
  const began = performance.now()
  const render = await request(`${url}/render?ms=50`, { timeout: 10000 })
  const renderMs = performance.now() - began
  t.equal(render.status, 200, `a render beside 1,000 open streams, answered in ${Math.round(renderMs)} ms`)
  t.ok(renderMs < 2500, 'it did not wait for the streams to end')
  t.same(tally(await streams), { 200: 1000, done: 1000, cut: 0 }, 'every stream complete: none cut, none 503')
  t.same(killed(pool), [], 'no worker killed')
})

t.test('the embedded balancer: a hang-up reaches the app; a limit ends its request alone', async (t) => {
  const { pool, url } = await embeddedPool(t, ['--read-timeout', '1s', '--max-request-time', '4s'])
  const delays = await hangUpDelays(t, pool, url, 10)
  t.ok(Math.max(...delays) < 100, `the app saw each of 10 hang-ups within ${Math.max(...delays)} ms (${delays.join(', ')})`)
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

t.test('the embedded balancer: a reload with 50 streams open ends within --graceful-timeout; each stream ends as it would, or at it', async (t) => {
  const { pool, url, port } = await embeddedPool(t, ['--graceful-timeout', '8s', '--timeout', '1s'])
  const short = manyStreams(25, (i) => `${url}/stream?ms=2500&every=100&id=short${i}`)
  const long = manyStreams(25, (i) => `${url}/stream?ms=60000&every=100&id=long${i}`)
  await sleep(500)
  const began = performance.now()
  const reload = await runPool(['reload', '--port', String(port)], { timeout: 30000 })
  const reloadMs = performance.now() - began
  t.equal(reload.code, 0, reload.stdout.trim() || reload.stderr.trim())
  t.ok(reloadMs < 8000, `the reload took ${Math.round(reloadMs)} ms: within --graceful-timeout, not the streams' length`)
  t.same(tally(await short), { 200: 25, done: 25, cut: 0 }, 'the streams shorter than --graceful-timeout complete')
  const cutAt = performance.now() - began
  t.same(tally(await long), { 200: 25, done: 0, cut: 25 }, 'the longer ones are ended at it')
  t.ok(performance.now() - began < 16000, `ended ${Math.round(performance.now() - began)} ms after the reload began (short ones ${Math.round(cutAt)})`)
  t.equal(pool.logs.filter((l) => l.event === 'retiring').length, 2, 'both old workers retired, finishing their streams off their ports')
  t.same((await request(`${url}/`)).status, 200, 'the new workers serve')
})

t.test('--balancer haproxy: streams go to the streams backend, 300 of them three times --timeout long on two workers; a hang-up reaches the app; renders beside them', async (t) => {
  const lab = await startLabHaproxy(t, { workers: 2, nginxUser: NGINX_WORKER_USER, options: { streamRoutes: '/wait', readTimeout: 2000 } })
  const pool = await startHaproxyPool(t, lab, { app: APP, args: ['--timeout', '1s', '--read-timeout', '2s'] })
  await waitFor(allUp(lab.client), { timeout: 10000, what: 'both servers UP' })
  const streams = manyStreams(300, (i) => `${lab.url}/stream?ms=3000&every=100&id=h${i}`, { headers: SSE })
  await sleep(500)
  const renders = await Promise.all([1, 2, 3, 4].map(() => request(`${lab.url}/render?ms=50`, { timeout: 10000 })))
  t.same(renders.map((r) => r.status), [200, 200, 200, 200], 'renders beside them: each worker\'s render slot is free')
  t.same(tally(await streams), { 200: 300, done: 300, cut: 0 }, 'every stream complete: none cut, none 503')
  t.same(killed(pool), [], 'no worker killed')
  const delays = await hangUpDelays(t, pool, lab.url, 5, { headers: SSE })
  t.ok(Math.max(...delays) < 100, `the app saw each hang-up within ${Math.max(...delays)} ms (${delays.join(', ')}), a token a second`)
  // The worker enforces --read-timeout behind HAProxy: a long wait on a stream route ends alone.
  const waited = await request(`${lab.url}/wait?ms=5000&id=hw`, { timeout: 10000 })
  t.equal(waited.status, 504, 'a wait past --read-timeout: the worker\'s 504, through HAProxy')
  await waitFor(() => appClosedAt(pool.logs, 'hw') !== undefined, { what: 'the app to see it close' })

  // nginx in front: the same streams, and a hang-up through both.
  const prefix = path.join(lab.dir, 'nginx')
  fs.mkdirSync(prefix)
  const [nginxPort] = await freePorts(1)
  const cfg = nginxConfig({ prefix, host: '127.0.0.1', port: nginxPort, haproxySocket: path.join(lab.dir, 'haproxy-http.sock') })
  await startNginx({ cfg, prefix, port: nginxPort, t })
  const front = `http://127.0.0.1:${nginxPort}`
  t.same(tally(await manyStreams(100, (i) => `${front}/stream?ms=2000&every=100&id=n${i}`, { headers: SSE })), { 200: 100, done: 100, cut: 0 }, 'nginx → HAProxy → pool: 100 streams complete')
  const through = await hangUpDelays(t, pool, front, 5, { headers: SSE })
  t.ok(Math.max(...through) < 100, `nginx → HAProxy: each hang-up within ${Math.max(...through)} ms (${through.join(', ')})`)
})
