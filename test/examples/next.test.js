'use strict'
// Next.js under `pool start`, unchanged: examples/frameworks/next is built once (`next build`,
// with the standalone output too), then both of Next's own servers run as they are, each served,
// reloaded under load without a failed request, and stopped with nothing left: the custom server
// from Next's docs (server.js) and the one `next build` writes (.next/standalone/server.js).
// The App Router's page that streams (app/streamed) reaches the client through the pool's
// balancer as Next renders it: its shell first, the part inside <Suspense> when its data came.
// Its AI chat route (app/api/chat: the AI SDK's streamText with the SDK's own test model)
// streams three times --timeout long without a kill, and a client that leaves stops the model's
// call (its onAbort) through the embedded balancer, HAProxy and nginx → HAProxy.
const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { ROOT, cleanEnv, request, waitFor } = require('../helpers')
const { startAppPool, reloadUnderLoad, stopLeavingNothing } = require('../helpers/app-pool')
const { hangUpAfterFirstBytes } = require('../helpers/streams')
const { startLabHaproxy, startHaproxyPool, allUp } = require('../helpers/haproxy-pool')
const { startNginxInFront, NGINX_WORKER_USER } = require('../helpers/haproxy')

const EXAMPLE = path.join(ROOT, 'examples', 'frameworks', 'next')
const NEXT_BIN = path.join(ROOT, 'node_modules', 'next', 'dist', 'bin', 'next')
const BUILD_TIMEOUT = 240000
// A build, two servers served, reloaded and stopped, and the chat route through three fronts.
t.setTimeout(600000)

// A copy of the example, built. Inside the repository (its ignored tmp/), where Next finds
// its own package as a user's project does: Turbopack does not follow a node_modules symlink
// out of the project's root, so a copy under the system's temp dir could not build.
async function buildCopy (t) {
  const tmp = path.join(ROOT, 'tmp')
  fs.mkdirSync(tmp, { recursive: true })
  const dir = fs.mkdtempSync(path.join(tmp, 'next-'))
  t.teardown(() => {
    fs.rmSync(dir, { recursive: true, force: true })
    try { fs.rmdirSync(tmp) } catch { /* not empty: someone else's too */ }
  })
  fs.cpSync(EXAMPLE, dir, { recursive: true, filter: (src) => path.basename(src) !== '.next' })
  const build = await run(process.execPath, [NEXT_BIN, 'build', dir], {
    env: cleanEnv({ NEXT_TELEMETRY_DISABLED: '1', NEXT_OUTPUT: 'standalone' }),
    timeout: BUILD_TIMEOUT
  })
  if (build.code !== 0) {
    throw new Error(`next build failed (${build.code ?? build.signal}):\n${build.output.slice(-3000)}`)
  }
  return dir
}

function run (cmd, args, { env, timeout }) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout)
    child.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, output }) })
  })
}

async function servesThePage (t, url, slot) {
  const res = await request(url)
  t.equal(res.status, 200, `slot ${slot}: 200`)
  t.match(res.body, /<h1>Hello from Next\.js<\/h1>/, `slot ${slot}: the page`)
  t.match(res.body, new RegExp(`pool slot (<!-- -->)?${slot}<`), `slot ${slot}: rendered by that worker, per request`)
}

const DELAY = 1500

// GET /streamed through the balancer on a raw connection, noting when the shell and the late
// part arrived.
function timedStreamed (url) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
    const got = { text: '', shellAt: null, lateAt: null }
    socket.setEncoding('utf8')
    socket.on('data', (d) => {
      got.text += d
      if (got.shellAt === null && got.text.includes('<h1>Streamed from Next.js</h1>')) got.shellAt = performance.now()
      if (got.lateAt === null && got.text.includes('Recommended for you')) got.lateAt = performance.now()
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(got))
    socket.write(`GET /streamed?delay=${DELAY} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
  })
}

async function streamsTheAppRouterPage (t, url) {
  const got = await timedStreamed(url)
  t.match(got.text, /^HTTP\/1\.1 200 /, 'the App Router page: 200')
  const at = (marker) => got.text.indexOf(marker)
  t.ok(at('<h1>Streamed from Next.js</h1>') < at('Loading recommendations') &&
    at('Loading recommendations') < at('Recommended for you'), 'its shell with the placeholder, then the late part')
  t.ok(got.lateAt - got.shellAt >= DELAY / 2,
    `the shell came ${Math.round(got.lateAt - got.shellAt)} ms before the late part ` +
      `(its data comes ${DELAY} ms after the request)`)
}

const JSON_POST = { method: 'POST', headers: { 'content-type': 'application/json' } }

// When the chat route's onAbort ran for stream `id` (its JSON line, carried by the pool's log).
function abortedAt (logs, id) {
  for (const l of logs) {
    if (l.event !== 'app-log' || !String(l.msg).includes('chat-aborted')) continue
    try { const said = JSON.parse(l.msg); if (said.id === id) return said.at } catch {}
  }
  return undefined
}

async function chatsThrough (t, front, url, pool) {
  const chat = await request(`${url}/api/chat`,
    { ...JSON_POST, body: JSON.stringify({ tokens: 60, every: 50 }), timeout: 30000 })
  t.equal(chat.status, 200, `${front}: the chat route answers`)
  t.equal(chat.body, Array.from({ length: 60 }, (_, i) => `word${i + 1} `).join(''),
    `${front}: all 60 tokens, 3 s of them at --timeout 1s`)
  const id = `${front}-${Math.random()}`
  const at = await hangUpAfterFirstBytes(`${url}/api/chat`,
    { ...JSON_POST, body: JSON.stringify({ tokens: 100000, every: 50, id }) })
  await waitFor(() => abortedAt(pool.logs, id) !== undefined,
    { timeout: 5000, what: `${front}: onAbort after the hang-up` })
  const ms = abortedAt(pool.logs, id) - at
  t.ok(ms < 1000, `${front}: the model's call stopped ${ms} ms after the client left`)
  t.same(pool.logs.filter((l) => l.event === 'hung'), [], `${front}: no worker killed`)
}

t.test('Next.js', async (t) => {
  const dir = await buildCopy(t)
  const standalone = path.join(dir, '.next', 'standalone', path.relative(ROOT, dir), 'server.js')

  const servers = {
    'the custom server of Next\'s docs (server.js)': {
      app: path.join(dir, 'server.js'),
      env: { NODE_ENV: 'production' }
    },
    'the standalone server of `next build` (.next/standalone/server.js)': { app: standalone, env: {} }
  }
  for (const [name, { app, env }] of Object.entries(servers)) {
    t.test(`${name}: served, reloaded under load, stopped`, async (t) => {
      const p = await startAppPool(t, app, { env })
      for (const slot of [1, 2]) await servesThePage(t, p.workerUrl(slot), slot)
      await streamsTheAppRouterPage(t, p.url)
      await reloadUnderLoad(t, p)
      for (const slot of [1, 2]) await servesThePage(t, p.workerUrl(slot), slot)
      await stopLeavingNothing(t, p)
    })
  }

  t.test('the AI SDK chat route: streamed whole past --timeout, and stopped when its client leaves', async (t) => {
    const server = path.join(dir, 'server.js')
    const env = { NODE_ENV: 'production' }
    const p = await startAppPool(t, server, { env, args: ['--timeout', '1s'] })
    await chatsThrough(t, 'embedded balancer', p.url, p.child)

    const lab = await startLabHaproxy(t,
      { workers: 2, nginxUser: NGINX_WORKER_USER, options: { streamRoutes: '/api/chat' } })
    const pool = await startHaproxyPool(t, lab, { app: server, env, args: ['--timeout', '1s'] })
    await waitFor(allUp(lab.client), { timeout: 20000, what: 'both servers UP' })
    await chatsThrough(t, 'HAProxy', lab.url, pool)
    const nginx = await startNginxInFront(t, lab.dir)
    await chatsThrough(t, 'nginx → HAProxy', nginx.url, pool)
  })
})
