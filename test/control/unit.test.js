'use strict'
// The control socket's parts without a real pool: claiming the path (0600, stale, live, not a
// socket), the JSON protocol, the client's errors, the default path, the printed formats.
const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { ControlServer, createControlServer } = require('../../lib/control/server')
const { sendCommand } = require('../../lib/control/client')
const { defaultControlPath, clientControlPath, frontPortOf } = require('../../lib/control/path')
const { listenerOf } = require('../../lib/fronts/registry')
const { formatDuration, formatStatus, formatReload, formatScale } = require('../../lib/control/format')
const { poolError, codes } = require('../../lib/errors')
const { exitCodeOf } = require('../../lib/cli/exit-codes')
const { tempDir } = require('../helpers')

// A stand-in for Pool with the methods the control server calls.
function fakePool (overrides = {}) {
  return {
    phase: 'running',
    target: 2,
    status: () => ({ pid: process.pid, phase: 'running', target: 2, front: { type: 'none' }, queue: 0, workers: [] }),
    reload: async () => ({ replaced: [{ slot: 1, oldPid: 10, newPid: 20 }], ms: 5 }),
    scale: async (n) => ({ from: 2, to: n }),
    stop: async () => ({ clean: true }),
    ...overrides
  }
}

async function serve (t, pool, socketPath = path.join(tempDir(t), 'c.sock')) {
  const server = await createControlServer({ path: socketPath, pool })
  t.teardown(() => server.close())
  return server
}

// Raw protocol: write lines, collect `count` parsed reply lines.
function exchange (socketPath, lines, count) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath)
    const replies = []
    let buf = ''
    socket.setEncoding('utf8')
    socket.on('connect', () => socket.write(lines.join('\n') + '\n'))
    socket.on('data', (d) => {
      buf += d
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        replies.push(JSON.parse(buf.slice(0, i)))
        buf = buf.slice(i + 1)
      }
      if (replies.length >= count) { socket.end(); resolve(replies) }
    })
    socket.on('error', reject)
  })
}

t.test('the socket is 0600 from the start and removed on close', async (t) => {
  const server = await serve(t, fakePool())
  const st = fs.statSync(server.path)
  t.ok(st.isSocket(), 'a socket')
  t.equal(st.mode & 0o777, 0o600, 'mode 0600')
  t.same(fs.readdirSync(path.dirname(server.path)), ['c.sock'], 'no staging directory left behind')
  await server.close()
  t.notOk(fs.existsSync(server.path), 'file removed on close')
})

t.test('protocol: each command reaches the pool and answers by id', async (t) => {
  const calls = []
  const server = await serve(t, fakePool({ scale: async (n) => { calls.push(n); return { from: 2, to: n } } }))
  t.same(await sendCommand(server.path, 'scale', { workers: 5 }), { from: 2, to: 5 })
  t.same(calls, [5], 'scale got the number')
  t.same(await sendCommand(server.path, 'reload'), { replaced: [{ slot: 1, oldPid: 10, newPid: 20 }], ms: 5 })
  t.equal((await sendCommand(server.path, 'status')).pid, process.pid)
  t.same(await sendCommand(server.path, 'ping'), { pid: process.pid, phase: 'running' })
})

t.test('protocol: a status is answered while a reload on the same connection runs', async (t) => {
  // The reload ends only once the status was asked for: a server that ran one command per
  // connection at a time would never get to the status, and this test would time out.
  let finishReload
  const base = fakePool()
  const server = await serve(t, fakePool({
    reload: () => new Promise((resolve) => { finishReload = resolve }),
    status: () => { setTimeout(() => finishReload({ replaced: [], ms: 1 }), 20); return base.status() }
  }))
  const [first, second] = await exchange(server.path, [
    JSON.stringify({ id: 'r', command: 'reload' }),
    JSON.stringify({ id: 's', command: 'status' })
  ], 2)
  t.equal(first.id, 's', 'status first')
  t.equal(second.id, 'r', 'reload when done')
  t.same(second, { id: 'r', ok: true, result: { replaced: [], ms: 1 } })
})

t.test('protocol: a client that half-closes after its request still gets a slow answer', async (t) => {
  const server = await serve(t,
    fakePool({ reload: () => new Promise((resolve) => setTimeout(() => resolve({ replaced: [], ms: 300 }), 300)) }))
  const text = await new Promise((resolve, reject) => {
    const socket = net.connect(server.path)
    let out = ''
    socket.setEncoding('utf8')
    socket.on('data', (d) => { out += d })
    socket.on('end', () => resolve(out))
    socket.on('error', reject)
    socket.end(JSON.stringify({ id: 7, command: 'reload' }) + '\n')
  })
  t.same(JSON.parse(text), { id: 7, ok: true, result: { replaced: [], ms: 300 } })
})

t.test('protocol: errors carry code, message, exit code and the app\'s error', async (t) => {
  const appError = { message: 'boom at load', stack: 'Error: boom at load\n    at app.js:1:7' }
  const server = await serve(t, fakePool({
    reload: async () => {
      throw poolError(codes.RELOAD_FAILED, 'reload aborted: the new code failed to boot: boom at load',
        { details: { appError } })
    },
    scale: () => { throw poolError(codes.BAD_OPTION, 'scale needs a positive integer') } // synchronous throw
  }))
  const [reload, scale, unknown, notJson] = await exchange(server.path, [
    JSON.stringify({ id: 1, command: 'reload' }),
    JSON.stringify({ id: 2, command: 'scale', args: { workers: 0 } }),
    JSON.stringify({ id: 3, command: 'explode' }),
    '{nope'
  ], 4).then((r) => r.sort((a, b) => (a.id ?? 9) - (b.id ?? 9)))
  t.same(reload,
    {
      id: 1,
      ok: false,
      error: {
        code: codes.RELOAD_FAILED,
        message: 'reload aborted: the new code failed to boot: boom at load',
        appError
      }
    })
  t.same(scale, { id: 2, ok: false, error: { code: codes.BAD_OPTION, message: 'scale needs a positive integer' } })
  t.equal(unknown.error.code, codes.BAD_OPTION)
  t.match(unknown.error.message, /unknown command "explode" \(known: status, reload, scale, recycle, stop, ping\)/)
  t.equal(unknown.id, 3)
  t.same(notJson, { id: null, ok: false, error: { code: codes.BAD_OPTION, message: 'bad control request: not JSON' } })

  // The client turns the pool's error back into a PoolError printError can show.
  const err = await sendCommand(server.path, 'reload').catch((e) => e)
  t.equal(err.code, codes.RELOAD_FAILED)
  t.equal(exitCodeOf(err), 1)
  t.same(err.details.appError, appError)
  t.ok(err.remote)
})

t.test('a live pool on the path: the second server refuses with its pid', async (t) => {
  const first = await serve(t, fakePool())
  const err = await createControlServer({ path: first.path, pool: fakePool() }).catch((e) => e)
  t.equal(err.code, codes.CONTROL_IN_USE)
  t.equal(err.message, `another pool is running on control socket ${first.path} (pid ${process.pid})`)
  t.equal(exitCodeOf(err), 2)
  t.same(await sendCommand(first.path, 'ping'), { pid: process.pid, phase: 'running' }, 'the first still answers')
})

t.test('a stale socket (nobody listening) is replaced', async (t) => {
  const dir = tempDir(t)
  const stale = path.join(dir, 'c.sock')
  // Leave a socket inode with no listener: bind, hard-link, close (close unlinks only the original).
  const old = net.createServer().listen(path.join(dir, 'old.sock'))
  await new Promise((resolve) => old.once('listening', resolve))
  fs.linkSync(path.join(dir, 'old.sock'), stale)
  await new Promise((resolve) => old.close(resolve))
  t.ok(fs.statSync(stale).isSocket(), 'stale socket in place')
  const staleIno = fs.statSync(stale).ino
  await serve(t, fakePool(), stale)
  t.not(fs.statSync(stale).ino, staleIno, 'a new socket')
  t.same(await sendCommand(stale, 'ping'), { pid: process.pid, phase: 'running' })
})

t.test('a path that is not a socket is refused and left alone', async (t) => {
  const file = path.join(tempDir(t), 'important.txt')
  fs.writeFileSync(file, 'keep me')
  const err = await createControlServer({ path: file, pool: fakePool() }).catch((e) => e)
  t.equal(err.code, codes.BAD_OPTION)
  t.match(err.message, /exists and is not a socket; refusing to replace it/)
  t.equal(fs.readFileSync(file, 'utf8'), 'keep me')
})

t.test('a missing directory and a too-long path are clear errors', async (t) => {
  const missing = await createControlServer({ path: path.join(tempDir(t), 'no', 'such', 'c.sock'), pool: fakePool() })
    .catch((e) => e)
  t.match(missing.message, /cannot create control socket .*c\.sock: directory .*such does not exist/)
  const long = await createControlServer({ path: path.join(tempDir(t), 'x'.repeat(120) + '.sock'), pool: fakePool() })
    .catch((e) => e)
  t.match(long.message, /is too long \(\d+ bytes; unix sockets allow 10\d\)/)
})

t.test('close does not remove a socket that another pool has since claimed', async (t) => {
  const dir = tempDir(t)
  const p = path.join(dir, 'c.sock')
  const first = await createControlServer({ path: p, pool: fakePool() })
  fs.unlinkSync(p) // an operator removed it by hand, then another pool started
  const second = await serve(t, fakePool(), p)
  await first.close()
  t.ok(fs.existsSync(p), 'the second pool\'s socket is still there')
  t.same(await sendCommand(second.path, 'ping'), { pid: process.pid, phase: 'running' })
})

t.test('close answers the command in flight (the stop that caused it) before hanging up', async (t) => {
  const pool = fakePool({ stop: async () => { setImmediate(() => server.close()); return { clean: true } } })
  const server = await serve(t, pool)
  const result = await sendCommand(server.path, 'stop', {}, { waitForClose: true, timeout: 5000 })
  t.same(result, { clean: true, pid: process.pid })
  t.notOk(fs.existsSync(server.path))
})

t.test('client errors: no pool, and a socket that never answers', async (t) => {
  const dir = tempDir(t)
  const nothing = path.join(dir, 'none.sock')
  const err = await sendCommand(nothing, 'status').catch((e) => e)
  t.equal(err.code, codes.CONTROL_UNREACHABLE)
  t.equal(err.message, `no pool is running on control socket ${nothing}`)

  const mutePath = path.join(dir, 'mute.sock')
  const mute = net.createServer(() => {}).listen(mutePath)
  await new Promise((resolve) => mute.once('listening', resolve))
  t.teardown(() => { mute.close(); for (const s of sockets) s.destroy() })
  const sockets = new Set()
  mute.on('connection', (s) => sockets.add(s))
  const timeout = await sendCommand(mutePath, 'status', {}, { timeout: 200 }).catch((e) => e)
  t.equal(timeout.code, codes.CONTROL_UNREACHABLE)
  t.match(timeout.message, /no answer to 'status' from the pool on control socket .*mute\.sock within 200 ms/)
  // ...and such a socket is not taken over by a new pool.
  const refused = await new ControlServer({ path: mutePath, pool: fakePool() }).listen().catch((e) => e)
  t.equal(refused.code, codes.CONTROL_IN_USE)
  t.match(refused.message, /does not answer as a pool/)
})

t.test('default path: a private XDG_RUNTIME_DIR, else TMPDIR/pool-UID, named by the front port', async (t) => {
  const xdg = tempDir(t)
  const tmp = tempDir(t) // TMPDIR of these calls: the real temp dir is never touched
  const own = path.join(tmp, `pool-${process.geteuid()}`)
  t.equal(defaultControlPath(9001, { XDG_RUNTIME_DIR: xdg, TMPDIR: tmp }), path.join(xdg, 'pool-9001.sock'))
  t.notOk(fs.existsSync(own), 'no temp dir made when XDG_RUNTIME_DIR serves')
  t.equal(defaultControlPath(9001, { XDG_RUNTIME_DIR: path.join(xdg, 'missing'), TMPDIR: tmp }),
    path.join(own, 'pool-9001.sock'))
  t.equal(fs.statSync(own).mode & 0o777, 0o700, 'the per-user dir is made 0700')
  t.equal(defaultControlPath(9001, { TMPDIR: tmp }), path.join(own, 'pool-9001.sock'),
    'no XDG_RUNTIME_DIR: the per-user dir')
  t.equal(frontPortOf({ listener: listenerOf('embedded', { port: 8080 }), workerPort: 9002 }), 8080)
  t.equal(frontPortOf({ listener: listenerOf('none', { port: 8080 }), workerPort: 9002 }), 9002)
  t.equal(frontPortOf({ listener: listenerOf('haproxy', {}), workerPort: 9102 }), 9102)
  t.equal(clientControlPath({ control: 'rel.sock', frontPort: 1 }), path.resolve('rel.sock'), '--control wins')
  // A pool started without XDG_RUNTIME_DIR is still found from a shell that has it.
  const inTmp = path.join(own, 'pool-4321.sock')
  fs.writeFileSync(inTmp, '')
  t.equal(clientControlPath({ frontPort: 4321, env: { XDG_RUNTIME_DIR: xdg, TMPDIR: tmp } }), inTmp)
  t.equal(clientControlPath({ frontPort: 4322, env: { XDG_RUNTIME_DIR: xdg, TMPDIR: tmp } }),
    path.join(xdg, 'pool-4322.sock'), 'none: the preferred path is named')
})

t.test('formats', async (t) => {
  t.equal(formatDuration(340), '340ms')
  t.equal(formatDuration(12345), '12.3s')
  t.equal(formatDuration(185000), '3m05s')
  t.equal(formatDuration(3720000), '1h02m')
  t.equal(formatDuration(183600000), '2d03h')
  const replaced = [{ slot: 1, oldPid: 100, newPid: 200 }, { slot: 2, oldPid: 101, newPid: 201 }]
  t.equal(formatReload({ replaced, ms: 2300 }),
    'reloaded 2 workers in 2.3 s: slot 1 pid 100 → 200, slot 2 pid 101 → 201\n')
  t.equal(formatScale({ from: 4, to: 6 }), 'scaled from 4 to 6 workers\n')
  const out = formatStatus({
    pid: 1,
    app: '/srv/app.js',
    phase: 'running',
    target: 2,
    queue: 3,
    front: { type: 'embedded', url: 'http://127.0.0.1:9001' },
    workers: [
      {
        slot: 1,
        pid: 11,
        port: 9002,
        state: 'busy',
        readyAt: 1,
        uptime: 65000,
        requests: 7,
        totalRequests: 9,
        restarts: 1,
        rss: 52428800,
        request: { method: 'GET', url: '/', age: 1500 }
      },
      {
        slot: 2,
        pid: 12,
        port: 9003,
        state: 'dead',
        readyAt: null,
        uptime: 0,
        requests: 0,
        totalRequests: 4,
        restarts: 2,
        rss: null,
        request: null
      }
    ]
  })
  const lines = out.split('\n')
  t.match(lines[2], /^SLOT +PID +PORT +STATE +UPTIME +REQUESTS +TOTAL +RESTARTS +RSS MB +REQUEST$/)
  t.same(lines[3].trim().split(/\s+/), ['1', '11', '9002', 'busy', '1m05s', '7', '9', '1', '50.0', '1.5s'])
  t.same(lines[4].trim().split(/\s+/), ['2', '-', '9003', 'dead', '-', '0', '4', '2', '-', '-'],
    'a dead slot shows no pid')
  t.match(out, /\nqueue: 3\nfront: embedded http:\/\/127\.0\.0\.1:9001\n$/)
  // A TUNNELS column only once a worker has had tunnels (WebSockets).
  const worker = { slot: 1, pid: 11, port: 9002, state: 'ready', readyAt: 1, uptime: 1000, requests: 0 }
  const tunnels = { ...worker, totalRequests: 0, restarts: 0, rss: null, request: null, tunnels: 20, tunnelsOpened: 21 }
  const pool = { pid: 1, app: '/srv/app.js', phase: 'running', target: 1 }
  const withTunnels = formatStatus({ ...pool, workers: [tunnels] }).split('\n')
  t.match(withTunnels[2], /^SLOT +PID +PORT +STATE +UPTIME +REQUESTS +TOTAL +RESTARTS +RSS MB +REQUEST +TUNNELS$/)
  t.equal(withTunnels[3].trim().split(/\s+/).at(-1), '20')
  const reloading = {
    pid: 1,
    app: '/srv/app.js',
    phase: 'running',
    target: 1,
    workers: [],
    reload: { stage: 'rolling', replaced: 1, pending: 2, active: [3], queued: 0 }
  }
  t.match(formatStatus(reloading), /\nreload: rolling, 1 replaced, 2 pending, replacing slot 3\n/)
  t.match(formatStatus({ ...reloading, reload: { ...reloading.reload, queued: 3 } }),
    /\nreload: rolling, 1 replaced, 2 pending, replacing slot 3; another follows \(asked 3 times\)\n/,
    'reloads merged into the next one')
})
