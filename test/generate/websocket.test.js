'use strict'

// WebSockets through the fronts `pool config` generates: HAProxy sends a handshake (Upgrade:
// websocket, Connection: upgrade) to its streams backend, where a socket never takes a worker's
// only render slot, and closes a tunnel after --tunnel-timeout of silence; nginx passes the
// handshake on from a location of its own and keeps its keepalive to HAProxy for every other
// request; the edge sends sockets to its hosts beside the slots its agents count. Real haproxy
// 2.6, nginx 1.22 and `pool start --balancer haproxy` with test/fixtures/websocket.js.

const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const http = require('node:http')
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const WebSocket = require('ws')
const { haproxyConfig } = require('../../lib/generate/haproxy')
const { nginxConfig } = require('../../lib/generate/nginx')
const { edgeConfig } = require('../../lib/generate/edge')
const { HaproxyClient } = require('../../lib/haproxy/client')
const { FIXTURES, freePorts, request, runPool, waitFor, tempDir } = require('../helpers')
const {
  checkHaproxyConfig, checkNginxConfig, startHaproxy, startNginxInFront, NGINX_WORKER_USER
} = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool } = require('../helpers/haproxy-pool')
const { startLoad } = require('../helpers/load')

const WS_APP = path.join(FIXTURES, 'websocket.js')

// A WebSocket to `url`. The record fills in as the socket lives: opened (its 101 came within
// `handshake` ms), the pid that said hello (websocket.js says `hello <pid>`), each echo (`echo
// <message>`), the pushes counted (`push`), and the close code. Closed at the test's end.
function openSocket (t, url, { handshake = 5000 } = {}) {
  const s = { opened: false, error: null, closeCode: null, closedAt: null, echoes: [], pushes: 0, pids: new Set() }
  const ws = new WebSocket(url, { handshakeTimeout: handshake })
  s.ws = ws
  s.settled = new Promise((resolve) => {
    ws.once('open', () => { s.opened = true; resolve(s) })
    ws.on('error', (err) => { s.error = s.error ?? err.message; resolve(s) })
    ws.once('close', (code) => { s.closeCode = code; s.closedAt = performance.now(); resolve(s) })
  })
  ws.on('message', (data) => {
    const [kind, rest] = String(data).split(/ (.*)/s)
    if (kind === 'hello') s.pids.add(rest)
    else if (kind === 'echo') s.echoes.push(rest)
    else s.pushes++
  })
  t.teardown(() => ws.terminate())
  return s
}

// `n` sockets opened at once; resolves once each has opened or failed.
async function openSockets (t, n, url) {
  const sockets = Array.from({ length: n }, (_, i) => openSocket(t, url(i)))
  await Promise.all(sockets.map((s) => s.settled))
  return sockets
}

// Each socket says hello; resolves with how many heard their echo and at least two pushes within
// `within` ms.
async function talk (sockets, { within = 5000 } = {}) {
  const base = sockets.map((s) => s.pushes)
  sockets.forEach((s, i) => s.ws.send(`hello-${i}`))
  const echoed = () => sockets.filter((s, i) => s.echoes.includes(`hello-${i}`)).length
  const pushed = () => sockets.filter((s, i) => s.pushes >= base[i] + 2).length
  await waitFor(() => echoed() === sockets.length && pushed() === sockets.length,
    { timeout: within, what: 'echoes and pushes' }).catch(() => {})
  return { echoed: echoed(), pushed: pushed() }
}

// GETs of a render beside the sockets, one after the other: each status, and how long it took.
async function rendersBeside (url, n) {
  const out = []
  for (let i = 0; i < n; i++) {
    const started = performance.now()
    const r = await request(`${url}/render?ms=50&i=${i}`, { timeout: 5000 }).catch((err) => ({ status: err.message }))
    out.push({ status: r.status, ms: performance.now() - started })
  }
  return out
}

// A handshake written by hand, with its own Upgrade and Connection headers: resolves with the
// status line of the answer.
function rawHandshake (port, { upgrade, connection }) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write([
      'GET /raw HTTP/1.1', 'Host: x', `Upgrade: ${upgrade}`, `Connection: ${connection}`,
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13', '', ''
    ].join('\r\n')))
    let head = ''
    socket.setTimeout(5000, () => { socket.destroy(); resolve('no answer in 5 s') })
    socket.on('data', (d) => {
      head += d
      if (head.includes('\r\n')) { socket.destroy(); resolve(head.split('\r\n')[0]) }
    })
    socket.on('error', (err) => resolve(err.message))
  })
}

// `show stat` of one backend's servers: { worker1: row, ... }.
async function rows (client, backend) {
  return client.servers(backend)
}

const sum = (servers, field) => Object.values(servers).reduce((n, s) => n + s[field], 0)
const wsUrl = (httpUrl) => httpUrl.replace(/^http/, 'ws')

t.test('the configs say it, and haproxy -c and nginx -t accept them', async (t) => {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const cfg = haproxyConfig({ workers: 2 })
  const frontend = /^frontend pool_http\n((?: {4}[^\n]*\n)*)/m.exec(cfg)[1]
  t.match(frontend,
    /^ {4}acl pool_websocket hdr\(upgrade\) -i websocket\n {4}acl pool_upgrade hdr\(connection\) -i upgrade\n {4}use_backend pool_streams if pool_websocket pool_upgrade$/m,
    'a handshake (Upgrade: websocket and Connection listing upgrade, any case) goes to the streams backend')
  const streams = /^backend pool_streams\n((?: {4}[^\n]*\n)*)/m.exec(cfg)[1]
  const render = /^backend pool\n((?: {4}[^\n]*\n)*)/m.exec(cfg)[1]
  t.match(streams, /^ {4}timeout tunnel 1h$/m, 'a tunnel there is closed after an hour of silence by default')
  t.match(streams.replace(/\n {4}# /g, ' '),
    /counts the connection on its server for as long as the socket lives .* never sees a message, a ping or a close frame/,
    'and the config says what HAProxy can know of it')
  t.notMatch(render, /timeout tunnel/, 'no tunnel in the render backend')
  t.match(haproxyConfig({ workers: 2, tunnelTimeout: 600000 }), /^ {4}timeout tunnel 10m$/m, '--tunnel-timeout 10m')
  t.match(haproxyConfig({ workers: 2, tunnelTimeout: 600000 }),
    /^# nginx in front: `pool config nginx --haproxy-http-socket \S+ --tunnel-timeout 600s`\.$/m,
    'the header tells nginx the same timeout')
  for (const [name, options] of Object.entries({
    defaults: { workers: 2 },
    '--tunnel-timeout 90': { workers: 2, tunnelTimeout: 90000, streamRoutes: '/api/chat' }
  })) {
    const file = path.join(dir, 'haproxy.cfg')
    fs.writeFileSync(file, haproxyConfig(options))
    const { ok, output } = checkHaproxyConfig(file)
    t.ok(ok, `haproxy -c, ${name}: ${output.trim().split('\n').pop()}`)
  }

  const prefix = path.join(dir, 'nginx')
  fs.mkdirSync(prefix)
  const ngx = nginxConfig({ prefix })
  t.match(ngx, /^ {4}map "\$http_upgrade:\$http_connection" \$pool_websocket \{$/m,
    'nginx tells a handshake by both headers')
  const root = /^ {8}location \/ \{\n((?: {12}[^\n]*\n| {16}[^\n]*\n)*) {8}\}$/m.exec(ngx)[1]
  t.match(root, /^ {12}error_page 418 = @websocket;\n {12}if \(\$pool_websocket\) \{\n {16}return 418;\n {12}\}$/m,
    'and sends it to @websocket')
  t.match(root, /^ {12}proxy_set_header Connection "";$/m, 'every other request keeps its connection to HAProxy alive')
  t.notMatch(root, /proxy_set_header Upgrade/, 'and passes no Upgrade')
  const location = /^ {8}location @websocket \{\n((?: {12}[^\n]*\n)*) {8}\}$/m.exec(ngx)[1]
  for (const line of ['proxy_http_version 1.1;', 'proxy_set_header Upgrade $http_upgrade;',
    'proxy_set_header Connection upgrade;', 'proxy_read_timeout 3610s;', 'proxy_send_timeout 3610s;']) {
    t.match(location, new RegExp(`^ {12}${line.replace(/[$.]/g, '\\$&')}$`, 'm'), `@websocket: ${line}`)
  }
  t.match(nginxConfig({ prefix, tunnelTimeout: 600000 }), /proxy_read_timeout 610s;/,
    '--tunnel-timeout 10m: 10 s above HAProxy\'s')
  fs.writeFileSync(path.join(prefix, 'nginx.conf'), ngx)
  const checked = checkNginxConfig(prefix)
  t.ok(checked.ok, `nginx -t: ${checked.output.trim().split('\n').pop()}`)

  for (const [name, options] of Object.entries({
    '--hosts': { hosts: '10.0.0.11:9001,10.0.0.12:9001', agentPort: 9100 },
    '--discover': { discover: 'pool.example:9001', agentPort: 9100, tunnelTimeout: 120000 }
  })) {
    const edge = edgeConfig(options)
    t.match(edge, /^ {4}use_backend fleet_streams if edge_websocket edge_upgrade$/m,
      `edge, ${name}: a handshake goes to fleet_streams`)
    const edgeStreams = /^backend fleet_streams\n((?: {4}[^\n]*\n)*)/m.exec(edge)[1]
    t.match(edgeStreams, new RegExp(`^ {4}timeout tunnel ${options.tunnelTimeout ? '2m' : '1h'}$`, 'm'),
      `edge, ${name}: timeout tunnel`)
    t.notMatch(edgeStreams.replace(/^ {4}#.*\n/gm, ''), /agent-check|maxconn/,
      `edge, ${name}: no agent, no maxconn on the sockets' servers`)
    const file = path.join(dir, 'edge.cfg')
    fs.writeFileSync(file, edge)
    const { ok, output } = checkHaproxyConfig(file)
    t.ok(ok, `haproxy -c, edge ${name}: ${output.trim().split('\n').pop()}`)
  }
})

t.test('a bad --tunnel-timeout is one line on stderr and exit 2', async (t) => {
  const targets = [['haproxy'], ['nginx'], ['edge', '--hosts', '10.0.0.11:9001', '--agent-port', '9100']]
  const values = [['0', /--tunnel-timeout must be at least 1s \(got 0s\)/], ['500ms', /at least 1s \(got 500ms\)/],
    ['soon', /--tunnel-timeout must be a duration/], ['40000m', /--tunnel-timeout must be at most 24 days/]]
  for (const target of targets) {
    for (const [value, message] of values) {
      const r = await runPool(['config', ...target, '--tunnel-timeout', value])
      t.equal(r.code, 2, `pool config ${target[0]} --tunnel-timeout ${value}: exit 2`)
      t.equal(r.stdout, '', 'nothing on stdout')
      t.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr.trim()}`)
      t.match(r.stderr, message)
    }
  }
  const ok = await runPool(['config', 'haproxy', '--tunnel-timeout', '90'])
  t.equal(ok.code, 0, ok.stderr)
  t.match(ok.stdout, /^ {4}timeout tunnel 90s$/m, 'a bare number is seconds, as for every duration')
})

t.test('HAProxy mode, -n 2: 20 sockets at once, each echoes and is pushed to, ' +
  'while renders beside them are answered', async (t) => {
  const lab = await startLabHaproxy(t, { workers: 2 })
  await startHaproxyPool(t, lab, { workers: 2, app: WS_APP })
  const sockets = await openSockets(t, 20, (i) => `${wsUrl(lab.url)}/s${i}`)
  const open = sockets.filter((s) => s.opened)
  t.equal(open.length, 20,
    `all 20 opened (${[...new Set(sockets.map((s) => s.error).filter(Boolean))].join('; ') || 'no error'})`)
  const { echoed, pushed } = await talk(open)
  t.equal(echoed, 20, 'each one\'s message came back')
  t.equal(pushed, 20, 'each one is pushed to')
  t.same(new Set(open.flatMap((s) => [...s.pids])).size, 2, 'on both workers')

  const renders = await rendersBeside(lab.url, 10)
  t.ok(renders.every((r) => r.status === 200),
    `10 renders beside them answered: ${renders.map((r) => r.status).join(', ')}`)
  const slowest = Math.max(...renders.map((r) => r.ms))
  t.ok(slowest < 2000,
    `none queued behind a socket (a 50 ms render took ${renders.map((r) => r.ms.toFixed(0)).join(', ')} ms)`)

  const streams = await rows(lab.client, 'pool_streams')
  t.equal(sum(streams, 'scur'), 20,
    `HAProxy counts the 20 sockets in the streams backend (${Object.values(streams).map((s) => s.scur).join(' + ')})`)
  const render = await rows(lab.client, 'pool')
  t.ok(Object.values(render).every((s) => s.smax <= 1),
    `never two connections on a render slot (smax ${Object.values(render).map((s) => s.smax).join(', ')})`)

  // While both workers render, HAProxy hands a handshake to a worker at once: it waits for no
  // render slot. The worker answers it when its loop is free, once the render is done: a socket
  // shares its worker's loop with the renders.
  const busy = [request(`${lab.url}/render?ms=1500&busy=1`), request(`${lab.url}/render?ms=1500&busy=2`)]
  await waitFor(async () => sum(await rows(lab.client, 'pool'), 'scur') === 2, { what: 'both workers rendering' })
  const during = openSocket(t, `${wsUrl(lab.url)}/during`)
  await waitFor(async () => sum(await rows(lab.client, 'pool_streams'), 'scur') === 21,
    { timeout: 1000, what: 'the handshake on a worker' }).catch(() => {})
  const queued = async (backend) => (await lab.client.showStat(backend)).find((r) => r.svname === 'BACKEND').qcur
  t.equal(sum(await rows(lab.client, 'pool_streams'), 'scur'), 21, 'the handshake went to a worker while both rendered')
  t.same([await queued('pool'), await queued('pool_streams')], [0, 0], 'nothing waits in HAProxy\'s queues')
  await during.settled
  t.ok(during.opened, 'it opened once its worker\'s render was done')
  t.same((await Promise.all(busy)).map((r) => r.status), [200, 200])

  // Only a real handshake goes there: the headers in any case, Connection listing upgrade.
  const before = await rows(lab.client, 'pool')
  t.match(await rawHandshake(lab.port, { upgrade: 'WebSocket', connection: 'keep-alive, Upgrade' }), /^HTTP\/1\.1 101 /,
    'Upgrade: WebSocket, Connection: keep-alive, Upgrade: a socket')
  t.match(await rawHandshake(lab.port, { upgrade: 'websocket', connection: 'keep-alive' }), /^HTTP\/1\.1 200 /,
    'Upgrade without Connection: upgrade is a page')
  t.equal(sum(await rows(lab.client, 'pool'), 'stot') - sum(before, 'stot'), 1,
    'and it took a render slot, as every page does')
})

t.test('nginx → HAProxy → pool: sockets pass, keepalive to HAProxy is kept, ' +
  'an idle tunnel closes at --tunnel-timeout', async (t) => {
  const tunnelTimeout = 2000
  const lab = await startLabHaproxy(t, { workers: 2, nginxUser: NGINX_WORKER_USER, options: { tunnelTimeout } })
  await startHaproxyPool(t, lab, { workers: 2, app: WS_APP })
  const { port: nginxPort, url } = await startNginxInFront(t, lab.dir, { tunnelTimeout })

  const sockets = await openSockets(t, 4, (i) => `${wsUrl(url)}/n${i}`)
  t.equal(sockets.filter((s) => s.opened).length, 4,
    '4 sockets opened through nginx ' +
      `(${[...new Set(sockets.map((s) => s.error).filter(Boolean))].join('; ') || 'no error'})`)
  if (sockets.some((s) => !s.opened)) return
  t.same(await talk(sockets), { echoed: 4, pushed: 4 }, 'each echoes and is pushed to')
  t.equal(sum(await rows(lab.client, 'pool_streams'), 'scur'), 4, 'in HAProxy\'s streams backend')
  t.match(await rawHandshake(nginxPort, { upgrade: 'WebSocket', connection: 'keep-alive, Upgrade' }),
    /^HTTP\/1\.1 101 /, 'nginx tells a handshake in any case, Connection listing upgrade')
  t.match(await rawHandshake(nginxPort, { upgrade: 'websocket', connection: 'keep-alive' }), /^HTTP\/1\.1 200 /,
    'Upgrade without Connection: upgrade is a page')

  const renders = await rendersBeside(url, 5)
  t.ok(renders.every((r) => r.status === 200 && r.ms < 2000),
    `renders beside them answered: ${renders.map((r) => `${r.status} in ${r.ms.toFixed(0)} ms`).join(', ')}`)

  // Many requests on one client connection: nginx reuses its connection to HAProxy, before and
  // after the sockets close (an upgraded connection is never handed back to its cache).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const frontend = async () => (await lab.client.showStat('pool_http')).find((r) => r.svname === 'FRONTEND')
  for (const when of ['beside the sockets', 'after they closed']) {
    if (when === 'after they closed') {
      for (const s of sockets) s.ws.close()
      await Promise.all(sockets.map((s) => s.settled))
    }
    const before = await frontend()
    const statuses = []
    for (let i = 0; i < 10; i++) statuses.push((await request(`${url}/?k=${i}`, { agent })).status)
    const after = await frontend()
    t.same(statuses, Array(10).fill(200), `${when}: 10 requests answered`)
    t.ok(after.conn_tot - before.conn_tot <= 1,
      `${when}: HAProxy saw ${after.req_tot - before.req_tot} requests on ${after.conn_tot - before.conn_tot} new ` +
        'connection(s)')
  }

  // The tunnel timeout: a socket that nobody speaks on is closed after it, by HAProxy (nginx
  // waits 10 s more); one that is pushed to lives on.
  const quiet = openSocket(t, `${wsUrl(url)}/quiet?every=0`)
  const pushedTo = openSocket(t, `${wsUrl(url)}/pushed?every=200`)
  await Promise.all([quiet.settled, pushedTo.settled])
  const openedAt = performance.now()
  const code = await Promise.race([new Promise((resolve) => quiet.ws.once('close', resolve)),
    new Promise((resolve) => setTimeout(resolve, 6000, 'still open'))])
  const elapsed = performance.now() - openedAt
  t.equal(code, 1006,
    `the quiet socket was closed without a close frame (HAProxy knows no frames) after ${elapsed.toFixed(0)} ms`)
  t.ok(elapsed >= tunnelTimeout - 100 && elapsed < tunnelTimeout + 1500,
    `at --tunnel-timeout (${tunnelTimeout} ms), not nginx's ${tunnelTimeout + 10000}`)
  t.ok(pushedTo.opened && pushedTo.closeCode === null, `the pushed one is still open (${pushedTo.pushes} pushes)`)
})

t.test('pool reload with sockets open: no request fails, the reload ends within --graceful-timeout', async (t) => {
  const graceful = 5000
  const lab = await startLabHaproxy(t, { workers: 2 })
  const pool = await startHaproxyPool(t, lab,
    { workers: 2, app: WS_APP, args: ['--graceful-timeout', `${graceful}ms`] })
  const sockets = await openSockets(t, 6, (i) => `${wsUrl(lab.url)}/r${i}`)
  t.equal(sockets.filter((s) => s.opened).length, 6, 'six sockets open')
  const load = startLoad(lab.url,
    { concurrency: 2, maxRequests: 5000, maxMs: 60000, timeout: 20000, path: (i) => `/render?ms=20&i=${i}` })
  let took
  try {
    await waitFor(() => load.stats.ok >= 10, { timeout: 10000, what: 'the load to get answers' })
    const started = performance.now()
    const r = await runPool(['reload', '--control', path.join(lab.dir, 'control.sock')], { timeout: 60000 })
    took = performance.now() - started
    t.equal(r.code, 0, `pool reload: ${r.stdout.trim() || r.stderr.trim()}`)
  } finally {
    const stats = await load.stop()
    t.equal(stats.failed, 0, `no request failed (${stats.ok} answered): ${stats.failures.slice(0, 3).join('; ')}`)
  }
  t.ok(took < graceful,
    `the reload took ${took.toFixed(0)} ms, within --graceful-timeout (${graceful} ms): HAProxy's render slots drain ` +
      'at once, the sockets hold none')
  t.equal(pool.logs.filter((l) => l.event === 'terminate').length, 0, 'no worker needed a SIGTERM')

  // What the clients saw: recorded, not asserted (the worker side gives a socket no close frame
  // of its own yet).
  await waitFor(() => sockets.every((s) => s.closeCode !== null),
    { timeout: 3000, what: 'the old workers\' sockets to close' }).catch(() => {})
  const codes = {}
  for (const s of sockets) codes[s.closeCode ?? 'open'] = (codes[s.closeCode ?? 'open'] ?? 0) + 1
  t.comment(`the sockets after the reload: ${JSON.stringify(codes)} (close codes, or still open)`)
})

// A host as the edge sees it: /ping, an agent that gives it one slot, and WebSockets that talk
// as websocket.js's do.
async function startFakeHost (t, port, agentPort) {
  const server = http.createServer((req, res) => res.end(req.url === '/ping' ? 'pong\n' : 'page\n'))
  const sockets = new WebSocket.Server({ server })
  sockets.on('connection', (ws) => {
    ws.send('hello host')
    const timer = setInterval(() => ws.send('push'), 100)
    ws.on('message', (data) => ws.send(`echo ${data}`))
    ws.on('close', () => clearInterval(timer))
  })
  // HAProxy ends each agent check with a reset.
  const agent = net.createServer((c) => { c.on('error', () => {}); c.end('up ready maxconn:1\n') })
  await Promise.all([new Promise((resolve) => server.listen(port, '127.0.0.1', resolve)),
    new Promise((resolve) => agent.listen(agentPort, '127.0.0.1', resolve))])
  t.teardown(() => new Promise((resolve) => {
    for (const ws of sockets.clients) ws.terminate()
    agent.close()
    server.closeAllConnections()
    server.close(() => resolve())
  }))
}

t.test('the edge: sockets go to a host beside the slot its agent gives it', async (t) => {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const [port, statsPort, hostPort, agentPort] = await freePorts(4)
  await startFakeHost(t, hostPort, agentPort)
  const cfg = edgeConfig({
    hosts: `127.0.0.1:${hostPort}`,
    agentPort,
    port,
    statsPort,
    prefix: dir,
    log: 'none',
    checkInter: 200,
    agentInter: 200
  })
  const haproxy = await startHaproxy({ cfg, dir, t })
  const client = new HaproxyClient({ socket: haproxy.socket })
  await waitFor(async () => (await client.servers('fleet')).host1?.slim === 1,
    { timeout: 5000, what: 'the agent\'s maxconn:1' })
  await waitFor(async () => (await client.servers('fleet_streams')).host1?.status === 'UP',
    { timeout: 5000, what: 'host1 UP for sockets' })

  const sockets = await openSockets(t, 5, (i) => `ws://127.0.0.1:${port}/e${i}`)
  t.equal(sockets.filter((s) => s.opened).length, 5,
    '5 sockets through the edge to a host of one slot ' +
      `(${[...new Set(sockets.map((s) => s.error).filter(Boolean))].join('; ') || 'no error'})`)
  if (sockets.some((s) => !s.opened)) return
  t.same(await talk(sockets), { echoed: 5, pushed: 5 }, 'each echoes and is pushed to')
  const page = await request(`http://127.0.0.1:${port}/page`, { timeout: 3000 })
  t.equal(page.status, 200, 'the host\'s one slot still takes a page')
  const streams = (await client.servers('fleet_streams')).host1
  t.equal(streams.scur, 5, 'the edge counts the sockets in fleet_streams')
  t.equal(streams.slim, null, 'where no agent caps them (no session limit)')
  t.ok((await client.servers('fleet')).host1.smax <= 1, 'and never more than its slot in fleet')
})
