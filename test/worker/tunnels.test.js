'use strict'
// Tunnels (lib/worker/tunnels.js): WebSockets on the app's own server, under a real pool, their
// clients on the workers' ports. A drain waits for them; the app hears `draining` and closes
// them itself; one that does not gets the worker's goodbye (close code 1001) at SIGTERM; they
// hold no render place, never make a worker busy or hung, and `pool status` counts them.
// test/fixtures/ws-app.js is the app. On main, a stop or a reload cut every tunnel at once
// (clients saw 1006), `draining` did not exist, and no status showed tunnels.
const t = require('tap')
const http = require('node:http')
const path = require('node:path')
const WebSocket = require('ws')
const { Tunnels, CLOSE_FRAME, GOING_AWAY } = require('../../lib/worker/tunnels')
const { FIXTURES, freePorts, request, startPool, runPool, poolStatus, waitFor, sleep } = require('../helpers')

const APP = path.join(FIXTURES, 'ws-app.js')

// `pool start ws-app.js`, its clients on the workers' ports (`--balancer none`), or with the
// embedded balancer in front for the requests. The control commands find it by `control`.
async function wsPool (t, options = {}) {
  const { workers = 1, onDrain = 'ignore', args = [], env = {}, embedded = false, heartbeat = '300ms' } = options
  const ports = await freePorts(workers + 1)
  const [port, workerPort] = embedded ? ports : [null, ports[0]]
  const front = embedded ? ['--port', String(port)] : ['--balancer', 'none']
  const pool = startPool(['start', APP, '-n', String(workers), '--worker-port', String(workerPort), ...front,
    '--heartbeat-interval', heartbeat, '--log-format', 'json', ...args], { env: { WS_ON_DRAIN: onDrain, ...env } })
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started', 20000)
  const workerPorts = Array.from({ length: workers }, (_, i) => workerPort + i)
  const url = embedded ? `http://127.0.0.1:${port}` : null
  return { pool, workerPorts, url, control: ['--port', String(port ?? workerPort)] }
}

// `n` WebSocket clients on `port`, open; each counts its messages and says how it closed.
async function connect (port, n) {
  return Promise.all(Array.from({ length: n }, () => new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/`)
    ws.messages = 0
    ws.closed = new Promise((resolve) => ws.on('close', (code, reason) => {
      resolve({ code, reason: String(reason), at: performance.now() })
    }))
    ws.on('message', () => ws.messages++)
    ws.on('error', () => {}) // a cut connection: its close says how
    ws.once('open', () => resolve(ws))
    ws.once('unexpected-response', () => reject(new Error('the WebSocket handshake was refused')))
  })))
}

// Close codes → how many clients saw each ('open': still open after `timeout` ms).
async function codesOf (clients, timeout = 10000) {
  const open = new Promise((resolve) => setTimeout(resolve, timeout, { code: 'open' }).unref())
  const closes = await Promise.all(clients.map((c) => Promise.race([c.closed, open])))
  const tally = {}
  for (const { code } of closes) tally[code] = (tally[code] ?? 0) + 1
  return tally
}

async function reasonsOf (clients) {
  return [...new Set((await Promise.all(clients.map((c) => c.closed))).map((c) => c.reason))]
}

// The app's JSON lines of `event`, as the pool logged them.
function appLines (pool, event) {
  const of = (l) => l.event === 'app-log' && typeof l.msg === 'string' && l.msg.includes(`"${event}"`)
  return pool.logs.filter(of).map((l) => JSON.parse(l.msg))
}

const exitOf = (pool, pid) => pool.logs.find((l) => l.event === 'exit' && (pid === undefined || l.pid === pid))
const unplanned = (l) => ['hung', 'kill'].includes(l.event) || (l.event === 'exit' && l.reason !== 'stop')
const hung = (pool) => pool.logs.filter(unplanned)

t.test('the close frame: 1001 going away, unmasked, one length byte', async (t) => {
  t.equal(GOING_AWAY, 1001)
  t.same([...CLOSE_FRAME.subarray(0, 4)], [0x88, CLOSE_FRAME.length - 2, 0x03, 0xe9])
  t.equal(CLOSE_FRAME.subarray(4).toString(), 'server going away')
})

t.test('tracking adds no upgrade listener; a tunnel is counted until it closes, and said goodbye to', async (t) => {
  const tunnels = new Tunnels()
  const server = http.createServer((req, res) => res.end('plain'))
  tunnels.track(server)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const { port } = server.address()
  const upgrade = { connection: 'Upgrade', upgrade: 'websocket' }
  t.equal(server.listenerCount('upgrade'), 0, 'no listener added')
  const res = await request(`http://127.0.0.1:${port}/`, { headers: upgrade })
  t.same([res.status, res.body], [200, 'plain'], 'without one, an Upgrade request still reaches the app\'s handler')
  t.same(tunnels.counts(), { tunnels: 0, tunnelsOpened: 0 }, 'and is no tunnel')

  // With the app's listener, the socket is the app's: a tunnel. Its path says whether to answer.
  server.on('upgrade', (req, socket) => {
    if (req.url !== '/answer') return
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n')
  })
  const client = (path) => new Promise((resolve, reject) => {
    const req = http.request({ port, host: '127.0.0.1', path, headers: upgrade })
    req.on('upgrade', (res, socket) => resolve(socket)).on('error', reject).end()
    if (path !== '/answer') req.on('socket', resolve)
  })
  const answered = await client('/answer')
  const unanswered = await client('/silent')
  await waitFor(() => tunnels.open === 2, { what: 'the tunnels counted' })
  t.same(tunnels.counts(), { tunnels: 2, tunnelsOpened: 2 })
  const received = []
  answered.on('data', (d) => received.push(d))
  const ended = new Promise((resolve) => answered.once('end', resolve))
  const cut = new Promise((resolve) => unanswered.once('close', resolve))
  const said = tunnels.goodbye()
  await ended
  t.same(Buffer.concat(received), CLOSE_FRAME, 'answered: the close frame, then the end')
  answered.end()
  await cut
  t.pass('unanswered: destroyed')
  await said
  await waitFor(() => tunnels.open === 0, { what: 'the tunnels forgotten' })
  t.same(tunnels.counts(), { tunnels: 0, tunnelsOpened: 2 })
})

t.test('pool stop, 20 WebSockets open, the app closing them on `draining`: its 1001 at once, clean', async (t) => {
  const { pool, workerPorts: [port] } = await wsPool(t, { onDrain: 'close', args: ['--graceful-timeout', '10s'] })
  const clients = await connect(port, 20)
  const began = performance.now()
  const stop = await runPool(['stop', '--port', String(port)], { timeout: 20000 })
  const stopMs = performance.now() - began
  t.equal(stop.code, 0, `pool stop: ${stop.stdout.trim() || stop.stderr.trim()}`)
  t.match(stop.stdout, /stopped \(clean\)/)
  t.same(await codesOf(clients), { 1001: 20 }, 'every client closed with 1001')
  t.same(await reasonsOf(clients), ['server draining'], 'by the app')
  t.ok(stopMs < 5000, `the stop took ${Math.round(stopMs)} ms, far less than --graceful-timeout (10 s)`)
  const heard = [{ code: 'POOL_E_WORKER_DRAINING', reason: 'stop', clients: 20 }]
  t.match(appLines(pool, 'app-draining'), heard, 'the app heard why')
  t.match(exitOf(pool), { reason: 'stop', code: 0, signal: null }, 'the worker left by itself once its tunnels closed')
})

t.test('an app ignoring `draining`: the stop waits --graceful-timeout, then the worker\'s 1001 to each', async (t) => {
  const graceful = 1500
  const args = ['--graceful-timeout', `${graceful}ms`, '--kill-timeout', '5s']
  const { pool, workerPorts: [port] } = await wsPool(t, { args })
  const clients = await connect(port, 20)
  const began = performance.now()
  pool.kill('SIGTERM')
  await sleep(500) // into the graceful time: the app must go on serving them after this
  const during = clients.map((c) => c.messages)
  const closes = await Promise.all(clients.map((c) => c.closed))
  const exited = await pool.exited
  const stopMs = performance.now() - began
  t.same(await codesOf(clients), { 1001: 20 }, 'every client closed with 1001, none 1006')
  t.same(await reasonsOf(clients), ['server going away'], 'the worker\'s goodbye')
  const earliest = Math.round(Math.min(...closes.map((c) => c.at)) - began)
  t.ok(earliest >= graceful - 100, `the tunnels lasted until the graceful timeout (the first closed at ${earliest} ms)`)
  t.ok(clients.every((c, i) => c.messages > during[i]), 'the app kept serving them meanwhile')
  t.same(exited, { code: 3, signal: null }, 'the stop had to SIGTERM (exit 3)')
  t.ok(stopMs < graceful + 1500, `the pool stopped in ${Math.round(stopMs)} ms (--graceful-timeout ${graceful} ms)`)
  t.match(pool.logs.find((l) => l.event === 'terminate'), { tunnels: 20 }, 'SIGTERM, with 20 tunnels open')
  t.match(exitOf(pool), { reason: 'stop', signal: 'SIGTERM' }, 'the worker died by the SIGTERM, as without tunnels')
})

t.test('an app with a SIGTERM listener of its own: the goodbye is written, the signal is the app\'s', async (t) => {
  const args = ['--graceful-timeout', '500ms', '--kill-timeout', '10s']
  const { pool, workerPorts: [port] } = await wsPool(t, { env: { WS_OWN_SIGTERM: '5000' }, args })
  const clients = await connect(port, 5)
  const began = performance.now()
  pool.kill('SIGTERM')
  t.same(await codesOf(clients), { 1001: 5 }, 'every client closed with 1001')
  await pool.exited
  t.ok(performance.now() - began < 3000, 'no wait for the app\'s listener (5 s) nor for SIGKILL')
  t.match(exitOf(pool), { reason: 'stop', code: 0, signal: null }, 'not re-raised: the worker left at the drain\'s end')
})

t.test('pool reload, tunnels open: the old workers retire with them, 1001 for each, no request fails', async (t) => {
  const graceful = 2000
  const args = ['--graceful-timeout', `${graceful}ms`]
  const { pool, workerPorts, url, control } = await wsPool(t, { workers: 2, embedded: true, args })
  const clients = (await Promise.all(workerPorts.map((p) => connect(p, 10)))).flat()
  const oldPids = pool.logs.filter((l) => l.event === 'ready').map((l) => l.pid)
  let going = true
  const results = { ok: 0, failed: [] }
  const load = (async () => {
    while (going) {
      try {
        const r = await request(`${url}/render?ms=20`)
        if (r.status === 200) results.ok++
        else results.failed.push(r.status)
      } catch (err) { results.failed.push(err.message) }
    }
  })()
  t.teardown(() => { going = false })
  await waitFor(() => results.ok >= 5, { what: 'the load answered' })
  const began = performance.now()
  const reload = await runPool(['reload', ...control], { timeout: 30000 })
  const reloadMs = Math.round(performance.now() - began)
  t.equal(reload.code, 0, `pool reload: ${reload.stdout.trim() || reload.stderr.trim()}`)
  t.ok(reloadMs < graceful, `the reload took ${reloadMs} ms, not --graceful-timeout (${graceful} ms)`)
  const retiring = pool.logs.filter((l) => l.event === 'retiring').map((l) => [l.reason, l.tunnels])
  t.same(retiring, [['reload', 10], ['reload', 10]], 'both old workers retired holding 10 tunnels each')
  t.same(await codesOf(clients), { 1001: 20 }, 'every tunnel ended with 1001')
  const fresh = await connect(workerPorts[0], 1)
  t.equal(fresh[0].readyState, WebSocket.OPEN, 'a new client reaches the new worker on the same port')
  fresh[0].terminate()
  await waitFor(() => oldPids.every((pid) => exitOf(pool, pid)), { what: 'the retirees\' exits' })
  going = false
  await load
  t.same(results.failed, [], `no HTTP request failed (${results.ok} answered)`)
  for (const pid of oldPids) {
    t.match(exitOf(pool, pid), { reason: 'reload', retiring: true, signal: 'SIGTERM' }, `old worker ${pid}: drained`)
  }
})

t.test('tunnels are no requests: a worker with 50 idle ones stays ready, renders, is never hung', async (t) => {
  const args = ['--timeout', '1s', '--heartbeat-timeout', '2s']
  const { pool, workerPorts: [port] } = await wsPool(t, { heartbeat: '500ms', args })
  const clients = await connect(port, 50)
  const pid = pool.logs.find((l) => l.event === 'ready').pid
  const until = performance.now() + 3000
  const statuses = []
  while (performance.now() < until) {
    statuses.push((await request(`http://127.0.0.1:${port}/render?ms=50`, { timeout: 2000 })).status)
    await sleep(100) // renders paced over the 3 s
  }
  t.ok(statuses.length > 5 && statuses.every((s) => s === 200), `${statuses.length} renders answered 200 in 3 s`)
  const status = await poolStatus(['--port', String(port)])
  t.match(status.workers[0], { pid, state: 'ready', tunnels: 50, open: 0 }, 'ready, not busy: 50 tunnels, no request')
  t.same(hung(pool), [], 'no hung line, no kill, no exit')
  t.ok(clients.every((c) => c.readyState === WebSocket.OPEN), 'every tunnel still open')
})

t.test('pool status shows the tunnels of each worker', async (t) => {
  const { workerPorts, control } = await wsPool(t, { workers: 2 })
  const clients = [...await connect(workerPorts[0], 7), ...await connect(workerPorts[1], 3)]
  const counted = (n) => async () => {
    const s = await poolStatus(control)
    return s.workers[0].tunnels === n && s.workers[1].tunnels === 3 && s
  }
  const status = await waitFor(counted(7), { what: 'the check-ins counting the tunnels' })
  t.same(status.workers.map((w) => [w.tunnels, w.tunnelsOpened]), [[7, 7], [3, 3]], '--json: tunnels and tunnelsOpened')
  const lines = (await runPool(['status', ...control])).stdout.split('\n')
  t.match(lines[2], /^SLOT +PID +PORT +STATE +UPTIME +REQUESTS +TOTAL +RESTARTS +RSS MB +REQUEST +TUNNELS$/, 'TUNNELS')
  t.same([lines[3], lines[4]].map((l) => l.trim().split(/\s+/).at(-1)), ['7', '3'])
  for (const c of clients.slice(0, 4)) c.close()
  await waitFor(counted(3), { what: 'the closed ones no longer counted' })
})
