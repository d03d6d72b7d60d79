'use strict'

// `pool start` as a container's first process, in a PID namespace of its own (`unshare --pid
// --fork`, as a container runtime makes one): the orphans an app leaves are reaped, SIGTERM and
// SIGINT stop it gracefully (a running request finishes), and its exit code is the pool's. Node
// itself as PID 1 cannot reap (it waits only for its own children): started that way, the pool
// says so, and the zombies stay, which is why `pool start` runs a shell as PID 1
// (bin/pool.js's first lines).

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { FIXTURES, BIN, cleanEnv, freePorts, onJsonLines, request, waitFor, tempDir, poolStatus } = require('../helpers')

const APP = path.join(FIXTURES, 'orphans.js')
const problem = process.getuid?.() !== 0
  ? 'not root: unshare --pid needs CAP_SYS_ADMIN'
  : spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status !== 0
    ? 'unshare --pid --fork --mount-proc fails here'
    : null

// `pool start APP …` as PID 1 of a new PID namespace. `direct`: run by node itself rather than
// by the `pool` command. Resolves once the pool has started; `init` is PID 1's pid out here.
async function startAsPid1 (t, { direct = false, app = APP } = {}) {
  const dir = tempDir(t, 'pool-pid1-', { openToOthers: true })
  const [port, workerPort] = await freePorts(3)
  const command = [...(direct ? [process.execPath] : []), BIN, 'start', app, '-n', '1', '--port', String(port),
    '--stats-port', '0',
    '--worker-port', String(workerPort), '--control', path.join(dir, 'pool.sock'), '--log-format', 'json']
  const child = spawn('unshare', ['--pid', '--fork', '--mount-proc', ...command],
    { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  child.logs = []
  child.output = ''
  onJsonLines(child.stdout, (rec) => child.logs.push(rec))
  child.stderr.setEncoding('utf8').on('data', (d) => { child.output = (child.output + d).slice(-4000) })
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) { child.kill('SIGKILL'); await child.exited }
  })
  const init = await waitFor(() => Number(fs.readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8')
    .trim()) || null, { what: 'PID 1 of the namespace' })
  const pool = {
    child,
    init,
    base: `http://127.0.0.1:${port}`,
    control: path.join(dir, 'pool.sock'),
    children: () => childrenOf(init)
  }
  pool.started = waitFor(() => {
    if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${child.output}`)
    return child.logs.find((l) => l.event === 'started')
  }, { timeout: 15000, what: 'the pool to start' })
  pool.started.catch(() => {}) // awaited where a start is expected
  return pool
}

// The children of `pid`, out here: [{ pid, comm, state }].
function childrenOf (pid) {
  const out = []
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    for (const p of fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) {
      try {
        const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8')
        out.push({
          pid: Number(p),
          comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
          state: stat.slice(stat.lastIndexOf(')') + 2)[0]
        })
      } catch {}
    }
  }
  return out
}

// Every process below `pid`, out here.
function descendantsOf (pid) {
  const below = childrenOf(pid)
  return [...below, ...below.flatMap((c) => descendantsOf(c.pid))]
}

// Three orphans, each handed to PID 1 (seen among its children while they sleep); then the
// zombies PID 1 has left once they ended.
async function leaveOrphans (pool) {
  for (let i = 0; i < 3; i++) await request(`${pool.base}/orphan`)
  const adopted = pool.children().filter((c) => c.comm === 'sleep').length
  await waitFor(() => !descendantsOf(pool.init).some((c) => c.comm === 'sleep' && c.state !== 'Z'),
    { timeout: 5000, what: 'the orphans to end' })
  const zombies = () => pool.children().filter((c) => c.state === 'Z')
  // Time to reap them, at most 0.7 s: where nobody reaps, they stay.
  await waitFor(() => zombies().length === 0, { timeout: 700 }).catch(() => {})
  return { adopted, zombies: zombies() }
}

t.test('pool start as PID 1 reaps orphans and stops gracefully on SIGTERM: exit 0', { skip: problem }, async (t) => {
  const pool = await startAsPid1(t)
  await pool.started
  const { adopted, zombies } = await leaveOrphans(pool)
  t.ok(adopted >= 1, `the app's orphans were handed to PID 1 (${adopted} seen among its children)`)
  t.same(zombies, [], 'and reaped when they ended: no zombie under PID 1')
  t.notOk(pool.child.logs.some((l) => l.event === 'pid1-no-reaper'),
    'no warning: the pool runs under the shell that reaps')
  const running = request(`${pool.base}/sleep?ms=800`)
  await waitFor(async () => (await poolStatus(['--control', pool.control])).workers.some((w) => w.state === 'busy'),
    { timeout: 5000, what: 'the request under way' })
  process.kill(pool.init, 'SIGTERM')
  t.equal((await running).status, 200, 'the running request finished')
  t.same(await pool.child.exited, { code: 0, signal: null }, 'PID 1 exited 0: a clean stop')
  t.ok(pool.child.logs.some((l) => l.event === 'stopped' && l.clean), 'the pool stopped cleanly')
})

t.test('SIGINT to PID 1 stops it gracefully too', { skip: problem }, async (t) => {
  const pool = await startAsPid1(t)
  await pool.started
  process.kill(pool.init, 'SIGINT')
  t.same(await pool.child.exited, { code: 0, signal: null })
  t.ok(pool.child.logs.some((l) => l.event === 'signal' && l.signal === 'SIGINT'), 'the pool heard SIGINT')
})

t.test('PID 1 exits with the pool\'s exit code: an app that cannot boot is 1', { skip: problem }, async (t) => {
  const pool = await startAsPid1(t, { app: path.join(FIXTURES, 'throws.js') })
  t.same(await pool.child.exited, { code: 1, signal: null })
  t.match(pool.child.output, /failed to boot/)
})

t.test('node itself as PID 1 cannot reap: the pool says so, and the zombies stay', { skip: problem }, async (t) => {
  const pool = await startAsPid1(t, { direct: true })
  await pool.started
  t.ok(pool.child.logs.some((l) => l.event === 'pid1-no-reaper'), 'a warning names the problem and the cure')
  const { zombies } = await leaveOrphans(pool)
  t.ok(zombies.length >= 1, `${zombies.length} zombies under node as PID 1 (why bin/pool.js runs a shell there)`)
  process.kill(pool.init, 'SIGTERM')
  t.equal((await pool.child.exited).code, 0)
})
