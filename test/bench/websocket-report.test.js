'use strict'
// The report's section of the websocket part (bench/websocket.js), from a result file alone:
// tunnels held and their memory against direct's, the echo against direct's, echoes a second,
// an HTTP page beside the echo, a reload's closes, a front that failed, and the bounds.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { buildReport } = require('../../bench/report')
const { tempDir } = require('../helpers')

const kb = (rssKb) => ({ rssKb, pssKb: rssKb / 2, processes: [] })
const page = (p99, failed = 0) => ({
  requests: 200, ok: 200 - failed, failed, failedByKind: failed ? { timeout: failed } : {}, p50: p99 / 2, p99
})

// One run of a cell: `opened` of `asked` sockets, memory idle and held; at the active scale the
// echo (`p99`), the page alone and beside, the throughput and, for the pool's fronts, a reload.
function wsRun (r) {
  const { asked, opened = asked, failed = {}, idleKb, heldKb, quietKb, p99, active = true } = r
  const run = {
    rampMs: asked,
    steps: {},
    failed: r.stepFailed ?? {},
    opened: { asked, opened, failed, rampS: 1, handshakeMs: { p50: 1, p99: 4, max: 5 } },
    memory: { idle: kb(idleKb), held: kb(heldKb), ...(quietKb ? { quiet: kb(quietKb) } : {}) },
    end: { closed: opened, codes: { 1000: opened }, destroyed: 0 }
  }
  if (!active) return run
  const echo = {
    targets: opened,
    sent: 10000,
    received: 10000,
    lost: 0,
    p50: 0.2,
    p90: 0.5,
    p99,
    p999: p99 + 1,
    max: p99 + 2,
    sendLagP99: 0.5,
    loopDelayP99: 0.4,
    open: opened
  }
  run.echo = echo
  run.render = { alone: page(40), beside: page(r.beside ?? 42, r.besideFailed), echo: { ...echo, p99: p99 + 1 } }
  run.throughput = {
    sockets: 50,
    depth: 32,
    bytes: 64,
    messages: r.perSecond * 5,
    seconds: 5,
    perSecond: r.perSecond,
    lateOrLost: 0,
    clientCpu: 0.9,
    loopDelayP99: 1,
    serverCores: r.serverCores
  }
  if (r.reload) run.reload = r.reload
  return run
}

t.test('the websocket section: tunnels held, echo, throughput, page beside, reload, and the bounds', async (t) => {
  const dir = tempDir(t, 'pool-bench-websocket-')
  const cell = (front, scale, run) => ({ front, scale, descriptors: 2 * scale + 200, runs: [wsRun(run)] })
  const reload = {
    ms: 800,
    code: 0,
    gracefulS: 10,
    http: { requests: 1000, ok: 997, failed: 3, failedByKind: { closed: 3 }, seconds: 1.8, p50: 3, p99: 9 },
    closes: { open: 0, closed: 1000, codes: { 1006: 1000 }, afterMarkMs: { first: 700, p50: 900, last: 1200 } }
  }
  const cells = [
    cell('direct', 1000, { asked: 1000, idleKb: 50000, heldKb: 60000, p99: 1, perSecond: 100000, serverCores: 0.5 }),
    cell('embedded', 1000, {
      asked: 1000, idleKb: 200000, heldKb: 230000, p99: 1.5, perSecond: 80000, serverCores: 1.2, beside: 48, reload
    }),
    cell('cluster', 1000, { asked: 1000, idleKb: 150000, heldKb: 170000, p99: 3, perSecond: 90000, serverCores: 0.8 }),
    cell('haproxy', 1000, {
      asked: 1000,
      opened: 2,
      failed: { 503: 998 },
      idleKb: 100000,
      heldKb: 101000,
      p99: 1,
      perSecond: 50000,
      serverCores: 0.5,
      besideFailed: 4,
      stepFailed: { throughputS: 'the client did not answer throughput within 37000 ms' }
    }),
    cell('nginx-haproxy', 1000, {
      asked: 1000,
      opened: 0,
      failed: { 404: 1000 },
      idleKb: 280000,
      heldKb: 290000,
      p99: 1,
      perSecond: 0,
      serverCores: null
    }),
    cell('direct', 9000, { asked: 9000, idleKb: 50000, heldKb: 140000, quietKb: 140000, active: false }),
    cell('embedded', 9000, { asked: 9000, idleKb: 200000, heldKb: 470000, quietKb: 380000, active: false })
  ]
  const data = {
    part: 'websocket',
    version: 2,
    quick: false,
    command: 'node bench/websocket.js',
    startedAt: '2026-01-01T00:00:00.000Z',
    source: { commit: 'abc1234', dirty: false, changedFiles: 0, changedPaths: [] },
    config: {
      fronts: ['direct', 'embedded', 'cluster', 'haproxy', 'nginx-haproxy'],
      scales: [1000, 10000],
      activeAt: 1000,
      workers: 2,
      openRate: 1000,
      settle: 2,
      rate: 1000,
      window: 10,
      renders: 200,
      renderMs: 20,
      renderClients: 2,
      tpSockets: 50,
      tpDepth: 32,
      tpBytes: 64,
      tpSeconds: 5,
      graceful: 10,
      reloadClients: 2,
      reloadPageMs: 2,
      runs: 1,
      nofile: 65536,
      fit: 1
    },
    fronts: ['direct', 'embedded', 'cluster', 'haproxy', 'nginx-haproxy'],
    skipped: [{ front: 'nginx-haproxy', scale: 9000, run: 0, reason: 'nginx exited before it was ready' }],
    limits: {
      nofile: 20000, nofileWanted: 65536, notRaised: 'Operation not permitted', fitted: 9000, fittedFor: [10000]
    },
    app: 'bench/lib/ws-app.js',
    bin: 'bin/pool.js',
    cells
  }
  // A front that opened no socket echoed nothing and got nothing through.
  const none = cells.find((c) => c.front === 'nginx-haproxy').runs[0]
  Object.assign(none.echo, {
    targets: 0, sent: 0, received: 0, p50: null, p90: null, p99: null, p999: null, max: null, sendLagP99: null
  })
  Object.assign(none.throughput, { sockets: 0, messages: 0, perSecond: null, clientCpu: null })
  fs.writeFileSync(path.join(dir, 'websocket.json'), JSON.stringify(data))
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  const section = md.slice(md.indexOf('## WebSockets'), md.indexOf('## Request bodies in memory'))
  t.match(section, /### 1,000 sockets held idle/)
  t.match(section, /### 9,000 sockets held idle \(the largest that fits the descriptor limit, for the issue's 10,000\)/)
  t.match(section, /\| embedded balancer \| 1,000 of 1,000 \| 0 \| 1\.0 \/ 4\.0 \| 30\.0 \| 15\.0 \| 3\.00× \/ 3\.00× \| 195 → 225 \|/,
    'memory per tunnel over idle, RSS and Pss, against direct\'s')
  t.match(section, /\| embedded balancer \| 9,000 of 9,000 \| 0 \| .* \| 30\.0 \| 15\.0 \| 3\.00× \/ 3\.00× \| .* \| 20\.0 \(2\.00×\) \|/,
    'and at 9,000, with the memory once quiet')
  t.match(section, /\| embedded balancer \| 1,000 of 1,000 \| .* \| 195 → 225 \| – \|/, 'a run without the quiet sample: none shown')
  t.match(section, /\| 9,000 sockets held idle: RSS per tunnel ≤ 3× direct's \(after the settle \/ once quiet\) \| – \| 3\.00× \(met\) \/ 2\.00× \(met\) \| – \|/,
    'the memory bound at the largest scale, after the settle and once quiet')
  t.match(section, /\| HAProxy \| 2 of 1,000 \| 998 503 \| .* \| 500\.0 \(over 2 opened\) \| .* \| not judged \(not all opened\) \|/,
    'a front that opened few: its failures by kind, its memory not judged')
  t.match(section, /\| embedded balancer \| 10,000 of 10,000 \(1,000\) \| 0\.20 \/ 1\.50 \/ 2\.50 \| \+0\.00 \/ \+0\.50 \| 1\.50× \|/,
    'the echo against direct\'s')
  t.match(section, /\| embedded balancer \| 50 × 32 \| 80,000 \| 0\.80× \| 0\.90 \| 1\.20 \| 15\.00 \|/, 'echoes a second, the CPU per message')
  t.match(section, /\| embedded balancer \| 40\.0 \| 48\.0 \| 1\.20× \|/, 'the page alone and beside')
  t.match(section, /\| embedded balancer \| 0\.8 \(10 s\) \| 0\.08× \| 3 of 1,000 \(3 closed\) \| 1006 × 1,000 \| 0\.7 \/ 0\.9 \/ 1\.2 \| 0 \|/,
    'the reload: its time, failed GETs, close codes and when they came')
  t.match(section, /\| echo p99 ≤ direct's \+ 1 ms .*\| 1\.00 ms \| \+0\.50 ms \(met\) \| \+2\.00 ms \(\*\*not met\*\*\) \| \+0\.00 ms \(not all opened: not judged\) \|/,
    'the echo bound, judged only where every socket opened')
  t.match(section, /\| HTTP page p99 beside the echo ≤ 1\.1× alone \| 1\.05× \(met\) \| 1\.20× \(\*\*not met\*\*\) \| 1\.05× \(met\) \| .*\(\*\*not met\*\*: 4 failed beside\) \|/,
    'a page that failed beside the echo does not meet the bound')
  t.match(section, /\| no GET failed during the reload \| – \| 3 failed \(\*\*not met\*\*\) \| – \| – \|/, 'failed GETs during the reload')
  t.match(section, /\| 1,000 sockets: every one opened \| 0 not opened \(met\) .*\| 998 not opened \(\*\*not met\*\*\) \|/, 'every socket opened')
  t.match(section, /RLIMIT_NOFILE here: 20,000 .*so 10,000 sockets would not fit: 9,000, the largest round number that does, were measured instead/,
    'the descriptor limit is said')
  t.match(section, /Not available: some steps\.\*\* HAProxy at 1,000 sockets: throughput \(the client did not answer/, 'a step that failed')
  t.match(section, /Not available: nginx → HAProxy at 9,000 sockets\.\*\* nginx exited before it was ready/, 'a front that failed')
  t.match(section, /\| nginx → HAProxy \| 0 of 0 \(0\) \| – \/ – \/ – \| – \/ – \| – \|/, 'no echo: nothing against direct\'s')
  t.match(section, /\| nginx → HAProxy \| 0 × 32 \| – \| – \| – \| – \| – \|/, 'nothing through: no ratio, no CPU')
})

t.test('memory against a plain process that grew by next to nothing: no ratio', async (t) => {
  const dir = tempDir(t, 'pool-bench-websocket-')
  const held = (front, idleKb, heldKb) => ({
    front, scale: 1000, runs: [wsRun({ asked: 1000, idleKb, heldKb, active: false })]
  })
  const data = {
    part: 'websocket',
    config: { activeAt: 1000, workers: 2, openRate: 1000, settle: 2, rate: 1000, window: 10, graceful: 10, runs: 1 },
    fronts: ['direct', 'embedded'],
    skipped: [],
    limits: { nofile: 65536, fitted: null },
    app: 'bench/lib/ws-app.js',
    cells: [held('direct', 60000, 60500), held('embedded', 200000, 220000)]
  }
  fs.writeFileSync(path.join(dir, 'websocket.json'), JSON.stringify(data))
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  t.match(md, /\| direct \(no front\) \| 1,000 of 1,000 \| 0 \| .* \| 0\.5 \| 0\.3 \| – \|/)
  t.match(md, /\| embedded balancer \| 1,000 of 1,000 \| 0 \| .* \| 20\.0 \| 10\.0 \| – \/ – \|/, 'under 1 KB per socket: its heap had room')
  t.notMatch(md, /RLIMIT_NOFILE here/, 'no limit to speak of')
})

t.test('no websocket results: the section says how to get them', async (t) => {
  const dir = tempDir(t, 'pool-bench-websocket-')
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  t.match(md, /Not available: WebSockets\.\*\* No result .*; run `npm run bench -- --only websocket`/)
})
