'use strict'
// `pool status --watch`: the table refreshed in place with CPU% and REQ/S per worker, ending on
// Ctrl-C (exit 0) or when the pool goes away (one line, exit 1); and the text `pool status` of a
// pool driving HAProxy, with each server's wanted state, HAProxy's state and its sessions.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const {
  BIN, FIXTURES, cleanEnv, freePorts, startPool, runPool, request, sleep, waitFor, tempDir
} = require('../helpers')
const { formatStatus, rates } = require('../../lib/control/format')
const { Screen } = require('../../lib/cli/output')
const { HaproxyFront } = require('../../lib/fronts/haproxy/front')
const { resolveHaproxyFrontOptions } = require('../../lib/fronts/haproxy/options')

const worker = (fields) => ({
  name: `worker${fields.slot}`,
  port: 9001 + fields.slot,
  state: 'ready',
  readyAt: 1,
  uptime: 5000,
  requests: 0,
  totalRequests: 0,
  restarts: 0,
  rss: null,
  request: null,
  ...fields
})
const status = (workers, front = { type: 'none' }) => ({
  pid: 1,
  phase: 'running',
  target: workers.length,
  app: '/app.js',
  queue: 0,
  front,
  workers
})

// The cells of slot `slot`'s row in a table printed by formatStatus, by column title.
function row (text, slot) {
  const lines = text.split('\n')
  const head = lines.findIndex((l) => l.startsWith('SLOT'))
  const titles = lines[head].replace('RSS MB', 'RSS_MB').trim().split(/\s+/)
  const cells = lines.slice(head + 1).map((l) => l.trim().split(/\s+/)).find((c) => c[0] === String(slot))
  return cells && Object.fromEntries(titles.map((title, i) => [title, cells[i]]))
}

t.test('REQ/S and CPU% come from two successive answers, for the same process only', async (t) => {
  const before = {
    at: 10000,
    status: status([worker({ slot: 1, pid: 11, requests: 10, cpu: { user: 2e6, system: 1e6 } }),
      worker({ slot: 2, pid: 12, requests: 5 }), worker({ slot: 3, pid: 13, requests: 7 })])
  }
  const after = {
    at: 12000,
    status: status([worker({ slot: 1, pid: 11, requests: 30, cpu: { user: 2.8e6, system: 1.2e6 } }),
      worker({ slot: 2, pid: 12, requests: 5 }), worker({ slot: 3, pid: 99, requests: 1 })])
  }
  const r = rates(before, after)
  t.same(r.get(1), { rps: 10, cpu: 50 }, '20 requests and 1 s of CPU in 2 s: 10 req/s, 50%')
  t.same(r.get(2), { rps: 0, cpu: undefined }, 'no CPU time reported: no CPU%')
  t.notOk(r.has(3), 'slot 3 has a new process: nothing to compare')
  t.equal(rates(null, after).size, 0, 'the first answer has no rates')
  const measured = rates(
    { at: 0, status: status([worker({ slot: 1, pid: 11, cpu: { user: 0, system: 0, at: 500 } })]) },
    { at: 5000, status: status([worker({ slot: 1, pid: 11, cpu: { user: 250000, system: 0, at: 1000 } })]) })
  t.equal(measured.get(1).cpu, 50, 'the measurement\'s own clock (cpu.at) when the pool gives it')

  const text = formatStatus(after.status, { rates: r })
  t.match(row(text, 1), { 'CPU%': '50', 'REQ/S': '10', REQUESTS: '30' })
  t.match(row(text, 2), { 'CPU%': '-', 'REQ/S': '0.0' })
  t.match(row(text, 3), { 'CPU%': '-', 'REQ/S': '-' })
  t.notMatch(formatStatus(after.status), /CPU%|REQ\/S/, 'plain `pool status` has no rate columns')
})

t.test('the screen is redrawn in place: home, clear to end of line and of screen, never a full clear', async (t) => {
  let written = ''
  const out = { columns: 12, rows: 4, write: (s) => { written += s } }
  const screen = new Screen(out)
  t.equal(written, '\x1b[?1049h\x1b[?25l', 'the alternate screen, cursor hidden')
  written = ''
  screen.draw('first line is long\nsecond\nthird\nfourth\n')
  t.equal(written, '\x1b[Hfirst line i\x1b[K\nsecond\x1b[K\nthird\x1b[K\x1b[J',
    'cut to 12 columns and 3 rows (the last row stays free)')
  written = ''
  screen.leave()
  screen.leave()
  t.equal(written, '\x1b[?25h\x1b[?1049l', 'cursor and the user\'s screen back, once')
})

t.test('the text status of a HAProxy front shows each server\'s wanted state, ' +
  'HAProxy\'s and its sessions', async (t) => {
  // The front's own status(), as it knows HAProxy after a check.
  const haproxy = new HaproxyFront(resolveHaproxyFrontOptions({ haproxySocket: '/run/pool/haproxy-admin.sock' }))
  Object.assign(haproxy.states, { reachable: true, haproxy: { pid: 77 } })
  Object.assign(haproxy.states.record('worker1'), { wanted: 'ready', seen: 'ready', op: 'running', sessions: 1 })
  Object.assign(haproxy.states.record('worker2'), { wanted: 'maint', seen: 'drain', op: 'stopped', sessions: 0 })
  const front = haproxy.status()
  const text = formatStatus(status([worker({ slot: 1, pid: 11, state: 'busy' }),
    worker({ slot: 2, pid: 12, state: 'draining' })], front))
  t.match(row(text, 1), { WANTED: 'ready', HAPROXY: 'ready', SESS: '1' })
  t.match(text, /^ +2 .* maint +drain \(down\) +0$/m,
    'HAProxy\'s state with its health, when they differ from the wanted one')
  t.match(text, /front: haproxy backend pool via \/run\/pool\/haproxy-admin\.sock \(HAProxy pid 77\)/)
})

// `command ARGS` as a child whose output the test reads as it comes.
function spawnChild (command, args) {
  const child = spawn(command, args, { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  child.out = ''
  child.err = ''
  child.stdout.on('data', (d) => { child.out += d })
  child.stderr.on('data', (d) => { child.err += d })
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  return child
}

const HAS_SCRIPT = spawnSync('script', ['--version']).status === 0

t.test('pool status --watch against a running pool', async (t) => {
  const ports = await freePorts(2)
  const pool = startPool(['start', path.join(FIXTURES, 'handler.js'), '-n', '2', '--worker-port', String(ports[0]),
    '--balancer', 'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  const { supervisorPid } = await pool.waitLog((l) => l.event === 'starting')
  await pool.waitLog((l) => l.event === 'started')
  const target = ['--port', String(ports[0]), '--interval', '200ms']
  const watchers = []
  const watchArgs = [BIN, 'status', '--watch', ...target]
  const watch = (command, args) => {
    const child = spawnChild(command, args)
    watchers.push(child)
    return child
  }
  t.teardown(() => { for (const w of watchers) if (w.exitCode === null) w.kill('SIGKILL') })

  const piped = watch(process.execPath, watchArgs)
  const interrupted = watch(process.execPath, watchArgs)
  // On a terminal: `script` gives the command a pseudo-terminal and copies what it draws.
  const tty = HAS_SCRIPT ? watch('script', ['-qfec', [process.execPath, ...watchArgs].join(' '), '/dev/null']) : null

  // Traffic for worker 1 while the frames come: 20 requests, 25 ms apart.
  await waitFor(() => piped.out.includes('REQ/S'), { timeout: 10000, what: 'a first table' })
  for (let i = 0; i < 20; i++) {
    await request(`http://127.0.0.1:${ports[0]}/`)
    await sleep(25)
  }
  await waitFor(() => piped.out.split('\nSLOT').length > 5, { timeout: 10000, what: 'five tables' })

  interrupted.kill('SIGINT')
  t.same(await interrupted.exited, { code: 0, signal: null }, 'Ctrl-C: exit 0')
  t.equal(interrupted.err, '', 'and nothing on stderr')

  const frames = piped.out.split(/^every 200ms, /m).filter(Boolean)
  t.ok(frames.every((f) => /^\d\d:\d\d:\d\d {2}pool pid \d+, running, 2\/2 workers ready/.test(f)),
    'each table under a line with the time')
  const rps = frames.map((f) => row(f, 1)['REQ/S']).filter((v) => v !== '-').map(Number)
  t.ok(rps.some((v) => v > 0), `worker 1's requests per second seen: ${rps.join(' ')}`)
  t.equal(row(frames[0], 1)['REQ/S'], '-', 'none in the first table, with nothing to compare to')
  t.ok(frames.every((f) => /^(-|\d+(\.\d)?)$/.test(row(f, 1)['CPU%'])),
    'CPU% a number, or - while the pool does not report CPU time')
  t.notMatch(piped.out, /\x1b/, 'piped: plain text, no terminal codes')

  t.equal((await runPool(['stop', '--port', String(ports[0])])).code, 0)
  const gone = await piped.exited
  t.equal(gone.code, 1, 'the pool went away: exit 1')
  t.match(piped.err, new RegExp(`^pool: pool pid ${supervisorPid} went away: no pool is running on control socket `))
  t.equal(piped.err.split('\n').length, 2, `one line: ${piped.err}`)

  if (tty) {
    await tty.exited
    const screen = tty.out
    t.ok(screen.startsWith('\x1b[?1049h\x1b[?25l\x1b[H'), 'the alternate screen, drawn from the top')
    t.ok(screen.split('\x1b[H').length > 3, 'redrawn from the top, several times')
    t.notOk(screen.includes('\x1b[2J'), 'never a full clear')
    t.match(screen, /\x1b\[\?25h\x1b\[\?1049l[^\x1b]*pool: pool pid \d+ went away/,
      'the user\'s screen back, then the one line')
  } else {
    t.comment('no `script` here: the terminal drawing is only tested with a fake screen')
  }
})

t.test('pool status --watch: a pool that takes the connection and hangs up unanswered as it goes is reported gone, ' +
  'as a pool already gone is', async (t) => {
  // As a pool closing its control socket at the end of a stop can: the watch asks again before
  // it tells, and what it tells does not depend on which of the two moments its request met.
  const ports = await freePorts(1)
  const dir = tempDir(t, 'pool-watch-gone-')
  const control = path.join(dir, 'pool.sock')
  const pool = startPool(['start', path.join(FIXTURES, 'handler.js'), '-n', '1', '--worker-port', String(ports[0]),
    '--balancer', 'none', '--control', control])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((r) => r.event === 'started')
  // The socket the watch is given: its first two connections reach the pool; the third is
  // taken and closed unanswered, and the socket goes with it.
  const front = path.join(dir, 'front.sock')
  let connections = 0
  const server = require('node:net').createServer((client) => {
    if (++connections > 2) {
      client.destroy()
      server.close()
      return
    }
    const upstream = require('node:net').connect(control)
    client.pipe(upstream).pipe(client)
    upstream.on('error', () => client.destroy())
    client.on('error', () => upstream.destroy())
  })
  await new Promise((resolve) => server.listen(front, resolve))
  t.teardown(() => server.close())
  const watcher = spawnChild(process.execPath, [BIN, 'status', '--watch', '--interval', '100ms', '--control', front])
  t.teardown(() => { if (watcher.exitCode === null) watcher.kill('SIGKILL') })
  const gone = await watcher.exited
  t.equal(gone.code, 1, 'exit 1')
  t.match(watcher.err, /^pool: pool pid \d+ went away: no pool is running on control socket /,
    'gone, as a pool whose socket is gone is')
  t.equal(watcher.err.split('\n').length, 2, `one line: ${watcher.err}`)
  t.equal(connections, 3, 'it asked twice, then met the unanswered connection')
})

t.test('--watch with no pool fails as pool status does; --interval alone or too short is refused', async (t) => {
  const [port] = await freePorts(1)
  const none = await runPool(['status', '--watch', '--port', String(port)])
  t.equal(none.code, 2)
  t.match(none.stderr, /^pool: no pool is running on control socket .*\n$/)
  const alone = await runPool(['status', '--interval', '2s', '--port', String(port)])
  t.equal(alone.code, 2)
  t.equal(alone.stderr, 'pool: --interval goes with --watch\n')
  const short = await runPool(['status', '--watch', '--interval', '10ms', '--port', String(port)])
  t.equal(short.code, 2)
  t.equal(short.stderr, 'pool: --interval must be at least 100ms (got 10ms)\n')
})

t.test('real HAProxy: pool status shows the servers\' wanted and HAProxy states and sessions', async (t) => {
  const { startLabHaproxy, startHaproxyPool, allUp } = require('../helpers/haproxy-pool')
  const lab = await startLabHaproxy(t, { workers: 2 })
  await startHaproxyPool(t, lab, { workers: 2 })
  await waitFor(allUp(lab.client), { timeout: 5000, what: 'both servers UP' })
  const control = ['--control', path.join(lab.dir, 'control.sock')]
  // The pool reads HAProxy's states at its next check (every 2 s).
  const text = await waitFor(async () => {
    const r = await runPool(['status', ...control])
    return /^ +2 .* ready +ready +0$/m.test(r.stdout) && r.stdout
  }, { timeout: 8000, interval: 250, what: 'HAProxy\'s states in pool status' })
  t.match(row(text, 1), { STATE: 'ready', WANTED: 'ready', HAPROXY: 'ready', SESS: '0' })
  t.match(row(text, 2), { WANTED: 'ready', HAPROXY: 'ready', SESS: '0' })
  t.match(text,
    new RegExp(`front: haproxy backend pool via ${lab.socket.replace(/[.]/g, '\\.')} \\(HAProxy pid \\d+\\)`))
  t.ok(fs.existsSync(lab.socket))
})
