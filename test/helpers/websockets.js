'use strict'
// WebSocket clients for the tunnel tests: many at once, each keeping what it saw.

const net = require('node:net')
const { spawn, spawnSync } = require('node:child_process')
const WebSocket = require('ws')
const { freePort, waitFor, tempDir } = require('../helpers')

// Opens `n` websockets to url(i); resolves once each has opened, failed or `timeout` passed.
// Each client: { ws, opened, hello, echoes, pushes, closed: code | null, error }.
async function openSockets (n, url, { timeout = 10000 } = {}) {
  const clients = []
  const settled = []
  for (let i = 0; i < n; i++) {
    const c = {
      i,
      ws: new WebSocket(url(i)),
      opened: false,
      hello: null,
      echoes: 0,
      pushes: 0,
      messages: 0,
      closed: null,
      error: null
    }
    c.ws.on('message', (data) => {
      const text = String(data)
      c.messages++
      if (text.startsWith('hello ')) c.hello = text.slice(6)
      else if (text.startsWith('echo ')) c.echoes++
      else if (text === 'push') c.pushes++
    })
    c.ws.on('close', (code) => { c.closed = code })
    c.ws.on('error', (err) => { c.error = err.message })
    settled.push(new Promise((resolve) => {
      c.ws.once('open', () => { c.opened = true; resolve() })
      c.ws.once('close', resolve)
      setTimeout(resolve, timeout).unref()
    }))
    clients.push(c)
  }
  await Promise.all(settled)
  return clients
}

// Counts of what the clients saw, for one t.same.
function summary (clients) {
  const closes = {}
  for (const c of clients) if (c.closed !== null) closes[c.closed] = (closes[c.closed] ?? 0) + 1
  return {
    opened: clients.filter((c) => c.opened).length,
    echoed: clients.filter((c) => c.echoes > 0).length,
    pushed: clients.filter((c) => c.pushes > 0).length,
    closes
  }
}

// Each client sends one message; resolves once every open one has its echo (or `timeout`).
async function echoAll (clients, { timeout = 10000 } = {}) {
  const before = clients.map((c) => c.echoes)
  for (const c of clients) if (c.ws.readyState === WebSocket.OPEN) c.ws.send(`m${c.i}`)
  const deadline = Date.now() + timeout
  while (Date.now() < deadline && clients.some((c, k) => c.opened && c.closed === null && c.echoes === before[k])) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

function closeAll (clients) {
  for (const c of clients) c.ws.terminate()
}

// What the app printed as a JSON line (an `app-log` line of the pool's), once `pred` takes it.
async function appSaid (pool, pred, timeout = 10000) {
  const line = await pool.waitLog((l) => l.event === 'app-log' && pred(parsed(l.msg)), timeout)
  return parsed(line.msg)
}

// Every line the app printed so far that `pred` takes.
function appLines (pool, pred) {
  return pool.logs.filter((l) => l.event === 'app-log').map((l) => parsed(l.msg)).filter(pred)
}

function parsed (text) {
  try { return JSON.parse(text) ?? {} } catch { return {} }
}

// A redis-server of the test's own on a free port, nothing saved, gone at the test's end:
// { url, port }.
async function startRedis (t) {
  const port = await freePort()
  const dir = tempDir(t, 'pool-redis-')
  const redis = spawn('redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' })
  const exited = new Promise((resolve) => redis.once('exit', resolve))
  t.teardown(async () => {
    redis.kill('SIGKILL')
    await exited
  })
  await waitFor(() => canConnect(port), { what: 'redis-server' })
  return { url: `redis://127.0.0.1:${port}`, port }
}

function canConnect (port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true) })
    s.on('error', () => resolve(false))
  })
}

// A test's skip reason when there is no redis-server, else false.
function redisMissing () {
  return spawnSync('redis-server', ['--version']).error
    ? 'redis-server is not installed (scripts/setup installs it)'
    : false
}

module.exports = { openSockets, summary, echoAll, closeAll, appSaid, appLines, startRedis, redisMissing, canConnect }
