'use strict'
// What an app may be under `pool start`, beyond the three forms: objects shaped like a Koa app,
// a Fastify instance or a hapi server are served as they are; an app that listens on $PORT
// itself, however it passes the port, is taken over (the pool's host, the one-request guard,
// ready); and a reload's canary, which has no slot, gets a real PORT for such an app to use.
const t = require('tap')
const net = require('node:net')
const path = require('node:path')
const { once } = require('node:events')
const { FIXTURES, freePorts, request, runPool, waitFor, parseJsonLines } = require('../helpers')
const { startAppPool, reloadUnderLoad, stopLeavingNothing } = require('../helpers/app-pool')

for (const shape of ['koa', 'fastify', 'hapi']) {
  t.test(`an exported ${shape}-shaped app is served in every slot, ready before its first request`, async (t) => {
    const p = await startAppPool(t, path.join(FIXTURES, 'app-shapes.js'), { env: { APP_SHAPE: shape } })
    for (const slot of [1, 2]) {
      const res = await request(p.workerUrl(slot))
      t.equal(res.status, 200, `slot ${slot} answers 200 (503: served before the app was ready)`)
      t.match(JSON.parse(res.body), { shape, slot: String(slot) })
    }
    await stopLeavingNothing(t, p)
  })
}

const FORMS = ['number', 'string', 'port-host', 'port-host-backlog', 'options', 'options-string', 'no-callback',
  'parse-int-default',
  'path-false', 'path-and-port', 'port-backlog', 'options-backlog']

t.test('an app that listens on $PORT itself is adopted, whatever form its listen() takes', async (t) => {
  const p = await startAppPool(t, path.join(FIXTURES, 'listens-itself.js'),
    { workers: FORMS.length, env: { LISTEN_FORMS: FORMS.join(',') } })
  for (const [i, form] of FORMS.entries()) {
    const slot = i + 1
    // The side server starts in the app's listen() callback: ask until the app has seen it.
    const seen = await waitFor(async () => {
      const body = JSON.parse((await request(p.workerUrl(slot))).body)
      return body.side && body.secondListen && body
    }, { what: `slot ${slot} (${form}) to have started its side server` })
    t.equal(seen.form, form)
    t.equal(seen.slot, String(slot))
    t.ok(seen.callback, `${form}: the app's listen() callback ran`)
    t.same(seen.address, { address: '127.0.0.1', family: 'IPv4', port: p.ports[slot] },
      `${form}: on the slot's port and the pool's host, whatever host the app asked for`)
    t.equal(seen.secondListen, 'EADDRINUSE', `${form}: a second server on the slot's port is refused, even on ::1`)
    t.equal((await request(`http://127.0.0.1:${seen.side}/`)).body, 'side',
      `${form}: a server on another port is the app's own`)
  }
  await stopLeavingNothing(t, p)
})

// Node can listen on a socket already bound to PORT, handed over as a handle or a descriptor:
// not a TCP listen the worker can take over (it would have to bind the port itself), and never
// a server that may serve there without the one-request guard.
t.test('a server listening on the slot\'s port through a handle fails the boot at once, saying why', async (t) => {
  const dir = t.testdir({
    'app.js': `const { TCP, constants } = process.binding('tcp_wrap')
const handle = new TCP(constants.SERVER)
const err = handle.bind('127.0.0.1', Number(process.env.PORT))
if (err) throw new Error('bind failed: ' + err)
require('node:http').createServer((req, res) => res.end('unguarded')).listen(handle)
`
  })
  const [port] = await freePorts(1)
  const r = await runPool(['start', path.join(dir, 'app.js'), '-n', '1', '--worker-port', String(port), '--balancer',
    'none', '--max-boot-failures', '1', '--boot-timeout', '10s'], { timeout: 20000 })
  t.equal(r.code, 1, 'exit 1')
  t.equal(r.stderr,
    'pool: the app failed to boot in every slot (1 gave up): ' +
      'the app listens on the ' +
      `slot's port (${port}) through a handle or a file descriptor (listen(handle), listen({ fd })), ` +
      'which the pool cannot take over to serve behind its render guard: ' +
      'listen on process.env.PORT as a port, or export the app\n')
  const events = parseJsonLines(r.stdout).map((l) => l.event)
  t.notOk(events.includes('ready'), 'never reported ready')
  t.notOk(events.includes('boot-timeout'), 'no boot waited for its timeout')
})

t.test('an adopted server serves one request at a time', async (t) => {
  // K=1 given: the embedded balancer's default K (16) would let the guard run both.
  const p = await startAppPool(t, path.join(FIXTURES, 'listens-itself.js'),
    { workers: 1, args: ['--worker-concurrency', '1'] })
  const both = await Promise.all([request(`${p.workerUrl(1)}/wait?ms=300`), request(`${p.workerUrl(1)}/wait?ms=300`)])
  t.same(both.map((r) => JSON.parse(r.body).overlapped), [1, 1],
    'straight to the worker, the second waited for the first')
  await stopLeavingNothing(t, p)
})

t.test('reload under load of an app that reads PORT with a default (parseInt(PORT) || default): ' +
  'the canary gets a real port', async (t) => {
  // Its default port is taken, as 3000 often is: a canary run with PORT=0 would fail there.
  const taken = net.createServer().listen(0, '127.0.0.1')
  await once(taken, 'listening')
  t.teardown(() => taken.close())
  const env = { LISTEN_FORM: 'parse-int-default', DEFAULT_PORT: String(taken.address().port) }
  const p = await startAppPool(t, path.join(FIXTURES, 'listens-itself.js'), { env })
  await reloadUnderLoad(t, p)
  await stopLeavingNothing(t, p)
})

t.test('a throw in the app\'s listen() callback is a failed boot shown with its stack', async (t) => {
  const dir = t.testdir({
    'app.js': "require('node:http').createServer().listen(process.env.PORT, () => { null.address() })\n"
  })
  const [port] = await freePorts(1)
  const r = await runPool(['start', path.join(dir, 'app.js'), '-n', '1', '--worker-port', String(port), '--balancer',
    'none', '--max-boot-failures', '1'], { timeout: 20000 })
  t.equal(r.code, 1)
  t.match(r.stderr,
    /^pool: the app failed to boot in every slot \(1 gave up\); the app's error:\nTypeError: Cannot read properties of null/)
  t.match(r.stderr, /app\.js:1:/, 'where the app threw')
})

// (listens-itself.js exports nothing too, and listens after a timer: it is waited for.)
t.test('an app that exports nothing and has nothing left to run fails at once, not at --boot-timeout', async (t) => {
  const dir = t.testdir({ 'idle.js': "require('node:http').createServer(() => {})\n" })
  const [port] = await freePorts(1)
  const args = ['-n', '1', '--worker-port', String(port), '--balancer', 'none', '--max-boot-failures', '1']
  const idle = await runPool(['start', path.join(dir, 'idle.js'), ...args], { timeout: 20000 })
  t.equal(idle.code, 1)
  t.match(idle.stderr,
    /^pool: the app failed to boot in every slot \(1 gave up\): the app exported an empty object \(nothing was assigned to module.exports\) and did not call listen\(\): .* or listen on process.env.PORT\n$/)
  const events = parseJsonLines(idle.stdout).map((l) => l.event)
  t.ok(events.includes('boot-error') && !events.includes('boot-timeout'),
    'it failed as it loaded, no boot waited for its timeout')
})

t.test('an app that listens on a taken port of its own fails saying so, not blaming the slot\'s port', async (t) => {
  const taken = net.createServer().listen(0, '127.0.0.1')
  await once(taken, 'listening')
  t.teardown(() => taken.close())
  const { port: fixed } = taken.address()
  const dir = t.testdir({ 'app.js': `require('node:http').createServer().listen(${fixed})\n` })
  const [port] = await freePorts(1)
  const r = await runPool(['start', path.join(dir, 'app.js'), '-n', '1', '--worker-port', String(port), '--balancer',
    'none', '--max-boot-failures', '1'], { timeout: 20000 })
  t.equal(r.code, 2, 'exit 2: a port in use is the operator\'s to free')
  t.equal(r.stderr, `pool: port ${fixed} is already in use (the app listens on it itself, not on PORT, ${port})\n`)
})

// The balancer speaks HTTP/1.1 in clear to each worker's port: any other server there would be
// reported ready and fail every request (TLS), or never be ready (a raw TCP server), so the boot
// fails at once, saying what to do. --boot-timeout is lowered so that the old behaviour, a boot
// waiting for its timeout, fails the test quickly too.
const NOT_HTTP = {
  'an https server listening on PORT': {
    app: "require('node:https').createServer((req, res) => res.end('tls')).listen(process.env.PORT)\n",
    says: 'a TLS server (https.createServer, tls.createServer), and the balancer speaks plain HTTP to each worker: ' +
      'terminate TLS in front of the pool (nginx, HAProxy) and create it with http.createServer, ' +
      'or export the request handler'
  },
  'an exported https server': {
    app: "module.exports = require('node:https').createServer((req, res) => res.end('tls'))\n",
    says: 'a TLS server (https.createServer, tls.createServer), and the balancer speaks plain HTTP to each worker: ' +
      'terminate TLS in front of the pool (nginx, HAProxy) and create it with http.createServer, ' +
      'or export the request handler'
  },
  'an HTTP/2 server listening on PORT': {
    app: "require('node:http2').createServer().listen(process.env.PORT)\n",
    says: 'an HTTP/2 server (http2.createServer), and the balancer speaks HTTP/1.1 to each worker: ' +
      'create it with http.createServer, or export the request handler'
  },
  'a net.Server listening on PORT': {
    app: "require('node:net').createServer((socket) => socket.end('raw\\n')).listen(process.env.PORT)\n",
    says: 'a net.Server, not an HTTP server, and the balancer speaks HTTP/1.1 to each worker: ' +
      'create it with http.createServer, or export the request handler'
  }
}

for (const [what, { app, says }] of Object.entries(NOT_HTTP)) {
  t.test(`${what}: the boot fails at once, saying why`, async (t) => {
    const dir = t.testdir({ 'app.js': app })
    const [port] = await freePorts(1)
    const r = await runPool(['start', path.join(dir, 'app.js'), '-n', '1', '--worker-port', String(port), '--balancer',
      'none', '--max-boot-failures', '1', '--boot-timeout', '10s'], { timeout: 20000 })
    t.equal(r.code, 1, 'exit 1')
    t.equal(r.stderr,
      `pool: the app failed to boot in every slot (1 gave up): the app's server on PORT (${port}) is ${says}\n`)
    const events = parseJsonLines(r.stdout).map((l) => l.event)
    t.ok(events.includes('boot-error'), 'a boot error')
    t.notOk(events.includes('ready'), 'never reported ready')
    t.notOk(events.includes('boot-timeout'), 'no boot waited for its timeout')
  })
}

t.test('a port probe on PORT (a net.Server closed as it listens, as get-port does) is no server: ' +
  'the app then listening is adopted', async (t) => {
  const dir = t.testdir({
    'app.js': `const probe = require('node:net').createServer()
probe.listen(process.env.PORT, () => probe.close(() => {
  require('node:http').createServer((req, res) => res.end('after the probe')).listen(process.env.PORT)
}))
`
  })
  const p = await startAppPool(t, path.join(dir, 'app.js'), { workers: 1 })
  t.equal((await request(p.workerUrl(1))).body, 'after the probe')
  await stopLeavingNothing(t, p)
})

t.test('an app that forks cluster workers fails at once, saying the pool is the cluster', async (t) => {
  const dir = t.testdir({
    'app.js': `const cluster = require('node:cluster')
if (cluster.isPrimary) cluster.fork()
else require('node:http').createServer((req, res) => res.end('cluster worker')).listen(process.env.PORT)
`
  })
  const [port] = await freePorts(2)
  const r = await runPool(['start', path.join(dir, 'app.js'), '-n', '2', '--worker-port', String(port), '--balancer',
    'none', '--max-boot-failures', '1', '--boot-timeout', '10s'], { timeout: 30000 })
  t.equal(r.code, 1, 'exit 1')
  t.equal(r.stderr,
    'pool: the app failed to boot in every slot (2 gave up): the app uses cluster (cluster.fork()), ' +
      'and pool already runs 2 workers, one process each: ' +
      'drop cluster.fork() and serve from this process (pool start -n sets how many)\n')
  const events = parseJsonLines(r.stdout).map((l) => l.event)
  t.notOk(events.includes('boot-timeout'), 'no boot waited for its timeout')
})

// A child told POOL_CHANNEL_FD would take its own fd 3 (Node's IPC channel, in a fork) for the
// pool channel, and one told POOL_APP would run the app again as a pool worker.
t.test('processes the app starts inherit PORT, POOL_WORKER_ID, POOL_WORKERS and POOL_SUPERVISOR, ' +
  'none of the runtime\'s variables', async (t) => {
  const dir = t.testdir({
    'app.js': `const { execFileSync, fork } = require('node:child_process')
const script = 'process.stdout.write(JSON.stringify(' +
  'Object.keys(process.env).filter((k) => /^(POOL_|PORT$)/.test(k)).sort()))'
const seen = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })
// Bounded: whatever the forked process is, it forks nothing more.
const again = process.env.FORKED_AGAIN
  ? null
  : fork(process.argv[1], { env: { ...process.env, FORKED_AGAIN: '1' }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
let forked = null
if (again) {
  let stderr = ''
  again.stderr.on('data', (d) => { stderr += d })
  const timer = setTimeout(() => again.kill('SIGKILL'), 5000)
  again.on('close', (code, signal) => { clearTimeout(timer); forked = { code, signal, stderr } })
}
require('node:http').createServer((req, res) => res.end(JSON.stringify({ seen: JSON.parse(seen), forked })))
  .listen(process.env.PORT)
`
  })
  const p = await startAppPool(t, path.join(dir, 'app.js'), { workers: 1 })
  const body = await waitFor(async () => {
    const b = JSON.parse((await request(p.workerUrl(1))).body)
    return b.forked && b
  }, { what: 'the process the app forked to end' })
  // POOL_TEST and POOL_TEST_RUN are the test helpers' own, in the pool's environment.
  const inherited = body.seen.filter((name) => name !== 'POOL_TEST' && name !== 'POOL_TEST_RUN')
  t.same(inherited, ['POOL_SUPERVISOR', 'POOL_WORKERS', 'POOL_WORKER_ID', 'PORT'],
    'not POOL_CHANNEL_FD, POOL_APP, POOL_WORKER_HOST, POOL_LOG_LEVEL, POOL_HEARTBEAT_INTERVAL, POOL_KILL_TIMEOUT; ' +
      'POOL_SUPERVISOR marks them as the pool\'s (lib/supervisor/leftovers.js)')
  t.equal(body.forked.code, 1, 'a copy of process.argv[1] (the pool\'s bootstrap) exits at once')
  t.match(body.forked.stderr,
    /^pool: .*bootstrap\.js is the pool's worker, which only `pool start` runs: under pool, process\.argv\[1\] is this file, not the app/)
  await stopLeavingNothing(t, p)
})
