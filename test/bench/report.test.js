'use strict'
// The benchmark report's arithmetic and honesty rules, from result files alone (nothing is
// measured): medians with bootstrap intervals, runs set aside for their send lag, quick runs
// and earlier result formats marked as such.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { bootstrap, interval, keptRuns, LAG_LIMIT_MS } = require('../../bench/lib/stats')
const { buildReport } = require('../../bench/report')
const { tempDir } = require('../helpers')

t.test('bootstrap: the median of the runs with an interval around it, the same each time', async (t) => {
  const a = bootstrap([10, 12, 11, 30, 9])
  t.equal(a.value, 11)
  t.ok(a.lo <= a.value && a.value <= a.hi, 'the interval holds the median')
  t.ok(a.lo >= 9 && a.hi <= 30, 'within the values')
  t.same(bootstrap([10, 12, 11, 30, 9]), a, 'seeded: a rebuilt report shows the same interval')
  t.same(bootstrap([7]), { value: 7, lo: 7, hi: 7, n: 1 }, 'one run: no interval')
  t.same(bootstrap([]).value, null)
})

t.test('runs whose load generator fell behind are set aside, or flagged when all did', async (t) => {
  const late = { lag: { p99: LAG_LIMIT_MS + 1 }, x: 100 }
  const onTime = (x) => ({ lag: { p99: 0.4 }, x })
  const k = keptRuns([onTime(1), late, onTime(3)])
  t.equal(k.runs.length, 2)
  t.equal(k.rejected, 1)
  const iv = interval([onTime(1), late, onTime(3)], 'x')
  t.equal(iv.value, 2, 'the late run does not count')
  t.equal(iv.runs, 3)
  const all = interval([late, late], 'x')
  t.equal(all.allRejected, true)
  t.equal(all.value, 100, 'a flagged figure rather than none')
})

function run (over) {
  return {
    requests: 100,
    ok: 100,
    failed: 0,
    failedByKind: {},
    rps: 200,
    p50: 30,
    p90: 80,
    p99: 200,
    max: 300,
    timedOut: 0,
    ...over
  }
}

t.test('the report shows intervals, set-aside runs, censored latencies and quick runs', async (t) => {
  const dir = tempDir(t, 'pool-bench-report-')
  const matrix = {
    part: 'matrix',
    version: 2,
    quick: true,
    command: 'node bench/matrix.js --quick',
    startedAt: '2026-01-01T00:00:00.000Z',
    source: { commit: 'abc1234', dirty: true, changedFiles: 2, changedPaths: ['docs/guide/x.md', 'lib/a.js'] },
    config: {
      workers: 15,
      median: 30,
      sigma: 0.8,
      timeout: 3000,
      clientTimeout: 5,
      connections: [13],
      repeats: 3,
      abRequests: 300,
      keepAliveRequests: 300,
      incidentRepeats: 1,
      incidentSeconds: 2,
      openSeconds: 3,
      stuckSeconds: 5
    },
    views: ['ab'],
    closed: [
      {
        view: 'ab',
        scenario: 'normal',
        connections: 13,
        front: 'embedded',
        runs: [run({ p99: 190 }), run({ p99: 200 }), run({ p99: 210 })]
      },
      {
        view: 'ab',
        scenario: 'kill',
        connections: 13,
        front: 'cluster',
        runs: [run({ failed: 3, timedOut: 2, kills: [{ at: 1 }] })]
      }
    ],
    open: [{
      open: true,
      scenario: 'kill',
      front: 'pm2',
      rho: 0.7,
      runs: [run({ offered: 500, ok: 490, failed: 10, lag: { p99: 1 } }),
        run({ offered: 500, ok: 500, failed: 0, lag: { p99: 50 } })]
    }],
    stuck: []
  }
  fs.writeFileSync(path.join(dir, 'matrix.json'), JSON.stringify(matrix))
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  t.match(md, /\| 200 \[190–210\] \|/, 'p99: the median of three runs with its interval')
  t.match(md, /200 ‡/, 'a latency with clients that gave up is marked as censored')
  t.match(md, /1 of 2 \(1 set aside: send lag\)/, 'the late open-loop run is counted apart')
  t.match(md, /\| 20\.0 \|/, 'and does not count: 10 failed of 500 offered is 20 per 1,000')
  t.match(md, /Quick run/, 'a quick run says so')
  t.match(md, /commit abc1234 with 2 changed or untracked files \(`docs\/guide\/x\.md`, `lib\/a\.js`\)/,
    'the changed files are named')
  t.ok(fs.existsSync(path.join(dir, 'charts', 'matrix-latency.svg')))
})

t.test('the committed results of earlier formats still make a report', async (t) => {
  const dir = tempDir(t, 'pool-bench-report-')
  const out = path.join(dir, 'report.md')
  const results = path.join(__dirname, '..', '..', 'bench', 'results')
  await buildReport({
    resultsDir: results,
    outFile: out,
    chartsDir: path.join(dir, 'charts'),
    run: JSON.parse(fs.readFileSync(path.join(results, 'run.json'), 'utf8'))
  })
  const md = fs.readFileSync(out, 'utf8')
  t.notMatch(md, /Not available: the matrix/)
})

t.test('the fleet section reports DNS discovery: join times and what a departure cost', async (t) => {
  const dir = tempDir(t, 'pool-report-')
  const cell = (edge, model) => ({
    rho: 0.8,
    edge,
    model,
    runs: [{ requests: 100, errors: 0, rps: 200, p50: 35, ideal50: 30, p99: 200, ideal99: 190, lag: { p99: 1 } }]
  })
  const rounds = [{ joinMs: 300, requests: 700, failed: 0 }, { joinMs: 450, requests: 690, failed: 1 },
    { joinMs: null, requests: 710, failed: 0 }]
  fs.writeFileSync(path.join(dir, 'fleet.json'),
    JSON.stringify({
      mode: 'netns',
      config: { hosts: 3, perHost: 5 },
      cells: [cell('agent'), cell('rr'), cell('split 3', true)],
      discovery: { resolveInterMs: 500, rho: 0.5, rounds }
    }))
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  t.match(md,
    /over 3 rounds, a host whose record appeared was sent its first request after 300 ms \(median; 300–450 ms\), 1 round not within 4 s/)
  t.match(md, /cost 1 failed of 2,100 requests/)
})

t.test("README's measured figures come from the results, written between its markers only", async (t) => {
  const { summary, writeSummary, START, END } = require('../../bench/report/summary')
  const results = path.join(__dirname, '..', '..', 'bench', 'results')
  const text = summary(results)
  t.match(text, /p99 latency against the ideal central queue's: [\d.]+× with the embedded balancer/)
  t.match(text, /\(\[the matrix\]\(docs\/benchmarks\.md#the-operators-matrix\)\)/)
  const dir = tempDir(t, 'pool-bench-readme-')
  const file = path.join(dir, 'README.md')
  fs.writeFileSync(file, `# x\n\nbefore\n${START}\n- an old figure\n${END}\nafter\n`)
  t.equal(writeSummary(results, file), true)
  const after = fs.readFileSync(file, 'utf8')
  t.equal(after, `# x\n\nbefore\n${START}\n${text}\n${END}\nafter\n`, 'only the block changes')
  fs.writeFileSync(file, '# no block\n')
  t.equal(writeSummary(results, file), false, 'a file without the markers is left alone')
})

t.test('the overload section: where a FIFO keeps up, on against off; closed-loop clients shape by shape, ' +
  'against the issue\'s bounds', async (t) => {
  const dir = tempDir(t, 'pool-bench-report-')
  const open = (over) => ({
    offered: 430,
    capacity: 360,
    goodput: 430,
    share: 1.19,
    p50: 40,
    p99: 600,
    turnedAway: 0,
    gaveUp: 0,
    errors: 0,
    requests: 860,
    lag: { p99: 1 },
    drainS: 0.2,
    drained: true,
    ...over
  })
  const closed = (over) => ({
    requests: 100,
    ok: 100,
    turnedAway: 0,
    failed: 0,
    failedByKind: {},
    rps: 10,
    p50: 1200,
    p99: 1400,
    ...over
  })
  const { RENDERS, BURST } = require('../../bench/lib/overload-shapes')
  const overload = {
    part: 'overload',
    version: 2,
    quick: false,
    command: 'node bench/overload.js',
    startedAt: '2026-01-01T00:00:00.000Z',
    source: { commit: 'abc1234', dirty: false, changedFiles: 0, changedPaths: [] },
    config: { workers: 15, median: 30, sigma: 0.8, deadline: 1000, measure: 2, warmup: 1, runs: 2 },
    fronts: ['embedded-oc', 'embedded-fifo'],
    cells: [
      { load: 1.2, warmup: 1, front: 'embedded-oc', runs: [open(), open()] },
      { load: 1.2, warmup: 1, front: 'embedded-fifo', runs: [open(), open()] },
      {
        load: 2,
        warmup: 2,
        front: 'embedded-oc',
        runs: [open({ share: 1.2, turnedAway: 0.4 }), open({ share: 1.21, turnedAway: 0.4 })]
      },
      {
        load: 2,
        warmup: 2,
        front: 'embedded-fifo',
        runs: [open({ share: 0.01, gaveUp: 0.99 }), open({ share: 0.02, gaveUp: 0.98 })]
      }
    ],
    mixed: [
      { load: 1.5, warmup: 3, front: 'embedded-oc', runs: [open({ share: 1.1 })] },
      { load: 1.5, warmup: 3, front: 'embedded-fifo', runs: [open({ share: 0.2, gaveUp: 0.8 })] }
    ],
    closed: [
      { workers: 2, clients: 13, render: 'await', seconds: 6, front: 'embedded-oc', runs: [closed(), closed()] },
      { workers: 2, clients: 13, render: 'await', seconds: 6, front: 'embedded-fifo', runs: [closed(), closed()] },
      {
        workers: 2,
        clients: 50,
        render: 'cpu',
        seconds: 6,
        front: 'embedded-oc',
        runs: [closed({ p99: 2000, turnedAway: 3, failed: 3 })]
      },
      { workers: 2, clients: 50, render: 'cpu', seconds: 6, front: 'embedded-fifo', runs: [closed()] }
    ],
    renders: RENDERS,
    burst: BURST
  }
  fs.writeFileSync(path.join(dir, 'overload.json'), JSON.stringify(overload))
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  const keepsUp = md.slice(md.indexOf('Where a FIFO answers every request in time'), md.indexOf('### Mixed routes'))
  t.match(keepsUp, /\| 1\.2× \| 119% \| 119% \|.*\| yes \|/, 'where the FIFO keeps up (1.2×): on against off, no worse')
  t.notMatch(keepsUp, /\| 2× \|/, 'not where its clients gave up (2×)')
  t.match(md, /\| 2× \| 2 \| embedded, overload control \(default\) \|/, 'the warm-up of each load is shown')
  t.match(md, /80% of 10 ms and 20% of 250 ms/, 'the mixed routes are named')
  t.match(md, /1 of 2 shapes with nothing turned away and p99 within 1\.1× of the FIFO's/,
    'the closed-loop verdict counts the shapes that keep the bounds')
  t.match(md, /\| 2 \| awaits data \| 13 \| 1400 \| 1400 \| 1\.00× \| 0 \| 0 \| 200 \|/)
  t.match(md, /\| 2 \| CPU \| 50 \| 2000 \| 1400 \| 1\.43× \| 3 \| 0 \| 100 \|/)
  for (const chart of ['overload-goodput', 'overload-mixed', 'overload-closed']) {
    t.ok(fs.existsSync(path.join(dir, 'charts', `${chart}.svg`)), chart)
  }
  const { summary } = require('../../bench/report/summary')
  t.match(summary(dir), /the defaults turned away 3 of 300 requests, with a p99 at most 1\.43× a FIFO's/)
})

t.test('the soak: before and after side by side, reloads asked / answered / run, ' +
  'and a note when their lengths differ', async (t) => {
  const dir = tempDir(t, 'pool-bench-report-')
  const counts = {
    requests: 1000,
    ok: 990,
    failed: 10,
    failedShare: 0.01,
    failedByStatus: { 503: 10 },
    failedWhy: { queue_shed: 10 },
    kills: [2, 4, 6]
  }
  const soakRun = (over) => ({
    ...counts,
    capacity: { target: 4, mean: 3.9, min: 3, withinOne: 1, samples: 100 },
    reloads: { asked: 2, answered: 2, run: 2, failedRun: 0, each: [{ askedS: 30, answeredS: 31, code: 0 }] },
    backoff: { respawns: 3, maxDelayMs: 0, p90DelayMs: 0, atCap: 0 },
    bins: [{ t: 0, ok: 100, failed: 0, readyMin: 4, readyMean: 4 },
      { t: 1, ok: 90, failed: 10, readyMin: 3, readyMean: 3.5 }],
    ...over
  })
  const config = {
    duration: 300,
    workers: 4,
    rho: 0.6,
    median: 20,
    sigma: 0.5,
    'kill-every': 2,
    'reload-every': 30,
    deadline: 10000
  }
  const envelope = {
    part: 'soak',
    version: 2,
    quick: false,
    command: 'node bench/soak.js',
    source: { commit: 'new1234' },
    config,
    sampleMs: 100,
    binS: 1
  }
  fs.writeFileSync(path.join(dir, 'soak.json'), JSON.stringify({
    ...envelope,
    run: soakRun(),
    baseline: {
      command: 'node bench/soak.js --quick',
      startedAt: '2026-01-01T00:00:00.000Z',
      source: { commit: 'old1234' },
      config: { ...config, duration: 75 },
      run: soakRun({
        failed: 200,
        failedShare: 0.2,
        failedWhy: { queue_shed: 150, queue_timeout: 50 },
        reloads: { asked: 10, answered: 4, run: 4, each: [] },
        backoff: { respawns: 30, maxDelayMs: 15000, atCap: 25 }
      })
    }
  }))
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  t.match(md,
    /\| before \(old1234\) \| 75 \| 3 \| 1,000 \| 200 \(20\.00%\) \| 150 queue_shed, 50 queue_timeout \| 3\.9 \/ 3 \(4\) \| 100\.0% \| 10 \/ 4 \/ 4 \| 15,000 \| 25 \|/)
  t.match(md,
    /\| after \(new1234\) \| 300 \| 3 \| 1,000 \| 10 \(1\.00%\) \| 10 queue_shed \| 3\.9 \/ 3 \(4\) \| 100\.0% \| 2 \/ 2 \/ 2 \| 0 \| 0 \|/)
  t.match(md, /The two runs differ in length \(75 s before, 300 s after\)/)
  t.ok(fs.existsSync(path.join(dir, 'charts', 'soak.svg')), 'the chart of capacity and failures over time')
})

t.test('the HAProxy parts name the HAProxy each configuration ran', async (t) => {
  const dir = tempDir(t, 'pool-bench-report-')
  const kill = (id, haproxy) => ({
    id,
    haproxy,
    drive: true,
    checks: 'check + observe',
    seconds: 8,
    kills: 8,
    ok: 3000,
    failed: 1,
    failedByKind: { closed: 1 },
    rps: 375,
    maintMs: [0.4]
  })
  fs.writeFileSync(path.join(dir, 'haproxy-kill.json'),
    JSON.stringify({
      workers: 4,
      clients: 12,
      renderMs: 20,
      runs: [kill('a', 'HAProxy 2.6.12'), kill('g', 'HAProxy 3.0.11')]
    }))
  const out = path.join(dir, 'report.md')
  await buildReport({ resultsDir: dir, outFile: out, chartsDir: path.join(dir, 'charts'), run: null })
  const md = fs.readFileSync(out, 'utf8')
  t.match(md, /The rows ran HAProxy 2\.6\.12 \(run a\), HAProxy 3\.0\.11 \(run g\)\./)
})
