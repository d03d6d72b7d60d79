'use strict'
// examples/websocket (ws on Express 5) and examples/socketio-chat (Socket.IO, the Redis adapter
// with REDIS_URL), unchanged under `pool start -n 2`: the balancer tunnels each WebSocket to a
// worker, and sends each Socket.IO session's long-polling requests to the worker holding it.
// Before it did (on main before the tunnel commit), every handshake got 501: no ws client
// opened, and Socket.IO clients stayed on long-polling, their requests reaching a worker that
// did not know their session ("Session ID unknown"). Each test stops what it started: the pool
// (and checks it left nothing), its redis-server, its browser.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const WebSocket = require('ws')
const { io } = require('socket.io-client')
const { ROOT, freePort, waitFor, request, cleanEnv } = require('../helpers')
const { startAppPool, stopLeavingNothing } = require('../helpers/app-pool')
const { startNginx, NGINX_WORKER_USER } = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool } = require('../helpers/haproxy-pool')
const { nginxConfig } = require('../../lib/generate/nginx')
const { startRedis, redisMissing, canConnect } = require('../helpers/websockets')

const WS_APP = path.join(ROOT, 'examples', 'websocket', 'server.js')
const CHAT_APP = path.join(ROOT, 'examples', 'socketio-chat', 'server.js')
const CHROMIUM = '/usr/bin/chromium'
const CLIENTS = 20

t.test('examples/websocket under pool start -n 2: 20 clients open, echo and get pushes', async (t) => {
  const p = await startAppPool(t, WS_APP)
  const page = await request(`${p.url}/`)
  t.equal(page.status, 200, 'GET / serves the page')
  t.match(page.body, /new WebSocket\(/, 'the page opens a websocket')
  t.match(JSON.parse((await request(`${p.url}/whoami`)).body), { pid: Number, slot: /^[12]$/ },
    '/whoami names its worker')

  const clients = await Promise.all(Array.from({ length: CLIENTS },
    () => wsClient(`${p.url.replace('http', 'ws')}/ws`)))
  t.teardown(() => clients.forEach((c) => c.ws.terminate()))
  t.same(clients.map((c) => c.error), Array(CLIENTS).fill(null), 'every handshake succeeded')
  t.equal(new Set(clients.map((c) => c.hello?.pid)).size, 2, 'the clients are spread over both workers')
  clients.forEach((c, i) => c.ws.send(`m${i}`))
  const done = () => clients.every((c, i) => c.echoes.includes(`m${i}`) && c.pushes > 0)
  await waitFor(done, { timeout: 5000, what: 'every echo and a push at each client' }).catch(() => {})
  t.same(clients.map((c, i) => ({ echoes: c.echoes, pushed: c.pushes > 0, closed: c.closed })),
    clients.map((c, i) => ({ echoes: [`m${i}`], pushed: true, closed: null })),
    'each client got its echo and pushes, and is open')

  clients.forEach((c) => c.ws.close(1000))
  await waitFor(() => clients.every((c) => c.closed !== null), { timeout: 5000, what: 'the clients to close' })
  t.same(new Set(clients.map((c) => c.closed)), new Set([1000]), 'each closed cleanly, both ways')
  await stopLeavingNothing(t, p)
})

t.test('examples/socketio-chat under pool start -n 2 with Redis: ' +
  '20 clients each get every message', { skip: redisMissing() }, async (t) => {
  const { url: redisUrl } = await startRedis(t)
  const p = await startAppPool(t, CHAT_APP, { env: { REDIS_URL: redisUrl }, args: ['--access-log'] })
  const clients = Array.from({ length: CLIENTS }, () => io(p.url, { forceNew: true, reconnection: false }))
  t.teardown(() => clients.forEach((c) => c.close()))
  const state = clients.map(() => ({ welcome: null, texts: [], errors: [] }))
  clients.forEach((c, i) => {
    c.on('welcome', (w) => { state[i].welcome = w })
    c.on('chat', (m) => state[i].texts.push(m.text))
    c.on('connect_error', (err) => state[i].errors.push(`connect_error: ${err.message}`))
    c.on('disconnect', (why) => { if (why !== 'io client disconnect') state[i].errors.push(`disconnect: ${why}`) })
  })
  const upgraded = () => clients.every((c, i) => c.connected && c.io.engine.transport.name === 'websocket' &&
    state[i].welcome)
  await waitFor(upgraded, { timeout: 20000, what: 'every client connected and upgraded to a websocket' })
  t.equal(new Set(state.map((s) => s.welcome.pid)).size, 2, 'the clients are spread over both workers')

  const acks = await Promise.all(clients.map((c, i) => c.timeout(10000).emitWithAck('chat', `hello from ${i}`)))
  t.ok(acks.every((a) => a.ok), 'every message accepted')
  const all = Array.from({ length: CLIENTS }, (_, i) => `hello from ${i}`)
  await waitFor(() => state.every((s) => s.texts.length >= CLIENTS),
    { timeout: 10000, what: 'every message at every client' }).catch(() => {})
  t.same(state.map((s) => [...s.texts].sort()), Array(CLIENTS).fill([...all].sort()),
    'each of 20 clients got all 20 messages, once, from both workers')
  t.same(state.flatMap((s) => s.errors), [], 'no connect_error, no "Session ID unknown", no transport error')
  const polls = p.child.logs.filter((l) => l.event === 'request' && l.url.startsWith('/socket.io/'))
  t.ok(polls.length >= CLIENTS, `the clients began on long-polling (${polls.length} requests)`)
  t.same(polls.filter((l) => l.status !== 200).map((l) => `${l.status} ${l.url}`), [],
    'and none was answered other than 200')

  clients.forEach((c) => c.close())
  await stopLeavingNothing(t, p)
})

t.test('examples/socketio-chat in Chromium: two pages on two workers chat, ' +
  'over websockets', { skip: redisMissing() || browserMissing() }, async (t) => {
  const { url: redisUrl } = await startRedis(t)
  const p = await startAppPool(t, CHAT_APP, { env: { REDIS_URL: redisUrl } })
  await chatInBrowser(t, p.url)
  await stopLeavingNothing(t, p)
})

t.test('examples/socketio-chat in Chromium through nginx → HAProxy → pool', {
  skip: redisMissing() || browserMissing()
}, async (t) => {
  const { url: redisUrl } = await startRedis(t)
  const lab = await startLabHaproxy(t, { workers: 2, nginxUser: NGINX_WORKER_USER })
  await startHaproxyPool(t, lab, { workers: 2, app: CHAT_APP, env: { REDIS_URL: redisUrl } })
  const prefix = path.join(lab.dir, 'nginx')
  fs.mkdirSync(prefix)
  const port = await freePort()
  const haproxySocket = path.join(lab.dir, 'haproxy-http.sock')
  await startNginx({ cfg: nginxConfig({ prefix, host: '127.0.0.1', port, haproxySocket }), prefix, port, t })
  await chatInBrowser(t, `http://127.0.0.1:${port}`)
})

// Two Chromium pages load the chat from `url`, on two workers: each sends a message, and each
// shows both, over a socket upgraded to a websocket.
async function chatInBrowser (t, url) {
  const browser = await require('playwright-core')
    .chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] })
  t.teardown(() => browser.close())
  const errors = []
  const openPage = async () => {
    const page = await browser.newPage()
    page.on('pageerror', (err) => errors.push(err.message))
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
    await page.goto(`${url}/`, { waitUntil: 'load', timeout: 20000 })
    // eslint-disable-next-line no-undef
    await page.waitForFunction(() => socket.connected && socket.io.engine.transport.name === 'websocket', null,
      { timeout: 15000 })
    await page.waitForSelector('#status:has-text("over websocket")', { timeout: 5000 })
    return page
  }
  const workerOf = (page) => page.locator('#status').innerText()
  const pages = [await openPage(), await openPage()]
  // A handshake goes to the worker with fewest open requests (HAProxy: leastconn); a page's
  // session holds one (its poll, then its tunnel): the second page almost always gets the other.
  for (let tries = 0; tries < 5 && await workerOf(pages[0]) === await workerOf(pages[1]); tries++) {
    await pages[1].close()
    pages[1] = await openPage()
  }
  t.not(await workerOf(pages[0]), await workerOf(pages[1]),
    `each page on its own worker: ${await workerOf(pages[0])}; ${await workerOf(pages[1])}`)

  for (const [i, page] of pages.entries()) {
    await page.fill('#input', `page ${i} says hi`)
    await page.click('#form button')
  }
  for (const [i, page] of pages.entries()) {
    await page.waitForFunction(() => document.querySelectorAll('#messages li').length >= 2, null, { timeout: 10000 })
      .catch(() => {})
    const texts = await page.locator('#messages li .text').allInnerTexts()
    t.same(texts.sort(), ['page 0 says hi', 'page 1 says hi'], `page ${i} shows both messages`)
    // eslint-disable-next-line no-undef
    t.equal(await page.evaluate(() => socket.io.engine.transport.name), 'websocket',
      `page ${i}'s socket upgraded to a websocket`)
  }
  t.same(errors, [], 'no error in either page')
  await browser.close()
}

t.test('both examples as plain processes, without pool', async (t) => {
  for (const [app, check] of [[WS_APP, echoOnce], [CHAT_APP, chatOnce]]) {
    const port = await freePort()
    const child = spawn(process.execPath, [app],
      { env: cleanEnv({ PORT: String(port) }), stdio: ['ignore', 'ignore', 'inherit'] })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    t.teardown(() => child.kill('SIGKILL'))
    await waitFor(() => canConnect(port),
      { timeout: 10000, what: `${path.basename(path.dirname(app))} to listen on ${port}` })
    await check(t, `http://127.0.0.1:${port}`)
    child.kill('SIGTERM')
    await exited
  }
})

// One `ws` client that keeps what it saw; resolves once it has its hello, or failed.
function wsClient (url) {
  const c = { ws: new WebSocket(url), hello: null, echoes: [], pushes: 0, closed: null, error: null }
  c.ws.on('message', (data) => {
    const m = JSON.parse(data)
    if (m.type === 'hello') c.hello = m
    else if (m.type === 'echo') c.echoes.push(m.data)
    else if (m.type === 'push') c.pushes++
  })
  c.ws.on('close', (code) => { c.closed = code })
  return new Promise((resolve) => {
    c.ws.on('error', (err) => { c.error = err.message; resolve(c) })
    c.ws.on('close', () => resolve(c))
    c.ws.on('message', () => { if (c.hello) resolve(c) })
    setTimeout(() => { c.error ??= 'no hello in 10 s'; resolve(c) }, 10000).unref()
  })
}

async function echoOnce (t, url) {
  const c = await wsClient(`${url.replace('http', 'ws')}/ws`)
  t.teardown(() => c.ws.terminate())
  t.match(c.hello, { type: 'hello', pid: Number, slot: null }, 'ws: hello, outside any pool')
  c.ws.send('plain')
  await waitFor(() => c.echoes.length > 0, { timeout: 5000, what: 'the echo' })
  t.same(c.echoes, ['plain'], 'ws: the echo')
  c.ws.close()
}

async function chatOnce (t, url) {
  const c = io(url, { forceNew: true, reconnection: false })
  t.teardown(() => c.close())
  const got = new Promise((resolve) => c.once('chat', resolve))
  await new Promise((resolve, reject) => { c.once('connect', resolve); c.once('connect_error', reject) })
  t.match(await c.timeout(5000).emitWithAck('chat', 'plain'), { ok: true }, 'Socket.IO: the message is accepted')
  t.match(await got, { text: 'plain', slot: null }, 'Socket.IO: and comes back, without Redis')
  c.close()
}

function browserMissing () {
  try {
    require.resolve('playwright-core')
  } catch {
    return 'playwright-core is not installed (a devDependency: npm install)'
  }
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM} (apt-get install chromium)`
  return false
}
