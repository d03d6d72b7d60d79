'use strict'
// The report's section of the streams part (bench/streams.js), from a result file alone: served
// counts, memory and token delay per stream against direct, hang-ups the app never saw, and the
// issue's bounds met or not.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { buildReport } = require('../../bench/report')
const { tempDir } = require('../helpers')

const kb = (rssKb) => ({ rssKb, pssKb: rssKb / 2, processes: [] })

// One run of a cell: `complete` of `streams` served, the rest 503 (`s503`) or failed (`errors`).
function streamsRun (r) {
  const { streams, complete = streams, s503 = 0, errors = {}, idleKb, openKb, p99 } = r
  const { hangups = [1, 2, 3], render = null } = r
  const statuses = s503 ? { 503: s503 } : {}
  return {
    every: 1000,
    opened: { opened: complete, statuses: { 200: complete, ...statuses }, errors, headMs: { p50: 1, p99: 5 } },
    tokens: { tokens: 1000, p50: 0.5, p90: 1, p99, p999: p99 + 1, max: p99 + 2, open: complete, loopDelayP99: 3 },
    memory: { idle: kb(idleKb), open: kb(openKb) },
    hangup: { delays: hangups, failed: {} },
    render,
    outcome: { streams, complete, cut: 0, unfinished: 0, statuses, errors, cutKinds: {}, said: {}, tokensMissing: 0 }
  }
}

t.test('the streams section: a table per scale, the CPU-bound page, and the bounds', async (t) => {
  const dir = tempDir(t, 'pool-bench-streams-')
  const page = (p99) => ({ requests: 200, ok: 200, failed: 0, p50: p99 / 2, p99 })
  const render = (alone, beside) => ({ alone: page(alone), beside: page(beside) })
  const cell = (front, scale, run, extra = {}) => (
    { front, scale, every: scale > 1000 ? 1000 : 100, ...extra, runs: [streamsRun(run)] })
  const turnedAway = { streams: 1000, complete: 600, s503: 400, idleKb: 200000, openKb: 230000, p99: 3 }
  const half = { streams: 10000, complete: 5000 }
  const cells = [
    cell('direct', 1000, { streams: 1000, idleKb: 50000, openKb: 60000, p99: 2, render: render(40, 44) }),
    cell('embedded', 1000, { ...turnedAway, hangups: [1, 2, null], render: render(40, 80) }),
    cell('direct', 10000, { streams: 10000, idleKb: 50000, openKb: 150000, p99: 4 }),
    cell('embedded', 10000, { streams: 10000, idleKb: 200000, openKb: 400000, p99: 5 }, { descriptors: 20201 }),
    cell('haproxy', 10000, { ...half, errors: { ECONNRESET: 5000 }, idleKb: 100000, openKb: 200000, p99: 9 })
  ]
  const renders = { renders: 200, renderMs: 20, renderClients: 4, renderAt: 1000 }
  const data = {
    part: 'streams',
    version: 2,
    quick: false,
    command: 'node bench/streams.js',
    startedAt: '2026-01-01T00:00:00.000Z',
    source: { commit: 'abc1234', dirty: false, changedFiles: 0, changedPaths: [] },
    config: { workers: 2, window: 10, settle: 2, openRate: 1000, hangups: 3, ...renders },
    fronts: ['direct', 'embedded', 'haproxy'],
    skipped: [{ front: 'pm2', scale: 10000, run: 0, reason: 'pm2: not online' }],
    limits: { nofile: 20000, nofileWanted: 65536, notRaised: 'Operation not permitted', fitted: null },
    app: 'bench/lib/streams-app.js',
    cells
  }
  fs.writeFileSync(path.join(dir, 'streams.json'), JSON.stringify(data))
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  const section = md.slice(md.indexOf('## Long-lived streams'), md.indexOf('## Request bodies in memory'))
  t.match(section, /### 1,000 streams, 10 tokens a second each/)
  t.match(section, /\| embedded balancer \| 600 of 1,000 \/ 0 \/ 400 \| 0 \| 600 \|/, 'served, cut, 503; open')
  t.match(section, /\| 383\.3 \| 50\.0 \| 191\.7 \|/, 'KB per stream open: all, over idle, Pss')
  t.match(section, /> 3 s \(2 of 3\)/, 'a hang-up the app did not see within 3 s is as late as can be')
  t.match(section, /\| embedded balancer \| 40\.0 \| 80\.0 \| 2\.00× \|/, 'the CPU-bound page alone and beside')
  t.match(section, /400 not served \(\*\*not met\*\*\)/, 'none cut, none 503: not met')
  t.match(section, /0 not served \(met\)/)
  t.match(section, /\| 10,000 streams: KB per stream ≤ 3× direct's .*\| 15\.0 KB \| 2\.67× \(2\.00×\) \(met\) \|/,
    'memory against direct, run by run')
  t.match(section, /\| \+1\.00 ms \(met\) \|/, 'token p99 against direct')
  t.match(section, /\| HAProxy \| 5,000 of 10,000 \/ 0 \/ 0 \| 5,000 ECONNRESET \|/, 'failures before a head, by kind')
  t.match(section, /\(5,000 open: not judged\)/, 'memory and token bounds only where every stream was held')
  t.match(section, /\| > 3 s at 1,000 \(\*\*not met\*\*\) \|/, 'the worst hang-up p99, and where')
  t.match(section, /RLIMIT_NOFILE here: 20,000 .* at 10,000 streams embedded balancer could not hold them all/,
    'the descriptor limit is said')
  t.match(section, /Not available: PM2 cluster mode at 10,000 streams/)
})

t.test('no streams results: the section says how to get them', async (t) => {
  const dir = tempDir(t, 'pool-bench-streams-')
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  t.match(md, /Not available: long-lived streams\.\*\* No result .*; run `npm run bench -- --only streams`/)
})
