'use strict'
// `pool status|reload|scale|stop` and the control signals against real pools, over a control
// socket in a fresh temp dir.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const {
  FIXTURES, freePorts, request, startPool, runPool, poolStatus, waitFor, isAlive, canBind, tempDir
} = require('../helpers')
const { sendCommand } = require('../../lib/control/client')

// A started pool with its control socket. `embedded` puts the balancer on the first port.
// With `xdg`, no --control: the default path, in that directory as $XDG_RUNTIME_DIR.
async function pool (t, {
  workers = 2,
  app = path.join(FIXTURES, 'control.js'),
  embedded = false,
  args = [],
  dir = tempDir(t),
  xdg = null
} = {}) {
  const ports = await freePorts(workers + 3)
  const control = xdg ? null : path.join(dir, 'pool.sock')
  const front = embedded
    ? ['--port', String(ports[1]), '--stats-port', String(ports[0]), '--worker-port', String(ports[2])]
    : ['--balancer', 'none', '--worker-port', String(ports[2])]
  const child = startPool(['start', app, '-n', String(workers), ...(control ? ['--control', control] : []),
    '--log-format', 'json', '--heartbeat-interval', '200ms', ...front, ...args],
  { env: xdg ? { XDG_RUNTIME_DIR: xdg } : {} })
  t.teardown(() => child.stop())
  await child.waitLog((l) => l.event === 'started')
  return { child, control, frontUrl: `http://127.0.0.1:${ports[1]}`, workerPort: ports[2], ports }
}

const cli = (args, opts) => runPool(args, { timeout: 60000, ...opts })

const statusJson = (control) => poolStatus(['--control', control])

const pids = (s) => s.workers.map((w) => w.pid)

t.test('pool status: a row per slot with every field, then the queue and the front', async (t) => {
  const p = await pool(t, { workers: 2, embedded: true })
  await request(`${p.frontUrl}/`) // slot 1 has served one request
  const busy = request(`${p.frontUrl}/wait?ms=6000`) // ...and now runs one, past the CLI calls below
  t.teardown(() => busy.catch(() => {}))
  const before = await statusJson(p.control)
  // What the table shows known: the running request, every RSS, the finished request counted.
  await waitFor(async () => {
    const { workers } = await statusJson(p.control)
    return workers.some((w) => w.state === 'busy' && w.request) && workers.every((w) => w.rss) &&
      workers.reduce((n, w) => n + (w.requests ?? 0), 0) === 1
  }, { what: 'a busy worker, every RSS known and the finished request counted' })
  const r = await cli(['status', '--control', p.control])
  t.equal(r.code, 0)
  t.equal(r.stderr, '')
  const lines = r.stdout.split('\n')
  t.match(lines[0], new RegExp(`^pool pid ${p.child.pid}, running, \\d/2 workers ready, app .*control\\.js$`))
  t.match(lines[2], /^SLOT +PID +PORT +STATE +UPTIME +REQUESTS +TOTAL +RESTARTS +RSS MB +REQUEST$/)
  const rows = lines.slice(3, 5).map((l) => l.trim().split(/\s+/))
  const busyRow = rows.find((row) => row[3] === 'busy')
  const idleRow = rows.find((row) => row[3] === 'ready')
  t.ok(busyRow && idleRow, 'one busy and one ready slot')
  for (const [i, row] of rows.entries()) {
    t.equal(row.length, 10, `slot ${i + 1}: ten columns`)
    t.equal(row[0], String(i + 1), 'slot')
    t.equal(Number(row[1]), before.workers[i].pid, 'pid')
    t.equal(Number(row[2]), p.workerPort + i, 'port')
    t.match(row[4], /^\d+(\.\d)?(ms|s)$/, 'uptime')
    t.match(row[5], /^\d+$/, 'requests')
    t.match(row[6], /^\d+$/, 'total')
    t.equal(row[7], '0', 'restarts')
    t.match(row[8], /^\d+\.\d$/, 'RSS in MB')
  }
  t.match(busyRow[9], /^\d+(\.\d)?(ms|s)$/, 'the running request\'s age')
  t.equal(idleRow[9], '-', 'no request: -')
  t.equal(rows.reduce((n, row) => n + Number(row[5]), 0), 1,
    'the finished request is counted (the running one when it ends)')
  t.equal(rows.reduce((n, row) => n + Number(row[6]), 0), 1, 'and in the slot totals')
  t.match(r.stdout, new RegExp(`\\nqueue: \\d+\\nfront: embedded ${p.frontUrl.replace(/\./g, '\\.')}\\n$`))
  await busy
})

t.test('pool status --json: { front, queue, workers } with every field', async (t) => {
  const p = await pool(t, { workers: 2, embedded: true })
  const s = await statusJson(p.control)
  t.same(Object.keys(s).slice(0, 3), ['front', 'queue', 'workers'], 'documented keys first')
  t.equal(s.front.type, 'embedded')
  t.equal(s.front.url, p.frontUrl)
  t.equal(typeof s.queue, 'number')
  t.equal(s.pid, p.child.pid)
  t.equal(s.target, 2)
  t.equal(s.phase, 'running')
  t.equal(s.workers.length, 2)
  for (const [i, w] of s.workers.entries()) {
    t.equal(w.slot, i + 1)
    t.equal(w.port, p.workerPort + i)
    t.ok(Number.isInteger(w.pid) && isAlive(w.pid), 'a live pid')
    t.equal(w.state, 'ready')
    for (const key of ['uptime', 'requests', 'totalRequests', 'restarts']) t.equal(typeof w[key], 'number', key)
    t.ok('rss' in w, 'rss')
    t.equal(w.request, null, 'request: null when idle')
  }
})

t.test('a second pool start on the same control socket refuses; the first keeps serving', async (t) => {
  const p = await pool(t, { workers: 1, embedded: true })
  const other = await freePorts(3)
  const r = await cli(['start', path.join(FIXTURES, 'handler.js'), '-n', '1', '--control', p.control, '--log-format',
    'json',
    '--port', String(other[1]), '--stats-port', String(other[0]), '--worker-port', String(other[2])])
  t.equal(r.code, 2)
  t.equal(r.stderr, `pool: another pool is running on control socket ${p.control} (pid ${p.child.pid})\n`)
  t.notMatch(r.stdout, /"event":"spawn"/, 'no worker was started')
  for (const port of other) t.ok(await canBind(port), `port ${port} untouched`)
  t.equal((await request(`${p.frontUrl}/`)).status, 200, 'the first pool still serves')
  t.equal((await statusJson(p.control)).pid, p.child.pid, 'and still answers on its socket')
})

t.test('the control socket is mode 0600', async (t) => {
  const p = await pool(t, { workers: 1 })
  const st = fs.statSync(p.control)
  t.ok(st.isSocket())
  t.equal(st.mode & 0o777, 0o600)
})

t.test('a stale socket left by a killed pool is replaced', async (t) => {
  const dir = tempDir(t)
  const first = await pool(t, { workers: 1, dir })
  await first.child.stop('SIGKILL')
  t.ok(fs.statSync(first.control).isSocket(), 'the dead pool left its socket file')
  const second = await pool(t, { workers: 1, dir })
  t.ok(second.child.logs.some((l) => l.event === 'control-stale'), 'logged as stale')
  t.equal((await statusJson(second.control)).pid, second.child.pid)
})

t.test('pool stop: graceful, waits for the pool to exit, removes the socket', async (t) => {
  const p = await pool(t, { workers: 2 })
  const workerPids = pids(await statusJson(p.control))
  const r = await cli(['stop', '--control', p.control])
  t.equal(r.code, 0)
  t.equal(r.stdout, 'stopped (clean)\n')
  t.equal(r.stderr, '')
  t.notOk(isAlive(p.child.pid), 'the pool process is gone when pool stop returns')
  t.same(await p.child.exited, { code: 0, signal: null }, 'pool start exited 0')
  for (const pid of workerPids) t.notOk(isAlive(pid), `worker ${pid} gone`)
  t.notOk(fs.existsSync(p.control), 'socket removed')
  const again = await cli(['status', '--control', p.control])
  t.equal(again.code, 2)
  t.equal(again.stderr, `pool: no pool is running on control socket ${p.control}\n`)
})

t.test('pool reload replaces every pid', async (t) => {
  const p = await pool(t, { workers: 3 })
  const before = pids(await statusJson(p.control))
  const r = await cli(['reload', '--control', p.control])
  t.equal(r.code, 0, r.stderr)
  const after = await statusJson(p.control)
  t.equal(after.workers.length, 3)
  for (const [i, w] of after.workers.entries()) {
    t.not(w.pid, before[i], `slot ${i + 1} has a new process`)
    t.equal(w.state, 'ready')
  }
  const expected = before.map((old, i) => `slot ${i + 1} pid ${old} → ${after.workers[i].pid}`).join(', ')
  t.match(r.stdout, new RegExp(`^reloaded 3 workers in \\d+\\.\\d s: ${expected}\\n$`))
  for (const pid of before) t.notOk(isAlive(pid), `old pid ${pid} stopped`)
})

t.test('50 concurrent pool reload commands: all answered, by at most two reloads', async (t) => {
  const dir = tempDir(t)
  const gate = path.join(dir, 'gate')
  fs.writeFileSync(gate, '')
  const ports = await freePorts(2)
  const control = path.join(dir, 'pool.sock')
  const child = startPool(['start', path.join(FIXTURES, 'gated-boot.js'), '-n', '2', '--control', control,
    '--log-format', 'json', '--balancer', 'none', '--worker-port', String(ports[0])], { env: { BOOT_GATE: gate } })
  t.teardown(() => child.stop())
  await child.waitLog((l) => l.event === 'started')
  // The first reload's canary waits at its boot until every command has reached the pool: the
  // others all arrive while a reload runs, however slowly they get through on this box. Each
  // command on a connection of its own, as 50 `pool reload` processes would send them.
  fs.rmSync(gate)
  const asked = 50
  const reloads = Array.from({ length: asked },
    () => sendCommand(control, 'reload', {}, { timeout: 120000 }).catch((err) => err))
  await waitFor(() => child.logs.filter((l) => l.event === 'control-command' && l.command === 'reload')
    .length === asked, { timeout: 60000, what: `${asked} reload commands received` })
  fs.writeFileSync(gate, '')
  const results = await Promise.all(reloads)
  t.same(results.filter((r) => r instanceof Error).map((r) => r.message), [], 'every command succeeds')
  t.ok(results.every((r) => r.replaced?.length === 2), 'each answered with what the reload that covers it replaced')
  const count = (event) => child.logs.filter((l) => l.event === event).length
  await waitFor(() => count('reloaded') === count('reload'), { what: 'the log lines of every reload\'s end' })
  const run = count('reload')
  t.ok(run >= 1 && run <= 2, `the running reload and one merged after it, not fifty (${run} run)`)
})

t.test('pool scale 2 → 3 → 1', async (t) => {
  const p = await pool(t, { workers: 2 })
  const up = await cli(['scale', '3', '--control', p.control])
  t.equal(up.code, 0, up.stderr)
  t.equal(up.stdout, 'scaled from 2 to 3 workers\n')
  let s = await statusJson(p.control)
  t.same(s.workers.map((w) => [w.slot, w.state]), [[1, 'ready'], [2, 'ready'], [3, 'ready']])
  t.equal((await request(`http://127.0.0.1:${p.workerPort + 2}/`)).status, 200, 'slot 3 serves')
  const highPids = s.workers.slice(1).map((w) => w.pid)
  const down = await cli(['scale', '1', '--control', p.control])
  t.equal(down.code, 0, down.stderr)
  t.equal(down.stdout, 'scaled from 3 to 1 worker\n')
  s = await statusJson(p.control)
  t.equal(s.target, 1)
  t.same(s.workers.map((w) => w.slot), [1], 'only slot 1 is left')
  for (const pid of highPids) t.notOk(isAlive(pid), `drained worker ${pid} gone`)
})

t.test('pool scale past the ceiling is refused with the reason, and nothing is forked', async (t) => {
  const p = await pool(t, { workers: 2 })
  const r = await cli(['scale', '1000', '--control', p.control])
  t.equal(r.code, 2)
  t.equal(r.stdout, '')
  t.match(r.stderr,
    /^pool: cannot scale to 1000 workers: above the default ceiling of \d+ \(min\(8 × \d+ CPUs, \d+ MB free ÷ 128 MB\)\); start the pool with a higher --max-workers \(0: no ceiling\)\n$/)
  const s = await statusJson(p.control)
  t.equal(s.target, 2)
  t.same(s.workers.map((w) => w.state), ['ready', 'ready'])
  t.equal(p.child.logs.filter((l) => l.event === 'spawn').length, 2, 'nothing forked')
})

t.test('a reload to code that throws fails with the app\'s error; the old workers keep serving', async (t) => {
  const dir = tempDir(t)
  const app = path.join(dir, 'app.js')
  fs.copyFileSync(path.join(FIXTURES, 'handler.js'), app)
  const p = await pool(t, { workers: 2, app, dir })
  const before = pids(await statusJson(p.control))
  fs.copyFileSync(path.join(FIXTURES, 'throws.js'), app)
  const r = await cli(['reload', '--control', p.control])
  t.not(r.code, 0, 'non-zero exit')
  t.equal(r.stdout, '')
  t.match(r.stderr, /^pool: .*fixture app refuses to load: missing DATABASE_URL/, 'the app\'s message')
  t.match(r.stderr, /at Object\.<anonymous> \(.*app\.js:3:7\)/, 'the app\'s stack')
  const after = await statusJson(p.control)
  t.same(pids(after), before, 'the same processes')
  t.same(after.workers.map((w) => w.state), ['ready', 'ready'])
  const body = JSON.parse((await request(`http://127.0.0.1:${p.workerPort}/`)).body)
  t.equal(body.form, 'handler', 'the old code still answers')
})

t.test('signals: HUP reloads, TTIN adds a worker, TTOU removes one', async (t) => {
  const p = await pool(t, { workers: 2 })
  const before = pids(await statusJson(p.control))
  process.kill(p.child.pid, 'SIGHUP')
  await p.child.waitLog((l) => l.event === 'signal-done' && l.signal === 'SIGHUP', 30000)
  const reloaded = await statusJson(p.control)
  t.ok(pids(reloaded).every((pid, i) => pid !== before[i]), 'every pid replaced')
  process.kill(p.child.pid, 'SIGTTIN')
  const up = await p.child.waitLog((l) => l.event === 'signal-done' && l.signal === 'SIGTTIN')
  t.same(up.result, { from: 2, to: 3 })
  t.equal((await statusJson(p.control)).workers.length, 3)
  process.kill(p.child.pid, 'SIGTTOU')
  const down = await p.child.waitLog((l) => l.event === 'signal-done' && l.signal === 'SIGTTOU')
  t.same(down.result, { from: 3, to: 2 })
  t.equal((await statusJson(p.control)).workers.length, 2)
})

t.test('TTOU never goes below one worker', async (t) => {
  const p = await pool(t, { workers: 1 })
  process.kill(p.child.pid, 'SIGTTOU')
  await p.child.waitLog((l) => l.event === 'signal' && l.signal === 'SIGTTOU' && /not scaling below 1/.test(l.msg))
  t.equal((await statusJson(p.control)).target, 1)
})

t.test('CLI errors: no pool, a bad count', async (t) => {
  const dir = tempDir(t)
  const nowhere = path.join(dir, 'none.sock')
  for (const cmd of [['status'], ['reload'], ['scale', '2'], ['stop']]) {
    const r = await cli([...cmd, '--control', nowhere])
    t.equal(r.code, 2, `${cmd[0]}: exit 2`)
    t.equal(r.stderr, `pool: no pool is running on control socket ${nowhere}\n`)
  }
  const bad = await cli(['scale', 'many', '--control', nowhere])
  t.equal(bad.code, 2)
  t.equal(bad.stderr, "pool: pool scale: the number of workers must be a positive integer (got 'many')\n")
  // Without --control, the default path is named after --port, and the hint says so.
  const r = await cli(['status', '--port', '1'], { env: { XDG_RUNTIME_DIR: dir } })
  t.equal(r.code, 2)
  t.match(r.stderr,
    new RegExp(`^pool: no pool is running on control socket ${dir.replace(/[.]/g, '\\.')}/pool-1\\.sock`))
})

t.test('without --control, start and the commands agree on the default path, named by the front port', async (t) => {
  const xdg = tempDir(t)
  const env = { XDG_RUNTIME_DIR: xdg }
  const embedded = await pool(t, { workers: 1, embedded: true, xdg })
  const bare = await pool(t, { workers: 1, xdg })
  const embeddedPort = Number(new URL(embedded.frontUrl).port)
  t.ok(fs.statSync(path.join(xdg, `pool-${embeddedPort}.sock`)).isSocket(), 'embedded: named after --port')
  t.ok(fs.statSync(path.join(xdg, `pool-${bare.workerPort}.sock`)).isSocket(), 'none: named after --worker-port')
  const a = await cli(['status', '--json', '--port', String(embeddedPort)], { env })
  t.equal(JSON.parse(a.stdout).pid, embedded.child.pid)
  const b = await cli(['status', '--json', '--port', String(bare.workerPort)], { env })
  t.equal(JSON.parse(b.stdout).pid, bare.child.pid)
  // A wrong --port names the pools that do answer, and not files nobody listens on.
  fs.writeFileSync(path.join(xdg, 'pool-1.sock'), '')
  const wrong = await cli(['status', '--port', '2'], { env })
  t.equal(wrong.code, 2)
  t.match(wrong.stderr, `pool: no pool is running on control socket ${path.join(xdg, 'pool-2.sock')} (found `)
  t.match(wrong.stderr, `${path.join(xdg, `pool-${embeddedPort}.sock`)}: use --port ${embeddedPort}`)
  t.match(wrong.stderr, `${path.join(xdg, `pool-${bare.workerPort}.sock`)}: use --port ${bare.workerPort}`)
  t.notMatch(wrong.stderr, 'pool-1.sock')
})

t.test('pool stop while the pool is still starting ends it', async (t) => {
  const dir = tempDir(t)
  const control = path.join(dir, 'pool.sock')
  const [port] = await freePorts(2)
  const child = startPool(['start', path.join(FIXTURES, 'slow-boot.js'), '-n', '1', '--balancer', 'none',
    '--worker-port', String(port), '--control', control, '--log-format', 'json'],
  { env: { BOOT_MS: '5000' } })
  t.teardown(() => child.stop())
  await child.waitLog((l) => l.event === 'spawn')
  const r = await cli(['stop', '--control', control])
  t.equal(r.code, 0, r.stderr)
  t.equal(r.stdout, 'stopped (clean)\n')
  t.same(await child.exited, { code: 0, signal: null }, 'pool start exited without waiting for the boot')
  t.notOk(child.logs.some((l) => l.event === 'ready'), 'before the worker was ever ready')
})
