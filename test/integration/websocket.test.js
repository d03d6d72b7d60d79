'use strict'
// WebSockets through the embedded balancer (issue 39): a handshake is admitted like a request,
// passed to a worker with its upgrade headers, and after the worker's 101 the two sockets are a
// tunnel that holds no render place; anything but a 101 is an ordinary answer; Socket.IO's
// long-polling requests reach the worker holding their session. test/fixtures/websocket.js is
// the app. On main, every handshake got 501 and Socket.IO's default transports failed.
const t = require('tap')
const net = require('node:net')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { io } = require('socket.io-client')
const { FIXTURES, request, poolStatus, waitFor, sleep } = require('../helpers')
const { startAppPool } = require('../helpers/app-pool')
const {
  openSockets, summary, echoAll, closeAll, appSaid, appLines, startRedis, redisMissing
} = require('../helpers/websockets')

const APP = path.join(FIXTURES, 'websocket.js')

// The app under `pool start` on the embedded balancer, its control socket the default one.
const embeddedPool = (t, args = [], options = {}) => startAppPool(t, APP, { ...options, args, control: false })

const killed = (pool) => pool.logs.filter((l) => l.event === 'hung' || (l.event === 'exit' && l.reason !== 'stop'))

t.test('200 websockets on two workers open, echo and get pushes; renders beside them are served', async (t) => {
  const { child: pool, url, ws, port } = await embeddedPool(t, ['--timeout', '1s'])
  const clients = await openSockets(200, (i) => `${ws}/ws?id=c${i}`)
  t.teardown(() => closeAll(clients))
  await echoAll(clients)
  await waitFor(() => clients.every((c) => c.pushes > 0), { what: 'a push to every client' }).catch(() => {})
  t.same(summary(clients), { opened: 200, echoed: 200, pushed: 200, closes: {} }, 'every tunnel open, both ways')
  t.equal(new Set(clients.map((c) => c.hello)).size, 2, 'spread over both workers')
  const renders = await Promise.all(Array.from({ length: 20 },
    () => request(`${url}/render?ms=20`, { timeout: 10000 })))
  t.same(renders.map((r) => r.status), Array(20).fill(200),
    'renders beside 200 tunnels: a tunnel holds no render place')
  t.match((await poolStatus(['--port', String(port)])).front, { tunnels: 200, tunnelsOpened: 200 },
    'pool status counts the tunnels')
  t.same(killed(pool), [], 'idle tunnels for longer than --timeout make no worker hung')
})

t.test('an answer other than 101 is an ordinary response; a hang-up reaches the app; ' +
  'the access log has the tunnel', async (t) => {
  const { child: pool, port, ws } = await embeddedPool(t, ['--access-log'])
  const refused = await rawHandshake(port, '/reject')
  t.match(refused, /^HTTP\/1\.1 403 Forbidden\r\n/, 'the app\'s 403 reaches the client')
  t.match(refused, /\r\n\r\nforbidden$/, 'with its body, and the connection closes after it')

  const [client] = await openSockets(1, () => `${ws}/ws?id=gone`)
  client.ws.send('hi')
  await waitFor(() => client.echoes === 1, { what: 'the echo' })
  const cutAt = Date.now()
  client.ws.terminate() // no close frame: the TCP connection just goes
  const closed = await appSaid(pool, (l) => l.event === 'ws-closed' && l.id === 'gone', 5000)
  t.ok(closed.at - cutAt < 1000, `the app saw the hang-up ${closed.at - cutAt} ms after it`)
  const line = await pool.waitLog((l) => l.event === 'tunnel', 5000)
  t.match(line, { url: '/ws?id=gone', closedBy: 'client', worker: /^worker\d$/ },
    'the tunnel\'s access-log line says who closed it')
  t.ok(line.toWorker > 0 && line.toClient > 0, `bytes each way: ${line.toWorker} in, ${line.toClient} out`)
})

t.test('a handshake the app drops unanswered costs no worker; ' +
  'an answered one\'s connection closes though the client keeps it', async (t) => {
  const { child: pool, port, url } = await embeddedPool(t, ['--access-log'])
  for (let i = 0; i < 5; i++) {
    const answer = await rawHandshake(port, '/drop')
    t.equal(answer, '', `drop ${i + 1}: the connection closed without an answer, as the app closed it`)
  }
  t.same(pool.logs.filter((l) => l.event === 'balancer-redispatch'), [], 'nothing replayed')
  const renders = await Promise.all([1, 2, 3, 4].map(() => request(`${url}/render?ms=10`, { timeout: 5000 })))
  t.same(renders.map((r) => r.status), [200, 200, 200, 200], 'no worker benched: renders go on at once')
  // A client that keeps its side open after a refused handshake (half-open): the balancer lets
  // the connection go after a linger; the client's next write finds it gone (a reset).
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true })
  t.teardown(() => socket.destroy())
  socket.on('data', () => {})
  socket.on('error', () => {})
  socket.on('end', () => {}) // and never ends its own side
  socket.write('GET /reject HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
    'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n')
  await new Promise((resolve) => socket.once('end', resolve)) // the answer, then the balancer's FIN
  const held = () => spawnSync('ss', ['-tanpH', `( sport = :${port} and dport = :${socket.localPort} )`],
    { encoding: 'utf8' }).stdout
  t.match(held(), /pid=/, 'the balancer holds the connection while the client may still close it')
  await waitFor(() => !/pid=/.test(held()), { timeout: 10000, what: 'the end of the balancer\'s 5 s linger' })
    .catch(() => {})
  t.notMatch(held(), /pid=/, 'then lets it go: no process of the pool holds it any more')
})

t.test('--tunnel-timeout closes a silent tunnel; one that carries bytes stays', async (t) => {
  const { child: pool, ws } = await embeddedPool(t, ['--tunnel-timeout', '600ms'], { env: { PUSH_MS: '0' } })
  const [silent] = await openSockets(1, () => `${ws}/ws?id=silent`)
  const [talking] = await openSockets(1, () => `${ws}/ws?id=talking`)
  t.teardown(() => closeAll([silent, talking]))
  const pinger = setInterval(() => talking.ws.send('ping'), 150)
  t.teardown(() => clearInterval(pinger))
  await waitFor(() => silent.closed !== null, { timeout: 5000, what: 'the silent tunnel to close' })
  t.equal(talking.closed, null, 'the tunnel that carries messages is still open')
  const line = await pool.waitLog((l) => l.event === 'tunnel' && l.url === '/ws?id=silent', 5000).catch(() => null)
  if (line) t.equal(line.closedBy, 'idle')
})

t.test('a client that reads nothing holds back its worker\'s writes, not the balancer\'s memory', async (t) => {
  const { child: pool, ws, port } = await embeddedPool(t, [], { env: { PUSH_MS: '0' } })
  const [reader] = await openSockets(1, () => `${ws}/ws?id=stalled`)
  t.teardown(() => closeAll([reader]))
  reader.ws._socket.pause() // reads nothing from now on
  reader.ws.send('flood 64')
  const flooded = await appSaid(pool, (l) => l.event === 'flooded' && l.id === 'stalled')
  await sleep(500) // time for the balancer to take in what the client does not read, were it to
  t.ok(flooded.buffered > 32 * 1024 * 1024,
    `64 MB sent: ${Math.round(flooded.buffered / 1048576)} MB wait in the app's socket, not in the balancer`)
  t.equal((await poolStatus(['--port', String(port)])).front.responseBytes, 0, 'and none on the response budget')
})

t.test('Socket.IO with its default transports: 100 clients chat across two workers ' +
  '(Redis adapter)', { skip: redisMissing() }, async (t) => {
  const { port: redisPort } = await startRedis(t)
  const { child: pool, url } = await embeddedPool(t, [], { env: { REDIS_PORT: String(redisPort) } })
  await waitFor(() => appLines(pool, (l) => l.event === 'redis-adapter').length >= 2, { what: 'both workers on Redis' })
  const clients = Array.from({ length: 100 }, () => io(url, { reconnection: false, forceNew: true }))
  t.teardown(() => clients.forEach((c) => c.close()))
  const seen = clients.map(() => 0)
  const errors = []
  clients.forEach((c, i) => {
    c.on('chat', () => seen[i]++)
    c.on('connect_error', (err) => errors.push(err.message))
    c.on('disconnect', (why) => { if (why !== 'io client disconnect') errors.push(why) })
  })
  await waitFor(() => clients.every((c) => c.connected && c.io.engine.transport.name === 'websocket'),
    { timeout: 20000, what: 'every client upgraded' })
  const pids = await Promise.all(clients.map((c, i) => c.timeout(10000).emitWithAck('chat', `hi ${i}`)))
  t.equal(new Set(pids).size, 2, 'the clients are spread over both workers')
  await waitFor(() => seen.every((n) => n === 100), { timeout: 10000, what: 'every message at every client' })
    .catch(() => {})
  t.same(seen, Array(100).fill(100), 'each of 100 clients got all 100 messages, from both workers')
  t.same(errors, [], 'no session ID unknown, no transport error')
  t.equal(pool.logs.filter((l) => l.event === 'request' && l.status === 400).length, 0, 'no request answered 400')
})

// The handshake's raw answer, read to the close.
function rawHandshake (port, target) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (d) => { text += d })
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
    socket.setTimeout(5000, () => { socket.destroy(); resolve(text) })
    socket.write(`GET ${target} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n')
  })
}
