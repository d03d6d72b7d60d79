'use strict'

// The kill experiment: what a crashing worker costs behind HAProxy, with and without the pool
// setting MAINT on exit.
//
//   node bench/haproxy-kill.js [--duration 10] [--repeat 1] [--only a,b,...]
//
// Each run: a real HAProxy from `pool config haproxy` (4 servers, maxconn 1, balance first,
// redispatch 1, retries 1, L7 retries for GET and HEAD), `pool start test/fixtures/control.js -n 4`, 12 closed-loop keep-alive
// clients sending GET /block?ms=20 through HAProxy, and one worker SIGKILLed every second
// (slots in turn, only workers that are serving). Runs differ in who sets server states and
// in the health-check line of the config:
//   pool drives HAProxy  `--balancer haproxy`: READY on ready, MAINT on exit
//   nobody drives it     `--balancer none`; every server is set READY once, by hand
//   check + observe      the generated `check inter 2s fall 1 rise 1 observe layer4 ...`
//   check only           the same without `observe layer4 error-limit 1 on-error mark-down`
//   no check             neither (HAProxy learns nothing about a dead worker by itself)
// The table goes to stdout and to bench/results/haproxy-kill.md. Loopback only; HAProxy and
// the pool (and its workers) are stopped after each run, also on Ctrl-C.

const fs = require('node:fs')
const os = require('node:os')
const http = require('node:http')
const path = require('node:path')
const readline = require('node:readline')
const { spawn, spawnSync } = require('node:child_process')
const { freePorts, waitForPort } = require('./lib/procs')
const { haproxyConfig } = require('../lib/config/haproxy')
const { HaproxyClient } = require('../lib/haproxy/client')
const { startHaproxy: startHaproxyProcess } = require('../test/helpers/haproxy')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'pool.js')
const CONTROL_APP = path.join(ROOT, 'test', 'fixtures', 'control.js')
const HAPROXY = process.env.HAPROXY || '/usr/sbin/haproxy'
const RESULTS = path.join(__dirname, 'results', 'haproxy-kill.md')
const WORKERS = 4
const CLIENTS = 12
const OBSERVE = ' observe layer4 error-limit 1 on-error mark-down'

const CHECKS = {
  'check + observe': (cfg) => cfg,
  'check only': (cfg) => cfg.replace(OBSERVE, ''),
  'no check': (cfg) => cfg.replace(/ check inter \S+ fall \d+ rise \d+/, '').replace(OBSERVE, '')
}

const RUNS = [
  { id: 'a', drive: true, checks: 'check + observe' },
  { id: 'b', drive: true, checks: 'check only' },
  { id: 'c', drive: true, checks: 'no check' },
  { id: 'd', drive: false, checks: 'check + observe' },
  { id: 'e', drive: false, checks: 'check only' },
  { id: 'f', drive: false, checks: 'no check' }
]

function parseArgs (argv) {
  const args = { duration: 10, repeat: 1, only: null, json: null }
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '')
    const value = argv[i + 1]
    if (key === 'duration') args.duration = Number(value)
    else if (key === 'repeat') args.repeat = Number(value)
    else if (key === 'only') args.only = value.split(',')
    else if (key === 'json') args.json = value // the raw results too, for bench/run.js's report
    else throw new Error(`unknown option --${key} (use --duration S, --repeat N, --only a,b,...)`)
  }
  if (!(args.duration >= 1 && args.duration <= 120)) throw new Error('--duration must be 1..120 seconds')
  if (!(args.repeat >= 1 && args.repeat <= 20)) throw new Error('--repeat must be 1..20')
  return args
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// ── processes ────────────────────────────────────────────────────────────────────────────────

const live = new Set() // { stop() } of everything running now

// HAProxy from `cfg` in `dir`, started and awaited the way the tests do it; tracked in `live`
// so that an interrupted run still stops it.
async function startHaproxy (dir, cfg) {
  const handle = await startHaproxyProcess({ cfg, dir })
  const stop = handle.stop
  handle.stop = () => { live.delete(handle); return stop() }
  live.add(handle)
  return { handle, client: new HaproxyClient({ socket: handle.socket, timeout: 1000 }) }
}

// `pool start` with JSON logs; `pids[slot]` follows spawns, `ready` holds pids that are serving.
function startPool (args) {
  const child = spawn(process.execPath, [BIN, 'start', ...args, '--log-format', 'json', '--stats-port', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  const pool = { child, pids: {}, ready: new Set(), allPids: new Set(), maintMs: [], started: null }
  let stderr = ''
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000) })
  pool.started = new Promise((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).on('line', (text) => {
      let line
      try { line = JSON.parse(text) } catch { return }
      if (line.event === 'spawn') { pool.pids[line.slot] = line.pid; pool.allPids.add(line.pid) }
      if (line.event === 'ready') pool.ready.add(line.pid)
      // Only MAINTs for exits: the ones that end a drain (reason 'drained', at the final stop)
      // are not what the kill experiment measures.
      if (line.event === 'haproxy-maint' && line.reason !== 'drained') pool.maintMs.push(line.ms)
      if (line.event === 'started') resolve()
    })
    child.once('exit', (code) => reject(new Error(`pool exited (${code}) before starting: ${stderr}`)))
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  pool.handle = {
    // SIGTERM: the pool stops its workers (they run in their own process groups, so killing the
    // pool alone would leave them behind). SIGKILL everything after 15 s.
    async stop () {
      live.delete(pool.handle)
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 15000)
        await exited
        clearTimeout(timer)
      }
      for (const pid of pool.allPids) { try { process.kill(pid, 'SIGKILL') } catch {} }
    }
  }
  live.add(pool.handle)
  return pool
}

async function stopAll () {
  await Promise.allSettled([...live].map((h) => h.stop()))
}

// ── load ─────────────────────────────────────────────────────────────────────────────────────

// `CLIENTS` closed-loop clients on keep-alive connections (as nginx's upstream keepalive does).
function startLoad (url) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS })
  const stats = { ok: 0, failed: 0, byKind: {} }
  let stopped = false
  const once = (i) => new Promise((resolve) => {
    const fail = (kind) => { stats.failed++; stats.byKind[kind] = (stats.byKind[kind] || 0) + 1; resolve() }
    const req = http.get(`${url}/block?ms=20&id=${i}`, { agent }, (res) => {
      res.resume()
      res.on('end', () => { if (res.statusCode === 200) { stats.ok++; resolve() } else fail(String(res.statusCode)) })
      res.on('error', () => fail('aborted'))
    })
    req.setTimeout(15000, () => req.destroy(new Error('timeout')))
    req.on('error', (err) => fail(err.code === 'ECONNRESET' || /hang up/.test(err.message) ? 'closed' : err.code || err.message))
  })
  let n = 0
  const clients = Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (!stopped) await once(n++)
  }))
  return { stats, async stop () { stopped = true; await clients; agent.destroy(); return stats } }
}

// ── one run ──────────────────────────────────────────────────────────────────────────────────

async function run (spec, seconds) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-kill-'))
  try {
    const ports = await freePorts(2 + WORKERS)
    const [port, statsPort, workerPort] = ports
    const cfg = CHECKS[spec.checks](haproxyConfig({ workers: WORKERS, port, statsPort, workerPort, prefix: dir, log: 'none' }))
    const { client } = await startHaproxy(dir, cfg)
    const app = CONTROL_APP
    const front = spec.drive
      ? ['--balancer', 'haproxy', '--haproxy-socket', path.join(dir, 'haproxy-admin.sock'), '--haproxy-backend', 'pool', '--log-level', 'debug']
      : ['--balancer', 'none']
    const pool = startPool([app, '-n', String(WORKERS), '--worker-port', String(workerPort), '--control', path.join(dir, 'control.sock'), ...front])
    await pool.started
    if (!spec.drive) {
      // Nobody drives HAProxy: make every server READY once, as a static config would be.
      for (let slot = 1; slot <= WORKERS; slot++) await client.setServerState('pool', `worker${slot}`, 'ready')
    }
    await waitForPort(port)
    await sleep(200)
    const load = startLoad(`http://127.0.0.1:${port}`)
    let kills = 0
    for (let i = 0; i < seconds; i++) {
      await sleep(1000)
      const pid = pool.pids[(i % WORKERS) + 1]
      if (!pool.ready.has(pid)) continue // still booting: killing it would cost no request
      try { process.kill(pid, 'SIGKILL'); kills++ } catch {}
    }
    await sleep(500)
    const stats = await load.stop()
    await stopAll()
    return { ...spec, kills, ...stats, maintMs: pool.maintMs }
  } finally {
    await stopAll()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// ── report ───────────────────────────────────────────────────────────────────────────────────

// One row per configuration; with --repeat, each run's count separated by commas.
function table (results) {
  const lines = [
    '| run | MAINT set by | health-check line in the config | kills | failed requests | of which 503 | of which closed | answered (200) |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |'
  ]
  const each = (rs, f) => rs.map(f).join(', ')
  for (const spec of RUNS) {
    const rs = results.filter((r) => r.id === spec.id)
    if (rs.length === 0) continue
    const who = spec.drive ? `pool (\`--balancer haproxy\`)` : 'nobody (`--balancer none`)'
    lines.push(`| ${spec.id} | ${who} | ${spec.checks} | ${each(rs, (r) => r.kills)} | **${each(rs, (r) => r.failed)}** | ${each(rs, (r) => r.byKind['503'] || 0)} | ${each(rs, (r) => r.byKind.closed || 0)} | ${each(rs, (r) => r.ok)} |`)
  }
  return lines.join('\n')
}

function versions () {
  const haproxy = (spawnSync(HAPROXY, ['-v'], { encoding: 'utf8' }).stdout || '').split('\n')[0]
  return `${haproxy.replace(/ - https.*/, '')}, Node ${process.version}, ${os.cpus().length} CPUs`
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const specs = RUNS.filter((r) => !args.only || args.only.includes(r.id))
  const results = []
  for (let k = 0; k < args.repeat; k++) {
    for (const spec of specs) {
      process.stderr.write(`run ${spec.id}${args.repeat > 1 ? ` #${k + 1}` : ''}: ${spec.drive ? 'pool drives HAProxy' : 'nobody drives HAProxy'}, ${spec.checks} ...`)
      const r = await run(spec, args.duration)
      process.stderr.write(` ${r.failed} failed / ${r.kills} kills\n`)
      results.push(r)
    }
  }
  const maint = results.flatMap((r) => r.maintMs)
  const command = `node bench/haproxy-kill.js${process.argv.slice(2).length ? ' ' + process.argv.slice(2).join(' ') : ''}`
  const md = [
    '# Kill experiment: HAProxy with and without MAINT on exit',
    '',
    `\`${command}\` — ${versions()}, ${new Date().toISOString().slice(0, 10)}.`,
    '',
    `${WORKERS} workers (test/fixtures/control.js, GET /block?ms=20), ${CLIENTS} closed-loop keep-alive clients through HAProxy ` +
    `for ${args.duration} s, one worker SIGKILLed every second. HAProxy config from \`pool config haproxy -n ${WORKERS}\` ` +
    '(maxconn 1, balance first, option redispatch 1, retries 1, L7 retries for GET and HEAD), with its health-check line as stated. ' +
    '"closed": the connection was closed without a response (what HAProxy does when the server dies under a request that was not the first on its client connection; other failures would be listed too).',
    '',
    table(results),
    '',
    maint.length ? `MAINT latency measured by the pool (exit handled → HAProxy's reply): median ${median(maint).toFixed(2)} ms, max ${Math.max(...maint).toFixed(2)} ms over ${maint.length} kills.` : '',
    ''
  ].join('\n')
  console.log(md)
  fs.mkdirSync(path.dirname(RESULTS), { recursive: true })
  fs.writeFileSync(RESULTS, md)
  console.log(`written to ${path.relative(ROOT, RESULTS)}`)
  if (args.json) {
    const results2 = results.map(({ id, drive, checks, kills, ok, failed, byKind, maintMs }) => ({ id, drive, checks, kills, ok, failed, byKind, maintMs }))
    fs.writeFileSync(args.json, JSON.stringify({ args, madeBy: command, at: new Date().toISOString(), versions: versions(), results: results2 }, null, 2) + '\n')
  }
}

function median (xs) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => stopAll().then(() => process.exit(130)))

main().catch(async (err) => {
  console.error(err)
  await stopAll()
  process.exit(1)
})
