'use strict'

// `npm run demo:stack` (scripts/demo-stack.js): nginx → HAProxy → pool serving the SSR demo from
// the generated configs, in a temp prefix on free loopback ports; it prints where to look, and
// stops everything, leaving nothing behind, on SIGINT or when one part dies.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { ROOT, cleanEnv, request, waitFor, isAlive } = require('../helpers')
const { IS_ROOT } = require('../helpers/haproxy')

const SCRIPT = path.join(ROOT, 'scripts', 'demo-stack.js')
const BANNER = /in (\/\S+)\n {2}page +(http:\S+) .*\n {2}haproxy +(http:\S+) .*\n {2}pool +(http:\S+) .*\n {2}control +.*--control (\S+)\n/

// Every process below `pid`, from /proc.
function descendants (pid) {
  const children = new Map()
  for (const name of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(ppid, [...(children.get(ppid) || []), Number(name)])
    } catch {}
  }
  const out = []
  for (let i = 0, todo = [pid]; i < todo.length; i++) {
    for (const c of children.get(todo[i]) || []) { out.push(c); todo.push(c) }
  }
  return out
}

function commOf (pid) {
  try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() } catch { return '' }
}

function uidOf (pid) {
  return Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1])
}

// The script as a child; resolves once it printed its banner, with the URLs and every process
// it started (HAProxy, nginx and its workers, the pool and its workers).
async function startDemo (t, args = []) {
  const child = spawn(process.execPath, [SCRIPT, ...args],
    { cwd: ROOT, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  const demo = { child, stdout: '', stderr: '', pids: [] }
  child.stdout.on('data', (d) => { demo.stdout += d })
  child.stderr.on('data', (d) => { demo.stderr += d })
  demo.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(async () => {
    for (const pid of [child.pid, ...demo.pids]) { try { process.kill(pid, 'SIGKILL') } catch {} }
    if (demo.prefix) fs.rmSync(demo.prefix, { recursive: true, force: true })
  })
  const m = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`demo-stack exited with ${child.exitCode}: ${demo.stderr}`)
    return BANNER.exec(demo.stdout)
  }, { timeout: 60000, interval: 100, what: 'the demo\'s banner' })
  Object.assign(demo, { prefix: m[1], page: m[2], haproxy: m[3], pool: m[4], control: m[5] })
  demo.pids = descendants(child.pid)
  return demo
}

// Resolves { code, signal } once the script exited, within `timeout` ms.
async function exitOf (demo, timeout = 60000) {
  let timer
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`demo-stack still running after ${timeout} ms`)), timeout)
  })
  return Promise.race([demo.exited, late]).finally(() => clearTimeout(timer))
}

t.test('starts nginx → HAProxy → pool, prints where to look, stops it all on SIGINT', async (t) => {
  const demo = await startDemo(t)
  const comms = demo.pids.map(commOf)
  t.ok(comms.includes('haproxy'), 'HAProxy runs')
  t.ok(comms.filter((c) => c === 'nginx').length >= 2, 'nginx runs, master and workers')
  t.ok(demo.pids.length >= 7, `HAProxy, nginx (2+), the pool and its 2 workers: ${demo.pids.length} processes`)
  if (IS_ROOT) {
    const workers = demo.pids.filter((pid) => commOf(pid) === 'nginx' && uidOf(pid) !== 0)
    t.ok(workers.length > 0 && workers.every((pid) => uidOf(pid) === 65534),
      'started as root: nginx\'s workers run as nobody')
  }

  const page = await request(demo.page)
  t.equal(page.status, 200, `${demo.page} answers`)
  t.match(page.body, /<main class="catalogue">/, 'the SSR demo page, rendered by a worker, through nginx and HAProxy')
  const stats = await request(demo.haproxy)
  t.match(stats.body, /Statistics Report for HAProxy/, 'HAProxy\'s stats page')
  t.match(stats.body, /worker2/, 'it lists the pool\'s servers')
  // The page's worker reads busy until the pool hears from it that the request ended, which can
  // come just after the page reached this client.
  const workerStates = async () => {
    const status = await request(demo.pool.replace(/\/$/, '/status'))
    return status.status === 200 ? JSON.parse(status.body).workers.map((w) => w.state) : [`HTTP ${status.status}`]
  }
  await waitFor(async () => String(await workerStates()) === 'ready,ready',
    { timeout: 5000, what: 'both workers ready on the pool\'s /status' }).catch(() => {})
  t.same(await workerStates(), ['ready', 'ready'], 'the pool\'s /status: both workers ready')
  t.ok(fs.existsSync(demo.control), 'the control socket the banner names exists')

  demo.child.kill('SIGINT')
  const { code } = await exitOf(demo)
  t.equal(code, 0, 'exits 0 on SIGINT')
  await waitFor(() => demo.pids.every((pid) => !isAlive(pid)),
    { timeout: 5000, what: 'every process the demo started gone' })
  t.pass('every process it started is gone')
  t.notOk(fs.existsSync(demo.prefix), `${demo.prefix} is removed`)
  await t.rejects(request(demo.page, { timeout: 2000 }), 'nothing listens on the page\'s port any more')
})

t.test('a part that dies stops the others: one line, exit 1', async (t) => {
  const demo = await startDemo(t, ['-n', '1'])
  const haproxy = demo.pids.find((pid) => commOf(pid) === 'haproxy')
  process.kill(haproxy, 'SIGKILL')
  const { code } = await exitOf(demo)
  t.equal(code, 1, 'exits 1')
  const lines = demo.stderr.trim().split('\n')
  t.equal(lines.length, 1, `one line: ${demo.stderr.trim()}`)
  t.match(lines[0], /^demo-stack: haproxy was killed \(SIGKILL\); stopping everything$/)
  await waitFor(() => demo.pids.every((pid) => !isAlive(pid)),
    { timeout: 5000, what: 'every process the demo started gone' })
  t.pass('nginx, the pool and its worker are stopped too')
  t.notOk(fs.existsSync(demo.prefix), 'the prefix is removed')
})

t.test('bad input: one line, exit 2, nothing started', async (t) => {
  for (const [args, message] of [[['-n', '0'], /-n must be an integer from 1 to 64 \(got '0'\)/],
    [['--prot', '80'], /unknown argument '--prot'/]]) {
    const child = spawn(process.execPath, [SCRIPT, ...args],
      { cwd: ROOT, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { err += d })
    const code = await new Promise((resolve) => child.once('exit', resolve))
    t.equal(code, 2, `${args.join(' ')}: exit 2`)
    t.equal(out, '', 'nothing on stdout')
    t.equal(err.trim().split('\n').length, 1, `one line: ${err.trim()}`)
    t.match(err, message)
  }
})
