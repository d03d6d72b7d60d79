'use strict'

// How soon the front hears that a worker died: from a worker's SIGKILL to its removal from the
// embedded balancer's rotation, and to its server's MAINT as HAProxy itself reports it, on a
// quiet pool and under saturating load. Until MAINT lands, HAProxy sees the dead server as the
// free one and sends it every queued request (each refused, redispatched, or failed); the
// embedded balancer keeps trying it the same way.
//
//   node bench/death-notice.js [--quick] [--fronts embedded,haproxy,haproxy-2-threads,haproxy-3.0] [--kills 12]
//                              [--connections 64] [--baseline FILE] [--results DIR]
//
// Each front: `pool start bench/lib/pool-app.js -n 4` (debug log level, for the balancer's
// `balancer-worker-down` line), then, quiet and loaded, `kills` times: SIGKILL a ready worker
// (slots in turn), wait for the front's notice and the replacement's `ready`, pause 300 ms.
//   loaded     autocannon in a process of its own, `connections` keep-alive connections on
//              GET /?ms=0 (the handler answers at once), for the whole round (at most
//              10 s per kill, 600 s in all: a round the load outlasts ends there)
//   noticeMs   embedded: the `balancer-worker-down` line's time; haproxy: the first `show
//              servers state` reply (polled back to back from the kill on) that shows the
//              server MAINT. From the kill, in ms (log times have 1 ms resolution).
//   deadMs     when the process had died (a zombie in /proc, polled every 0.1 ms): the kernel's
//              and the scheduler's part, which no code of the pool's can shorten; on a busy
//              machine the dying process waits for a core like everything else
//   reactMs    noticeMs − deadMs: the pool's own part, from the death to the front's notice
//   exitMs     the pool's `exit` line: when the supervisor's tick handled the exit
// --baseline FILE: an earlier result of this part (the code before a change), copied into this
// one as `baseline` so both sit side by side. Loopback only; everything stops on Ctrl-C.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { forkReady, freePorts, ask } = require('./lib/procs')
const { startPoolProcess } = require('./lib/pool-process')
const { startGeneratedHaproxy, has, HAPROXY, HAPROXY_30 } = require('./lib/stack')
const { percentile, median } = require('./lib/stats')
const { runPart, progress, sleep, round, log } = require('./lib/part')

const WORKERS = 4
// haproxy-2-threads: the generated config with nbthread 2 instead of its 1, beside it in the same
// run: with one thread the runtime API's `set server` is answered between the requests served.
// haproxy-3.0: the generated config (nbthread 1) on Debian 13's HAProxy 3.0 (HAPROXY_30).
const FRONTS = ['embedded', 'haproxy', 'haproxy-2-threads', 'haproxy-3.0']
const HAPROXY_OF = { haproxy: HAPROXY, 'haproxy-2-threads': HAPROXY, 'haproxy-3.0': HAPROXY_30 }
const LOADS = ['quiet', 'loaded']
const NOTICE_WAIT_MS = 5000 // a notice later than this is recorded as missing

const defaults = { fronts: FRONTS, kills: 12, connections: 64, baseline: '' }
const quick = { kills: 4 }

function twoThreads (cfg) {
  if (!/^\s*nbthread 1$/m.test(cfg)) throw new Error('the generated HAProxy config has no `nbthread 1` line to change')
  return cfg.replace(/^(\s*nbthread) 1$/m, '$1 2')
}

// `pool start` with `front`'s flags; every log line goes to `onLine` as well.
async function startFront (front, onLine) {
  const ports = await freePorts(WORKERS)
  const [port, statsPort] = await freePorts(2)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-notice-'))
  const common = ['-n', String(WORKERS), '--worker-port', String(ports[0]), '--control', path.join(dir, 'control.sock'), '--log-level', 'debug', '--no-access-log']
  let haproxy = null
  let args
  if (front === 'embedded') {
    args = [...common, '--port', String(port)]
  } else {
    const edit = front === 'haproxy-2-threads' ? twoThreads : undefined
    haproxy = await startGeneratedHaproxy({ workers: WORKERS, workerPort: ports[0], port, statsPort, edit, bin: HAPROXY_OF[front] })
    args = [...common, '--balancer', 'haproxy', '--haproxy-socket', haproxy.socket, '--haproxy-backend', 'pool']
  }
  const pool = startPoolProcess(args, { onLine })
  await pool.started
  await sleep(300)
  return {
    url: haproxy ? haproxy.url : `http://127.0.0.1:${port}`,
    pool,
    haproxy,
    async stop () {
      await pool.stop({ grace: 5000 })
      if (haproxy) { haproxy.child.kill('SIGKILL'); await haproxy.child.exited }
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

// Resolves with the first line `match` accepts from now on (or one already seen since `since`),
// or null after NOTICE_WAIT_MS.
function lineWatcher () {
  const lines = []
  const waiters = new Set()
  return {
    onLine (line) {
      lines.push(line)
      if (lines.length > 2000) lines.splice(0, 1000)
      for (const w of waiters) if (w.match(line)) { waiters.delete(w); clearTimeout(w.timer); w.resolve(line) }
    },
    next (match, since) {
      const seen = lines.find((l) => l.time >= since && match(l))
      if (seen) return Promise.resolve(seen)
      return new Promise((resolve) => {
        const w = { match, resolve }
        w.timer = setTimeout(() => { waiters.delete(w); resolve(null) }, NOTICE_WAIT_MS)
        waiters.add(w)
      })
    }
  }
}

// HAProxy's own word: `show servers state` back to back until `server` reads MAINT.
async function maintSeen (client, server, killedAt) {
  while (Date.now() - killedAt < NOTICE_WAIT_MS) {
    try {
      const state = await client.serversState('pool')
      if (state[server]?.admin === 'maint') return performance.timeOrigin + performance.now()
    } catch {}
  }
  return null
}

// When `pid` is dead (a zombie, or reaped already): polled every 0.1 ms, blocking this process
// only (the other times are the pool's and HAProxy's own). Date.now() with a fraction, or null.
const pause = new Int32Array(new SharedArrayBuffer(4))
function deadAt (pid, killedAt) {
  while (Date.now() - killedAt < NOTICE_WAIT_MS) {
    let state
    try { state = fs.readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1][0] } catch { state = 'gone' }
    if (state === 'Z' || state === 'gone') return performance.timeOrigin + performance.now()
    Atomics.wait(pause, 0, 0, 0.1)
  }
  return null
}

// One kill: the times from the SIGKILL to the process's death, to the front's notice and to the
// supervisor's `exit` line.
async function killOne (setup, watcher, slot) {
  const { pool, haproxy } = setup
  const pid = pool.pids[slot]
  const server = `worker${slot}`
  const exitLine = watcher.next((l) => l.event === 'exit' && l.pid === pid, 0)
  const killedAt = performance.timeOrigin + performance.now()
  process.kill(pid, 'SIGKILL')
  const dead = deadAt(pid, killedAt)
  let noticeAt
  if (haproxy) {
    noticeAt = await maintSeen(haproxy.client, server, killedAt)
  } else {
    const down = await watcher.next((l) => l.event === 'balancer-worker-down' && l.worker === server, Math.floor(killedAt))
    noticeAt = down ? down.time : null
  }
  const exit = await exitLine
  // The replacement, ready, before the next kill: every kill hits a pool of four serving workers.
  await watcher.next((l) => l.event === 'ready' && l.slot === slot && l.pid !== pid, Math.floor(killedAt))
  const ms = (at) => at === null ? null : round(at - killedAt, 1)
  return { deadMs: ms(dead), noticeMs: ms(noticeAt), reactMs: noticeAt === null || dead === null ? null : round(noticeAt - dead, 1), exitMs: ms(exit ? exit.time : null) }
}

function summary (values) {
  const v = values.filter((x) => x !== null)
  return { n: v.length, missing: values.length - v.length, median: round(median(v), 1), p90: round(percentile(v, 90), 1), max: v.length ? Math.max(...v) : null }
}

// `loadEnded()`: the load generator stopped (its time bound), so later kills would be quiet ones.
async function killRound (setup, watcher, args, loadEnded = () => false) {
  const kills = []
  for (let i = 0; i < args.kills && !loadEnded(); i++) {
    const slot = (i % WORKERS) + 1
    if (!setup.pool.ready.has(setup.pool.pids[slot])) await sleep(500)
    kills.push(await killOne(setup, watcher, slot))
    await sleep(300)
  }
  return kills
}

async function main (args) {
  const fronts = args.fronts.filter((f) => FRONTS.includes(f))
  const runnable = fronts.filter((f) => !HAPROXY_OF[f] || has(HAPROXY_OF[f]))
  const skipped = fronts.filter((f) => !runnable.includes(f)).map((f) => ({ front: f, reason: `${HAPROXY_OF[f]} not found` }))
  const rows = []
  let step = 0
  for (const front of runnable) {
    const watcher = lineWatcher()
    const setup = await startFront(front, (line) => watcher.onLine(line))
    try {
      for (const load of LOADS) {
        progress(step++, runnable.length * LOADS.length, `${front} ${load}`)
        let generator = null
        let loadResult = null
        if (load === 'loaded') {
          const seconds = Math.min(600, 10 * args.kills)
          generator = await forkReady('saturate.js', { CONFIG: JSON.stringify({ url: `${setup.url}/?ms=0`, connections: args.connections, seconds }) })
          generator.on('message', (m) => { if (m && m.result) loadResult = m.result })
          await sleep(1000) // the load is up to speed before the first kill
        }
        const kills = await killRound(setup, watcher, args, () => generator !== null && (generator.exitCode !== null || generator.signalCode !== null))
        if (generator && generator.exitCode === null && generator.signalCode === null) loadResult = await ask(generator, { cmd: 'stop' })
        const of = (key) => summary(kills.map((k) => k[key]))
        const row = { front, haproxy: setup.haproxy?.version, load, notice: of('noticeMs'), dead: of('deadMs'), react: of('reactMs'), exit: of('exitMs'), loadavg: os.loadavg()[0], loadResult, kills }
        rows.push(row)
        log(`  ${front.padEnd(9)} ${load.padEnd(7)} notice median ${row.notice.median} ms (p90 ${row.notice.p90}, max ${row.notice.max}, missing ${row.notice.missing}); ` +
          `dead ${row.dead.median}, pool's part ${row.react.median} (p90 ${row.react.p90}); exit handled ${row.exit.median}` + (loadResult ? `; load ${loadResult.rps} req/s` : ''))
      }
    } finally {
      await setup.stop()
    }
  }
  progress(step, step, 'done')
  const baseline = args.baseline ? JSON.parse(fs.readFileSync(args.baseline, 'utf8')) : null
  return {
    workers: WORKERS,
    rows,
    skipped,
    baseline: baseline ? { command: baseline.command, startedAt: baseline.startedAt, machine: baseline.machine, rows: baseline.rows } : null
  }
}

runPart('death-notice', { defaults, quick, main })
