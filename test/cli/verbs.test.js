'use strict'
// The command line of issue 18: the app's own arguments after `--`; the control commands taking
// the flags `pool start` took; `pool ls`; `pool restart` answered with `reload`; `pool recycle
// SLOT`. Each against real `bin/pool.js` processes.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { FIXTURES, freePorts, request, startPool, runPool, waitFor, isAlive, tempDir } = require('../helpers')

// Where the default control sockets of a test's pools go, and nothing else's: $XDG_RUNTIME_DIR
// and $TMPDIR (for $TMPDIR/pool-UID) both fresh, so `pool ls` sees this test's pools only.
function privateEnv (t) {
  return { XDG_RUNTIME_DIR: tempDir(t, 'pool-xdg-'), TMPDIR: tempDir(t, 'pool-tmp-') }
}

async function started (t, args, env) {
  const child = startPool(['start', '--log-format', 'json', ...args], { env, stats: args.includes('--stats-port') })
  t.teardown(() => child.stop('SIGKILL'))
  await child.waitLog((l) => l.event === 'started')
  return child
}

const cli = (args, env) => runPool(args, { timeout: 60000, env })

// `pool status --json` with `flags`, in `env`.
async function statusOf (flags, env) {
  const r = await cli(['status', '--json', ...flags], env)
  if (r.code !== 0) throw new Error(`pool status failed (${r.code}): ${r.stderr}`)
  return JSON.parse(r.stdout)
}

t.test('pool start APP -- ARGS: every worker gets ARGS as its argv, after a reload too', async (t) => {
  const ports = await freePorts(2)
  const control = path.join(tempDir(t), 'pool.sock')
  const appArgs = ['--flag', 'value', '-x', '--', 'two words']
  await started(t,
    [path.join(FIXTURES, 'argv.js'), '-n', '2', '--balancer', 'none', '--worker-port', String(ports[0]), '--control',
      control, '--', ...appArgs])
  const answers = async () => Promise.all(ports.map(async (port) => JSON.parse((await request(`http://127.0.0.1:${port}/`)).body)))
  const before = await answers()
  for (const a of before) t.same(a.argv, appArgs, `slot ${a.slot}: process.argv.slice(2) is what followed --`)
  const reload = await cli(['reload', '--control', control])
  t.equal(reload.code, 0, reload.stderr)
  const after = await answers()
  for (const [i, a] of after.entries()) {
    t.not(a.pid, before[i].pid, `slot ${a.slot} was replaced`)
    t.same(a.argv, appArgs, `slot ${a.slot}: the reloaded worker has them too`)
  }
})

t.test('pool start without --: the app gets no arguments; a command other than start and the control ones refuses ' +
  '--', async (t) => {
  const ports = await freePorts(1)
  const control = path.join(tempDir(t), 'pool.sock')
  await started(t,
    [path.join(FIXTURES, 'argv.js'), '-n', '1', '--balancer', 'none', '--worker-port', String(ports[0]), '--control',
      control])
  t.same(JSON.parse((await request(`http://127.0.0.1:${ports[0]}/`)).body).argv, [])
  const config = await cli(['config', 'haproxy', '-n', '2', '--', '--flag'])
  t.equal(config.code, 2)
  t.equal(config.stderr,
    'pool: pool config takes nothing after --: the app\'s arguments go to pool start APP [flags] -- ARGS; ' +
      'see `pool config haproxy --help`\n')
  t.equal(config.stdout, '')
})

t.test('the control commands take the flags pool start took: those that find the pool are used, ' +
  'the others ignored and named', async (t) => {
  const env = privateEnv(t)
  const ports = await freePorts(4)
  const startFlags = ['--port', String(ports[1]), '--worker-port', String(ports[2]), '--stats-port', String(ports[0]),
    '-n', '2', '--timeout', '30s', '--graceful-timeout', '5s']
  const pool = await started(t, [path.join(FIXTURES, 'control.js'), ...startFlags], env)
  const status = await cli(['status', '--json', ...startFlags, '--', '--app-flag'], env)
  t.equal(status.code, 0, status.stderr)
  t.equal(JSON.parse(status.stdout).pid, pool.pid, 'found by the pasted flags')
  t.equal(status.stderr,
    'pool: ignoring --workers, --timeout, --graceful-timeout, --stats-port, the app\'s arguments after --: ' +
      'only pool start uses them (this command\'s own time limit is --wait)\n',
    'what is ignored is said, in one line')
  const reload = await cli(['reload', ...startFlags, '--wait', '1m'], env)
  t.equal(reload.code, 0, reload.stderr)
  t.match(reload.stdout, /^reloaded 2 workers in /)
  const scale = await cli(['scale', '3', '--port', String(ports[1]), '--worker-port', String(ports[2])], env)
  t.equal(scale.code, 0, scale.stderr)
  t.equal(scale.stderr, '', 'nothing ignored, nothing said')
  t.equal(scale.stdout, 'scaled from 2 to 3 workers\n')
  const typo = await cli(['stop', ...startFlags, '--wrokers', '2'], env)
  t.equal(typo.code, 2, 'an unknown flag is still refused')
  t.equal(typo.stderr, 'pool: unknown option --wrokers (did you mean --workers?); see `pool stop --help`\n')
  t.ok(isAlive(pool.pid), 'and nothing was done')
  const stop = await cli(['stop', ...startFlags], env)
  t.equal(stop.code, 0, stop.stderr)
  t.equal(stop.stdout, 'stopped (clean)\n')
  t.same(await pool.exited, { code: 0, signal: null })
})

t.test('--balancer none: --worker-port with --balancer finds the pool, ' +
  'and so do a --config file and POOL_* variables', async (t) => {
  const env = privateEnv(t)
  const dir = tempDir(t)
  const [port] = await freePorts(1)
  const pool = await started(t,
    [path.join(FIXTURES, 'handler.js'), '-n', '1', '--balancer', 'none', '--worker-port', String(port)], env)
  const byFlags = await cli(['status', '--json', '--balancer', 'none', '--worker-port', String(port)], env)
  t.equal(byFlags.code, 0, byFlags.stderr)
  t.equal(JSON.parse(byFlags.stdout).pid, pool.pid)
  const config = path.join(dir, 'pool.config.json')
  fs.writeFileSync(config, JSON.stringify({ app: 'app.js', balancer: 'none', workerPort: port, workers: 1 }))
  const byFile = await cli(['status', '--json', '--config', config], env)
  t.equal(byFile.code, 0, byFile.stderr)
  t.equal(JSON.parse(byFile.stdout).pid, pool.pid, 'from the --config file')
  const byEnv = await cli(['status', '--json'], { ...env, POOL_BALANCER: 'none', POOL_WORKER_PORT: String(port) })
  t.equal(byEnv.code, 0, byEnv.stderr)
  t.equal(JSON.parse(byEnv.stdout).pid, pool.pid, 'from POOL_BALANCER and POOL_WORKER_PORT')
  const byPort = await cli(['status', '--json', '--port', String(port)], env)
  t.equal(JSON.parse(byPort.stdout).pid, pool.pid, '--port alone still names the socket, as before')
})

// A socket file nobody listens on, as a SIGKILLed pool leaves it.
async function staleSocket (t, file) {
  const child = spawn(process.execPath,
    ['-e', `require('net').createServer().listen(${JSON.stringify(file)}, () => console.log('up'))`],
    { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise((resolve) => child.stdout.once('data', resolve))
  child.kill('SIGKILL')
  await new Promise((resolve) => child.once('exit', resolve))
  t.ok(fs.statSync(file).isSocket(), 'a stale socket is there')
}

t.test('pool ls: every pool of this user, one line each; a stale socket is said', async (t) => {
  const env = privateEnv(t)
  const empty = await cli(['ls'], env)
  t.equal(empty.code, 0)
  t.equal(empty.stdout,
    'no pool of yours is running (a pool started with --control elsewhere is not listed: ' +
      'pool status --control PATH asks it)\n')
  const ports = await freePorts(6)
  const embedded = await started(t,
    [path.join(FIXTURES, 'control.js'), '-n', '2', '--stats-port', String(ports[0]), '--port', String(ports[1]),
      '--worker-port', String(ports[2])], env)
  const bare = await started(t,
    [path.join(FIXTURES, 'handler.js'), '-n', '1', '--balancer', 'none', '--worker-port', String(ports[5])], env)
  await staleSocket(t, path.join(env.XDG_RUNTIME_DIR, 'pool-1.sock'))
  const r = await cli(['ls'], env)
  t.equal(r.code, 0, r.stderr)
  t.equal(r.stderr, '')
  const lines = r.stdout.trimEnd().split('\n')
  t.equal(lines.length, 4, 'a header, two pools, one stale socket')
  t.match(lines[0], /^ *PID +STATE +READY +FRONT +WORKER PORTS +STATS +APP$/)
  const cells = (line) => line.trim().split(/\s+/)
  // By the port that names the socket: the stale pool-1 is not a row; the rows are in port order.
  const rows = [lines[1], lines[2]].map(cells)
  const byPid = Object.fromEntries(rows.map((row) => [Number(row[0]), row]))
  t.same(byPid[embedded.pid],
    [String(embedded.pid), 'running', '2/2', `http://127.0.0.1:${ports[1]}`, `${ports[2]}-${ports[3]}`,
      `http://127.0.0.1:${ports[0]}`, path.join(FIXTURES, 'control.js')])
  t.same(byPid[bare.pid],
    [String(bare.pid), 'running', '1/1', 'none', String(ports[5]), '-', path.join(FIXTURES, 'handler.js')])
  t.equal(lines[3],
    `stale: ${path.join(env.XDG_RUNTIME_DIR, 'pool-1.sock')} (no pool answers on it: one was killed; ` +
      'the next pool start on it replaces it)')
  const json = JSON.parse((await cli(['ls', '--json'], env)).stdout)
  t.same(json.map((p) => [p.port, p.status?.pid ?? p.reason]),
    [[1, 'refused'], [ports[1], embedded.pid], [ports[5], bare.pid]],
    '--json: each socket by port, with its status or why not')
})

t.test('pool restart: one line suggesting reload, exit 2; ps suggests ls', async (t) => {
  const restart = await cli(['restart'])
  t.equal(restart.code, 2)
  t.equal(restart.stderr, "pool: unknown command 'restart' (did you mean reload?); see `pool --help`\n")
  t.equal(restart.stdout, '')
  const ps = await cli(['ps', '--port', '9001'])
  t.equal(ps.code, 2)
  t.match(ps.stderr, /^pool: unknown command 'ps' \(did you mean ls\?\)/)
})

t.test('pool recycle SLOT: the slot\'s worker is drained (its request finishes) and replaced; ' +
  'no request fails', async (t) => {
  const env = privateEnv(t)
  const ports = await freePorts(5)
  const flags = ['--port', String(ports[1]), '--worker-port', String(ports[2])]
  const pool = await started(t,
    [path.join(FIXTURES, 'control.js'), '-n', '3', '--stats-port', String(ports[0]), ...flags], env)
  const front = `http://127.0.0.1:${ports[1]}`
  const before = await statusOf(flags, env)
  // A long request on slot 1 (the balancer fills the lowest free slot first), running when the
  // recycle comes: the drain must let it finish.
  const long = request(`${front}/wait?ms=1500`)
  await waitFor(async () => (await statusOf(flags, env)).workers[0].state === 'busy', { what: 'slot 1 busy' })
  // Bounded load meanwhile: 4 clients, each sending requests back to back until the recycle answers.
  let recycling = true
  const results = []
  const client = async () => {
    for (let i = 0; i < 500 && recycling; i++) {
      results.push(await request(`${front}/wait?ms=20`).then((r) => r.status, (err) => err.message))
    }
  }
  const clients = Array.from({ length: 4 }, client)
  const r = await cli(['recycle', '1', ...flags], env)
  recycling = false
  await Promise.all(clients)
  t.equal(r.code, 0, r.stderr)
  const after = await statusOf(flags, env)
  t.equal(r.stdout,
    `recycled slot 1 in ${/in (\d+\.\d) s/.exec(r.stdout)?.[1]} s: ` +
      `pid ${before.workers[0].pid} → ${after.workers[0].pid}\n`)
  t.not(after.workers[0].pid, before.workers[0].pid, 'slot 1 has a new process')
  t.ok(['ready', 'busy'].includes(after.workers[0].state),
    `serving when the command answers (${after.workers[0].state})`)
  t.same(after.workers.slice(1).map((w) => w.pid), before.workers.slice(1).map((w) => w.pid),
    'the other slots are untouched')
  t.equal((await long).status, 200, 'the request running on the recycled worker finished')
  t.ok(results.length > 0, `${results.length} requests during the recycle`)
  t.same(results.filter((s) => s !== 200), [], 'none failed')
  const exit = after.recentExits.find((e) => e.pid === before.workers[0].pid)
  t.match(exit, { slot: 1, reason: 'recycle', planned: true }, 'a planned exit, reason recycle')
  t.ok(pool.logs.some((l) => l.event === 'draining' && l.reason === 'recycle' && l.slot === 1),
    'through the drain path')
})

t.test('pool recycle: a slot that does not exist, or is not a number, is refused in one line', async (t) => {
  const ports = await freePorts(2)
  const control = path.join(tempDir(t), 'pool.sock')
  await started(t,
    [path.join(FIXTURES, 'handler.js'), '-n', '2', '--balancer', 'none', '--worker-port', String(ports[0]), '--control',
      control])
  const none = await cli(['recycle', '3', '--control', control])
  t.equal(none.code, 2)
  t.equal(none.stderr, 'pool: there is no slot 3: the pool\'s slots are 1-2\n')
  const word = await cli(['recycle', 'one', '--control', control])
  t.equal(word.code, 2)
  t.equal(word.stderr,
    "pool: pool recycle: the slot must be a positive integer, as pool status lists them (got 'one')\n")
  const missing = await cli(['recycle', '--control', control])
  t.equal(missing.code, 2)
  t.match(missing.stderr, /^pool: missing <slot>: pool recycle <slot>/)
})
