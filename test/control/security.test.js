'use strict'
// The control socket against other local users and misbehaving clients: where the default
// socket lives (never a shared directory), whose socket a server or client trusts (its own
// user's only), and what one connection can cost the pool (a half-written line, a huge line,
// a client that never reads, many connections).
const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { ControlServer, createControlServer } = require('../../lib/control/server')
const { sendCommand } = require('../../lib/control/client')
const { defaultControlPath, clientControlPath, describeUser } = require('../../lib/control/path')
const { MAX_LINE } = require('../../lib/control/protocol')
const { codes } = require('../../lib/errors')
const { exitCodeOf } = require('../../lib/cli/exit-codes')
const { FIXTURES, freePorts, startPool, runPool, waitFor, isAlive, tempDir } = require('../helpers')

const NOBODY = 65534
const ME = process.geteuid()
const myName = `user ${os.userInfo().username} (uid ${ME})`
// "Another user's file" without root: the file is the test's own, and the code under test is
// told it runs as OTHER (the `uid` option of lib/control; a `pool` CLI child believes it through
// test/fixtures/as-uid.js). Only the last case, as root, chowns files to a real other user.
const OTHER = ME === NOBODY ? NOBODY - 1 : NOBODY
const otherName = describeUser(OTHER)
const asOther = { NODE_OPTIONS: `--require ${path.join(FIXTURES, 'as-uid.js')}`, POOL_TEST_EUID: String(OTHER) }
const asRoot = ME === 0
  ? {}
  : { skip: 'needs root, to chown files to another user (the cases above make them foreign without root)' }

// A process on `socketPath` that answers every line the way a pool answers a clean `stop`: a
// client that talks to it would believe it. Counts its connections. `owner`: chown the socket
// to this uid (root only).
async function impostor (t, socketPath, { owner } = {}) {
  const sockets = new Set()
  const fake = { connections: 0 }
  const server = net.createServer((socket) => {
    fake.connections++
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    socket.on('data', () => socket.write('{"id":1,"ok":true,"result":{"clean":true,"pid":1}}\n'))
  })
  await new Promise((resolve) => server.listen(socketPath, resolve))
  if (owner !== undefined) fs.chownSync(socketPath, owner, owner)
  t.teardown(() => { for (const s of sockets) s.destroy(); return new Promise((resolve) => server.close(resolve)) })
  return fake
}

// A socket file with nobody listening (what a dead pool leaves).
async function deadSocket (socketPath) {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(socketPath, resolve))
  const keep = socketPath + '.keep'
  fs.linkSync(socketPath, keep) // close() unlinks the path; the inode survives under this name
  await new Promise((resolve) => server.close(resolve))
  fs.renameSync(keep, socketPath)
}

function fakePool (overrides = {}) {
  return {
    phase: 'running',
    status: () => ({ pid: process.pid, phase: 'running', target: 1, front: { type: 'none' }, queue: 0, workers: [] }),
    reload: async () => ({ replaced: [], ms: 1 }),
    scale: async (n) => ({ from: 1, to: n }),
    stop: async () => ({ clean: true }),
    ...overrides
  }
}

async function serve (t, pool, options = {}) {
  const server = await createControlServer({ path: path.join(tempDir(t), 'c.sock'), pool, ...options })
  t.teardown(() => server.close())
  return server
}

// A raw protocol connection: lines in, parsed lines out, and how it ended.
function rawClient (t, socketPath, { allowHalfOpen = false } = {}) {
  const socket = net.connect({ path: socketPath, allowHalfOpen })
  t.teardown(() => socket.destroy())
  const client = { socket, replies: [], ended: false, isClosed: false, error: null }
  let buf = ''
  socket.setEncoding('utf8')
  socket.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      client.replies.push(JSON.parse(buf.slice(0, i)))
      buf = buf.slice(i + 1)
    }
  })
  socket.on('end', () => { client.ended = true })
  socket.on('error', (err) => { client.error = err })
  client.connected = new Promise((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject) })
  socket.on('close', () => { client.isClosed = true })
  return client
}

const envWithoutXdg = (tmp) => ({ XDG_RUNTIME_DIR: undefined, TMPDIR: tmp })

const tryIt = (fn) => { try { return fn() } catch (e) { return e } }

t.test('a socket planted where pool used to put it (TMPDIR/pool-PORT.sock) changes nothing', async (t) => {
  const tmp = tempDir(t)
  const env = envWithoutXdg(tmp)
  const [port] = await freePorts(1)
  // Another user's, as root. As anyone else it is the test's own: a harder case, since then no
  // ownership check keeps the pool off it, only where the pool looks.
  const fake = await impostor(t, path.join(tmp, `pool-${port}.sock`), { owner: ME === 0 ? NOBODY : undefined })

  const child = startPool(['start', path.join(FIXTURES, 'handler.js'), '-n', '1', '--balancer', 'none', '--worker-port',
    String(port), '--log-format', 'json'], { env })
  t.teardown(() => child.stop())
  await child.waitLog((l) => l.event === 'started')
  const own = path.join(tmp, `pool-${ME}`)
  const socketPath = path.join(own, `pool-${port}.sock`)
  t.equal(child.logs.find((l) => l.event === 'control-listening').path, socketPath, 'the socket is in TMPDIR/pool-UID')
  t.equal(fs.statSync(own).mode & 0o777, 0o700, 'which was made 0700')

  // Found from the same environment, and from a shell that has an XDG_RUNTIME_DIR.
  const status = await runPool(['status', '--json', '--port', String(port)], { env })
  t.equal(status.code, 0, status.stderr)
  t.equal(JSON.parse(status.stdout).pid, child.pid)
  const fromShell = await runPool(['status', '--json', '--port', String(port)],
    { env: { TMPDIR: tmp, XDG_RUNTIME_DIR: tempDir(t) } })
  t.equal(JSON.parse(fromShell.stdout).pid, child.pid, 'the second directory is looked in too')
  // A wrong --port names this pool, not the impostor.
  const wrong = await runPool(['status', '--port', '1'], { env })
  t.equal(wrong.code, 2)
  t.equal(wrong.stderr,
    `pool: no pool is running on control socket ${path.join(own, 'pool-1.sock')} (found ${socketPath}: ` +
      `use --port ${port})\n`)

  const stop = await runPool(['stop', '--port', String(port)], { env })
  t.equal(stop.code, 0, stop.stderr)
  t.equal(stop.stdout, 'stopped (clean)\n')
  t.same(await child.exited, { code: 0, signal: null }, 'the real pool is the one that stopped')
  t.equal(fake.connections, 0, 'the impostor was never talked to')
})

t.test('the client refuses another user\'s socket, says whose it is, and never connects', async (t) => {
  const socketPath = path.join(tempDir(t), 'pool.sock')
  const fake = await impostor(t, socketPath)
  const expected = `control socket ${socketPath} belongs to ${myName}, not to ${otherName}; refusing to talk to it: ` +
    `run the command as the user the pool runs as (sudo -u ${os.userInfo().username} pool ...)`

  const err = await sendCommand(socketPath, 'stop', {}, { waitForClose: true, uid: OTHER }).catch((e) => e)
  t.equal(err.code, codes.CONTROL_UNREACHABLE)
  t.equal(exitCodeOf(err), 2)
  t.equal(err.details.reason, 'foreign')
  t.equal(err.message, expected)

  for (const cmd of [['stop'], ['status'], ['reload'], ['scale', '3']]) {
    const r = await runPool([...cmd, '--control', socketPath], { env: asOther })
    t.equal(r.code, 2, `${cmd[0]}: exit 2`)
    t.equal(r.stdout, '', `${cmd[0]}: prints no result`)
    t.equal(r.stderr, `pool: ${expected}\n`)
  }
  t.equal(fake.connections, 0, 'no connection was made')
})

t.test('pool start never probes nor removes another user\'s socket', async (t) => {
  const dir = tempDir(t)
  const live = path.join(dir, 'live.sock')
  const fake = await impostor(t, live)
  const err = await createControlServer({ path: live, pool: fakePool(), uid: OTHER }).catch((e) => e)
  t.equal(err.code, codes.CONTROL_IN_USE)
  t.equal(exitCodeOf(err), 2)
  t.equal(err.message,
    `control socket ${live} belongs to ${myName}; refusing to use or replace another user's socket: ` +
      'choose another --control path')
  t.equal(fake.connections, 0, 'not probed')

  // Nobody listening: a stale socket of ours would be replaced, another user's is left alone.
  const dead = path.join(dir, 'dead.sock')
  await deadSocket(dead)
  const ino = fs.statSync(dead).ino
  const err2 = await new ControlServer({ path: dead, pool: fakePool(), uid: OTHER }).listen().catch((e) => e)
  t.equal(err2.code, codes.CONTROL_IN_USE)
  t.match(err2.message, /refusing to use or replace another user's socket/)
  t.equal(fs.statSync(dead).ino, ino, 'the file is still there')
  // The same file, ours: it is replaced.
  const server = await createControlServer({ path: dead, pool: fakePool() })
  t.teardown(() => server.close())
  t.not(fs.statSync(dead).ino, ino, 'our own stale socket is replaced')
})

t.test('TMPDIR/pool-UID is refused unless it is a real directory of ours with mode 0700', async (t) => {
  const cases = [
    ['group and others may read it', ME, (dir) => fs.mkdirSync(dir, { mode: 0o755 }),
      'has mode 0755: group or others may use it (it must be 0700)'],
    ['another user owns it', OTHER, (dir) => fs.mkdirSync(dir, { mode: 0o700 }),
      `is owned by ${myName}, not by ${otherName}`],
    ['a symlink to a private dir', ME,
      (dir, tmp) => {
        fs.mkdirSync(path.join(tmp, 'elsewhere'), { mode: 0o700 })
        fs.symlinkSync(path.join(tmp, 'elsewhere'), dir)
      }, 'is a symbolic link'],
    ['a file', ME, (dir) => fs.writeFileSync(dir, ''), 'is not a directory']
  ]
  for (const [what, uid, make, problem] of cases) {
    const tmp = tempDir(t)
    const own = path.join(tmp, `pool-${uid}`)
    make(own, tmp)
    const message = `control socket directory ${own} ${problem}; refusing to use it (remove it, or pass --control PATH)`
    const env = { TMPDIR: tmp }
    const forStart = tryIt(() => defaultControlPath(9001, env, uid))
    t.equal(forStart.code, codes.BAD_OPTION, `${what}: pool start refuses`)
    t.equal(exitCodeOf(forStart), 2)
    t.equal(forStart.message, message)
    const forClient = tryIt(() => clientControlPath({ frontPort: 9001, env, uid }))
    t.equal(forClient.message, message, `${what}: the commands refuse`)
  }
  const tmp = tempDir(t)
  t.equal(defaultControlPath(9001, { TMPDIR: tmp }), path.join(tmp, `pool-${ME}`, 'pool-9001.sock'),
    'made when missing, and used')
})

t.test('pool start and pool status with a bad TMPDIR/pool-UID: one line, exit 2', async (t) => {
  const tmp = tempDir(t)
  const own = path.join(tmp, `pool-${OTHER}`)
  fs.mkdirSync(own, { mode: 0o700 }) // ours, so not the pool's: it runs as OTHER
  const env = { ...envWithoutXdg(tmp), ...asOther }
  const expected = `pool: control socket directory ${own} is owned by ${myName}, ` +
    `not by ${otherName}; refusing to use it (remove it, or pass --control PATH)\n`
  const [port] = await freePorts(1)
  const start = await runPool(['start', path.join(FIXTURES, 'handler.js'), '-n', '1', '--balancer', 'none',
    '--worker-port', String(port), '--log-format', 'json'], { env, timeout: 15000 })
  t.equal(start.code, 2)
  t.equal(start.stderr, expected)
  t.notMatch(start.stdout, /"event":"spawn"/, 'no worker was started')
  const status = await runPool(['status', '--port', String(port)], { env })
  t.equal(status.code, 2)
  t.equal(status.stderr, expected)
  t.same(fs.readdirSync(own), [], 'nothing was created in it')
})

t.test('an XDG_RUNTIME_DIR others may write to, or not ours, is passed over for TMPDIR/pool-UID', async (t) => {
  const tmp = tempDir(t)
  const open = tempDir(t)
  fs.chmodSync(open, 0o777)
  t.equal(defaultControlPath(9001, { XDG_RUNTIME_DIR: open, TMPDIR: tmp }),
    path.join(tmp, `pool-${ME}`, 'pool-9001.sock'), 'mode 0777')
  const mine = tempDir(t)
  t.equal(defaultControlPath(9001, { XDG_RUNTIME_DIR: mine, TMPDIR: tmp }), path.join(mine, 'pool-9001.sock'),
    'ours, 0700: used')
  const env = { XDG_RUNTIME_DIR: mine, TMPDIR: tmp }
  t.equal(clientControlPath({ frontPort: 9001, env, uid: OTHER }), path.join(tmp, `pool-${OTHER}`, 'pool-9001.sock'),
    'another user\'s: passed over')
  t.equal(clientControlPath({ frontPort: 9001, env }), path.join(mine, 'pool-9001.sock'),
    'the same directory, ours: used')
})

t.test('as root, with files really owned by another user: the same refusals', asRoot, async (t) => {
  const tmp = tempDir(t)
  const socketPath = path.join(tmp, 'pool.sock')
  const fake = await impostor(t, socketPath, { owner: NOBODY })
  const stop = await runPool(['stop', '--control', socketPath])
  t.equal(stop.code, 2)
  t.equal(stop.stderr,
    `pool: control socket ${socketPath} belongs to user nobody (uid ${NOBODY}), ` +
      'not to ' +
      `${myName}; refusing to talk to it: run the command as the user the pool runs as (sudo -u nobody pool ...)\n`)
  t.equal(fake.connections, 0, 'the client never connected')
  const err = await createControlServer({ path: socketPath, pool: fakePool() }).catch((e) => e)
  t.equal(err.code, codes.CONTROL_IN_USE, 'pool start refuses it')
  t.equal(fake.connections, 0, 'without probing it')

  const own = path.join(tmp, `pool-${ME}`)
  fs.mkdirSync(own, { mode: 0o700 })
  fs.chownSync(own, NOBODY, NOBODY)
  const status = await runPool(['status', '--port', '9001'], { env: envWithoutXdg(tmp) })
  t.equal(status.code, 2)
  t.equal(status.stderr,
    `pool: control socket directory ${own} is owned by user nobody (uid ${NOBODY}), ` +
      `not by ${myName}; refusing to use it (remove it, or pass --control PATH)\n`)

  const theirs = tempDir(t)
  fs.chownSync(theirs, NOBODY, NOBODY)
  const tmp2 = tempDir(t)
  t.equal(defaultControlPath(9001, { XDG_RUNTIME_DIR: theirs, TMPDIR: tmp2 }),
    path.join(tmp2, `pool-${ME}`, 'pool-9001.sock'), 'an XDG_RUNTIME_DIR owned by nobody is passed over')
})

t.test('a half-written line is cut after the idle timeout; others are served, a long reload is not cut', async (t) => {
  let finishReload
  let reloadStarted
  const started = new Promise((resolve) => { reloadStarted = resolve })
  const server = await serve(t,
    fakePool({ reload: () => { reloadStarted(); return new Promise((resolve) => { finishReload = resolve }) } }),
    { connection: { idleTimeout: 200 } })

  // A connects first and waits for a reload: its idle timer, had it kept running, would fire
  // before B's.
  const a = rawClient(t, server.path)
  a.socket.write('{"id":"r","command":"reload"}\n')
  await started
  const b = rawClient(t, server.path)
  b.socket.write('{"id":1,"comm')
  await waitFor(() => b.isClosed, { what: 'the pool to close B' })
  t.ok(b.ended, 'the pool closed B')
  t.same(b.replies,
    [{
      id: null,
      ok: false,
      error: {
        code: codes.BAD_OPTION,
        message: 'bad control request: no complete request line within 200 ms; closing the connection'
      }
    }], 'after saying why')

  t.same(await sendCommand(server.path, 'ping'), { pid: process.pid, phase: 'running' }, 'a new connection is served')
  finishReload({ replaced: [], ms: 9 })
  await waitFor(() => a.replies.length === 1, { what: 'the reload answer on A' })
  t.same(a.replies[0], { id: 'r', ok: true, result: { replaced: [], ms: 9 } }, 'A was kept open for its reload')
})

t.test('a line longer than the limit: one error, then the pool stops reading and hangs up', async (t) => {
  const server = await serve(t, fakePool())
  const c = rawClient(t, server.path, { allowHalfOpen: true })
  await c.connected
  c.socket.write('x'.repeat(MAX_LINE + 1))
  await waitFor(() => c.ended, { what: 'the pool to hang up' })
  t.same(c.replies,
    [{
      id: null,
      ok: false,
      error: { code: codes.BAD_OPTION, message: `bad control request: a line longer than ${MAX_LINE} characters` }
    }])
  // Our side is still open: more bytes find nobody reading them.
  c.socket.end('y'.repeat(65536))
  await waitFor(() => c.isClosed, { what: 'the connection to close' })
  t.ok(c.error && ['EPIPE', 'ECONNRESET'].includes(c.error.code), `writing after the hang-up fails (${c.error?.code})`)
  t.same(await sendCommand(server.path, 'ping'), { pid: process.pid, phase: 'running' }, 'others are served')
})

t.test('a client that sends requests and never reads costs a bounded amount, then is cut', async (t) => {
  let statusCalls = 0
  const big = 'x'.repeat(64 * 1024) // a status the size of a big pool's
  const server = await serve(t, fakePool({ status: () => { statusCalls++; return { big } } }),
    { connection: { idleTimeout: 300 } })
  const c = rawClient(t, server.path)
  await c.connected
  c.socket.pause() // never reads
  c.socket.write('{"id":1,"command":"status"}\n'.repeat(500))
  await waitFor(() => statusCalls > 0, { what: 'the first status' })
  const connections = () => new Promise((resolve, reject) => {
    server.server.getConnections((err, n) => err ? reject(err) : resolve(n))
  })
  const cut = await waitFor(async () => (await connections()) === 0, { what: 'the pool to cut the client' })
    .then(() => true, () => false)
  t.ok(cut, 'the pool cut the client')
  t.ok(statusCalls < 50,
    `only what the client could take was run (${statusCalls} of 500 statuses, not 32 MB of answers)`)
  t.same(await sendCommand(server.path, 'ping'), { pid: process.pid, phase: 'running' }, 'others are served')
})

t.test('what cannot be echoed or encoded becomes an error answer, not a crash of the pool', async (t) => {
  const circular = {}
  circular.self = circular
  const server = await serve(t, fakePool({ status: () => circular }))
  const deep = (n) => '['.repeat(n) + ']'.repeat(n) // parses; JSON.stringify overflows the stack on it
  const c = rawClient(t, server.path)
  c.socket.write(`{"id":${deep(200000)},"command":"ping"}\n`)
  c.socket.write(`{"id":2,"command":${deep(200000)}}\n`)
  c.socket.write('{"id":3,"command":"status"}\n')
  await waitFor(() => c.replies.length === 3, { what: 'three answers' })
  const byId = (id) => c.replies.find((r) => r.id === id)
  t.same(byId(null),
    {
      id: null,
      ok: false,
      error: { code: codes.BAD_OPTION, message: 'bad control request: id must be a string, a number or null' }
    }, 'a nested id')
  t.same(byId(2),
    {
      id: 2,
      ok: false,
      error: {
        code: codes.BAD_OPTION,
        message: 'bad control request: unknown command of type array (known: status, reload, scale, recycle, stop, ' +
          'ping)'
      }
    }, 'a nested command')
  t.equal(byId(3).ok, false, 'a result that is not JSON')
  t.equal(byId(3).error.code, 'POOL_E_INTERNAL')
  t.match(byId(3).error.message, /circular/i)
  t.same(await sendCommand(server.path, 'ping'), { pid: process.pid, phase: 'running' }, 'the pool still answers')
})

t.test('pipelined requests are all answered in turn, also after the client shuts its side', async (t) => {
  const server = await serve(t, fakePool())
  const c = rawClient(t, server.path, { allowHalfOpen: true })
  const lines = Array.from({ length: 300 },
    (_, i) => JSON.stringify({ id: i, command: i % 2 ? 'status' : 'ping' }) + '\n')
  c.socket.end(lines.join(''))
  await waitFor(() => c.isClosed, { what: 'the pool to hang up' })
  t.ok(c.ended, 'the pool hung up after the last answer')
  t.equal(c.replies.length, 300)
  t.same(c.replies.map((r) => r.id).sort((x, y) => x - y), lines.map((_, i) => i), 'every id answered once')
  t.ok(c.replies.every((r) => r.ok), 'all ok')
})

t.test('many connections cannot take the file descriptors the pool ' +
  'needs', { skip: hasPrlimit() ? false : 'needs prlimit(1)' }, async (t) => {
  // A pool process with few file descriptors; its `status` opens 10 files, as a pool needs
  // descriptors for its own work (a worker's pipes, a balancer's sockets).
  const socketPath = path.join(tempDir(t), 'c.sock')
  const script = `
    const fs = require('node:fs')
    const { createControlServer } = require(${JSON.stringify(path.join(__dirname, '..', '..', 'lib', 'control',
      'server'))})
    const status = () => {
      const fds = []
      try {
        for (let i = 0; i < 10; i++) fds.push(fs.openSync('/dev/null', 'r'))
        return { opened: fds.length }
      } finally {
        fds.forEach((fd) => fs.closeSync(fd))
      }
    }
    createControlServer({ path: process.argv[1], maxConnections: 8, pool: { phase: 'running', status } })
      .then(() => console.log('listening'))`
  const child = spawn('prlimit', ['--nofile=64:64', process.execPath, '-e', script, socketPath],
    { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  t.teardown(() => { child.kill('SIGKILL'); return exited })
  await new Promise((resolve, reject) => {
    child.stdout.once('data', resolve)
    child.once('exit', () => reject(new Error('the server exited')))
  })

  // 80 connections, each pinged in turn and kept open: those past the limit are closed.
  const clients = []
  for (let i = 0; i < 80; i++) {
    const c = rawClient(t, socketPath)
    clients.push(c)
    c.socket.write(`{"id":${i},"command":"ping"}\n`)
    await waitFor(() => c.replies.length === 1 || c.isClosed, { what: `ping ${i} answered or refused` })
  }
  const served = clients.filter((c) => c.replies.length === 1)
  t.equal(served.length, 8, 'as many as the limit were served')
  served[0].socket.write('{"id":"s","command":"status"}\n')
  await waitFor(() => served[0].replies.length === 2, { what: 'the status answer' })
  t.same(served[0].replies[1], { id: 's', ok: true, result: { opened: 10 } }, 'the pool can still open files')
  t.ok(isAlive(child.pid), 'and runs')
})

function hasPrlimit () {
  return spawnSync('prlimit', ['--version']).status === 0
}
