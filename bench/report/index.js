'use strict'

// Writes the benchmark report (docs/benchmarks.md and its SVG charts) from the results
// directory alone: each part's result file and run.json, the orchestrator's record of when and
// how each part ran. Nothing is measured here, so the report can be rebuilt at any time, and a
// part rerun with `--only` shows up next to the stored results of the others.

const fs = require('node:fs')
const path = require('node:path')
const load = require('./adapters')
const charts = require('./charts')
const { toSvg } = require('./vega')
const { label } = require('./style')
const { PARTS } = require('./parts')
const { interval, median, LAG_LIMIT_MS } = require('../lib/stats')
const { costTargets } = require('../lib/cost-targets')

// ── formatting ──────────────────────────────────────────────────────────────────────────────

const finite = (x) => typeof x === 'number' && Number.isFinite(x)
const ms = (x) => (finite(x) ? (x >= 100 ? x.toFixed(0) : x.toFixed(1)) : '–')
const ms3 = (x) => (finite(x) ? x.toFixed(3) : '–')
const times = (x) => (finite(x) ? `${x.toFixed(2)}×` : '–')
const pct = (x) => (finite(x) ? `${(x * 100).toFixed(0)}%` : '–')
const int = (x) => (finite(x) ? Math.round(x).toLocaleString('en-US') : '–')
const secs = (s) => (finite(s) ? (s >= 90 ? `${Math.floor(s / 60)} min ${Math.round(s % 60)} s` : `${Math.round(s)} s`) : '–')
const when = (iso) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '–')

// A cell measured over several runs: the median and its bootstrap 95% interval, "41.2
// [39.8–43.0]"; one run: the value alone. `iv` from stats.interval(); `f` formats a number.
function ci (iv, f = ms) {
  if (!iv || !finite(iv.value)) return '–'
  const mark = iv.allRejected ? ' ⚠' : ''
  return iv.n > 1 && iv.lo !== iv.hi ? `${f(iv.value)} [${f(iv.lo)}–${f(iv.hi)}]${mark}` : `${f(iv.value)}${mark}`
}

// How many runs a figure rests on, and how many were set aside for their send lag.
function runsCell (iv) {
  if (!iv) return '–'
  if (iv.allRejected) return `${iv.runs} ⚠ all over the send-lag limit`
  return iv.rejected ? `${iv.n} of ${iv.runs} (${iv.rejected} set aside: send lag)` : String(iv.n)
}

// A long table folded away under one line, so that the charts stay next to each other.
async function nonReadersSection (r, dir, run) {
  const data = load.nonReaders(dir)
  r.add('## Clients that read nothing', 'What clients that ask for a large response and never read a byte of it cost the clients that read: pages fetched one after the other by the good clients alone, then beside the non-readers once they have filled what they can (the response budget, the connections to the workers, the kernel buffers). A client that does not read should cost only itself.')
  if (!data?.rows?.length) return r.add(missing(run, 'non-readers', 'clients that read nothing'))
  const c = data.config
  const shape = (x) => `${x.clients}${x.flags.length ? ` (${x.flags.join(' ')})` : ''}`
  r.add(table(['non-readers', 'pages/s alone', 'beside them', 'ratio', 'failed beside', 'workers killed'], data.rows.map((x) => [
    shape(x), x.alone.perSecond, x.beside.perSecond, x.ratio === null ? '–' : `${x.ratio}×`, x.beside.failed, x.killed
  ])))
  r.add(`Pool of ${c.workers} workers at its defaults unless the row says otherwise; non-readers ask for ${c.bigKb / 1024} MB each; ${c.goodClients} good clients fetch ${c.pageKb} KB pages for ${c.window} s, ${c.settle} s after the non-readers connected; one run per row.`)
  r.add(provenance(run, 'non-readers'))
}

function folded (summary, body) {
  return `<details><summary>${summary}</summary>\n\n${body}\n\n</details>`
}

function table (header, rows) {
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n')
}

// ── the document ────────────────────────────────────────────────────────────────────────────

class Report {
  constructor ({ outFile, chartsDir }) {
    this.outFile = outFile
    this.chartsDir = chartsDir
    this.lines = []
    this.figures = []
  }

  add (...blocks) {
    for (const b of blocks) if (b !== null && b !== undefined && b !== '') this.lines.push(b, '')
  }

  // Renders `spec` to CHARTS/NAME.svg and returns the markdown that shows it.
  async figure (name, spec, alt) {
    if (!spec) return null
    const svg = await toSvg(spec)
    fs.mkdirSync(this.chartsDir, { recursive: true })
    fs.writeFileSync(path.join(this.chartsDir, `${name}.svg`), svg)
    this.figures.push(`${name}.svg`)
    const rel = path.relative(path.dirname(this.outFile), path.join(this.chartsDir, `${name}.svg`)).split(path.sep).join('/')
    return `![${alt}](${rel})`
  }

  write () {
    fs.mkdirSync(path.dirname(this.outFile), { recursive: true })
    fs.writeFileSync(this.outFile, this.lines.join('\n').replace(/\n{3,}/g, '\n\n').trim() + '\n')
    // Charts of an earlier report that this one no longer has would only mislead.
    fs.mkdirSync(this.chartsDir, { recursive: true })
    for (const f of fs.readdirSync(this.chartsDir)) {
      if (f.endsWith('.svg') && !this.figures.includes(f)) fs.rmSync(path.join(this.chartsDir, f))
    }
  }
}

// How a part was made: its command, when, how long, on which commit (and whether the tree had
// changes, untracked files included), the load average around it; whether it was a quick run;
// and whether a later attempt failed (its results are then the ones before). `data`: the part's
// result file, whose own record (commit, machine, quick) is used when run.json has none.
function provenance (run, name, fallback, data) {
  const p = run?.parts?.[name]
  const failed = p?.lastFailure ? ` Its last run (\`${p.lastFailure.command}\` at ${when(p.lastFailure.startedAt)}) ${p.lastFailure.status}: these results are from before it.` : ''
  const src = data?.source ?? p?.source
  const named = src?.changedPaths?.length ? ` (${src.changedPaths.map((f) => `\`${f}\``).join(', ')}${src.changedFiles > src.changedPaths.length ? ', …' : ''})` : ''
  const commit = src?.commit ? ` On commit ${src.commit}${src.dirty ? ` with ${src.changedFiles} changed or untracked file${src.changedFiles === 1 ? '' : 's'}${named}` : ''}.` : ' Commit not recorded (an earlier format).'
  const quick = data?.quick || p?.quick ? ' **Quick run (`--quick`): fewer and shorter runs, for checking the machinery; not for conclusions.**' : ''
  if (!p || p.status !== 'ok') {
    const made = data?.command ? `Made by \`${data.command}\`${data.startedAt ? ` at ${when(data.startedAt)}` : ''} (not by \`npm run bench\`).` : fallback ? `Made by \`${fallback}\` (not by \`npm run bench\`: no record of when).` : ''
    return (made + (made ? commit : '') + quick + failed).trim() || null
  }
  const load = p.loadavgBefore ? ` Load average ${p.loadavgBefore.join(' ')} before, ${p.loadavgAfter?.join(' ') ?? '–'} after.` : ''
  return `Made by \`${p.command}\` at ${when(p.startedAt)}, in ${secs(p.seconds)}.${commit}${load}${quick}${failed}`
}

function notAvailable (what, why) {
  return `> **Not available: ${what}.** ${why}`
}

// What a part skipped ([{ reason, ... }], each named by `nameOf`), as one note; null if nothing.
function skippedNote (skipped, nameOf = (s) => s.front) {
  if (!skipped?.length) return null
  return notAvailable(skipped.map(nameOf).join(', '), skipped.map((s) => s.reason).join('; '))
}

// Why a part has no result: its last run failed or was skipped, or it never ran.
function missing (run, name, what) {
  const p = run?.parts?.[name]
  const last = p?.lastFailure ?? (p && p.status !== 'ok' ? p : null)
  if (last) return notAvailable(what, `Its last run (\`${last.command}\`${last.startedAt ? ` at ${when(last.startedAt)}` : ''}) ${last.status.startsWith('skipped') ? `was ${last.status}` : `${last.status}; its output is in the log of \`npm run bench\``}.`)
  return notAvailable(what, `No result in the results directory; run \`npm run bench -- --only ${name}\`.`)
}

// ── sections ────────────────────────────────────────────────────────────────────────────────

// A ratio of two figures of each run (the front's p-th percentile over the ideal's), as an interval.
const ratioOf = (cell, p) => interval(cell.runs, (x) => (x[`ideal${p}`] > 0 ? x[`p${p}`] / x[`ideal${p}`] : NaN))
const lagCell = (runs) => ci(interval(runs.map((x) => ({ v: x.lag?.p99 })), 'v'), (v) => v.toFixed(1))

async function latencySection (r, dir, run) {
  const data = load.balancer(dir)
  r.add('## Latency against the ideal central queue', 'Open-loop Poisson arrivals (a new connection per request, sent on schedule by a load generator in a process of its own) with lognormal service times at each load ρ, replayed identically on every front; the ideal is computed from the very same arrivals and service times: one FIFO queue over all the workers, zero overhead. A front at 1.00× is as good as a central queue can be.')
  if (!data?.cells?.length) return r.add(missing(run, 'balancer', 'latency against the ideal'))
  if (data.legacy) r.add('> **From an earlier format of this part:** the runs of each cell pooled into one figure (no interval), HAProxy from a hand-written config, no PM2, no queue wait; `npm run bench -- --only balancer` measures it as described here.')
  const a = data.config ?? {}
  if (!data.legacy) r.add(`${a.workers} workers, service times lognormal (median ${a.median} ms, σ ${a.sigma}, mean ${data.workload?.mean} ms, cap ${a.cap} ms); ${a.runs} runs of ${a.seconds} s per front and ρ, each run one schedule sent to every front in turn. Fronts: \`pool start\` (the embedded balancer), \`pool start --balancer haproxy\` with the generated config (\`nbthread 1\`; "HAProxy 3.0": the same on Debian 13's HAProxy), Node's cluster (round-robin), PM2 ${pm2Version(run)}cluster mode; each with ${a.workers} workers of its own. Runs whose send lag p99 exceeded ${LAG_LIMIT_MS} ms are set aside.`)
  r.add(haproxyRan(Object.entries(data.haproxy ?? {})))
  r.add(await r.figure('latency-ratio', charts.ratioVsLoad(data.cells, ratioOf, { title: 'Latency against the ideal central queue', subtitle: `p50 and p99 as a multiple of the ideal's, same arrivals and service times; ${data.legacy ? 'one pooled figure per point' : 'median of the runs with its 95% interval'}` }), 'p50 and p99 latency as a multiple of the ideal, per front, against the load, with 95% intervals'))
  r.add(table(['ρ', 'front', 'runs', 'req/s', 'p50 ms (ideal)', 'p99 ms (ideal)', 'p50 ÷ ideal', 'p99 ÷ ideal', 'errors', 'send lag p99 ms'], data.cells.map((c) => {
    const p = (k) => interval(c.runs, k)
    return [c.rho, label(c.front), runsCell(p('p50')), int(p('rps').value), `${ci(p('p50'))} (${ci(p('ideal50'))})`, `${ci(p('p99'))} (${ci(p('ideal99'))})`, ci(ratioOf(c, 50), times), ci(ratioOf(c, 99), times), int(c.runs.reduce((n, x) => n + (x.errors ?? 0), 0)), lagCell(c.runs)]
  })))
  if (data.cells.some((c) => c.runs[0]?.wait)) {
    r.add('The hop itself, in ms: the queue wait of each request (its latency minus the service time it asked for) against the ideal\'s wait for the same requests. The difference is what the front adds per request, queueing included, without the service time\'s tail diluting it.')
    r.add(table(['ρ', 'front', 'mean wait ms', 'ideal mean wait ms', 'added per request ms', 'p99 wait ms (ideal)'], data.cells.filter((c) => c.runs[0]?.wait).map((c) => {
      const w = (f) => interval(c.runs, f)
      return [c.rho, label(c.front), ci(w((x) => x.wait.mean), ms3), ci(w((x) => x.idealWait.mean), ms3), ci(w((x) => x.wait.mean - x.idealWait.mean), ms3), `${ci(w((x) => x.wait.p99))} (${ci(w((x) => x.idealWait.p99))})`]
    })))
  }
  const tail = data.samples && charts.latencyTail(data.samples.latency ?? data.samples, { title: `Latency distribution at ρ ${data.samples.rho ?? 0.8}`, subtitle: 'share of requests slower than a given latency, all runs together; both axes log scale' })
  if (tail) r.add(await r.figure('latency-distribution', tail, 'share of requests slower than each latency, per front and for the ideal'))
  r.add(skippedNote(data.skipped))
  r.add(provenance(run, 'balancer', data.madeBy?.command, data))
}

async function overheadSection (r, dir, run) {
  const data = load.overhead(dir)
  r.add('## Front overhead', 'What a front costs by itself, with a handler that answers at once (0 ms): the time per request, one request at a time, and the most requests per second the whole stack answers. Each front but "direct" has its own workers behind it; "direct" is one worker reached without a front.')
  if (!data) return r.add(missing(run, 'overhead', 'front overhead'))
  // Per round when the result has rounds; the pooled figure (one value) when it does not.
  const direct = data.rows.find((x) => x.front === 'direct')
  const runsOf = (x) => x.runs ?? [{ newConnection: x.newConnection, keepAlive: x.keepAlive }]
  const stat = (x, f) => interval(runsOf(x), f)
  const peak = (x) => (x.peak ? interval((x.peak.rounds ?? [x.peak.rps]).map((v) => ({ v })), 'v') : null)
  const hasPeak = data.rows.some((x) => x.peak)
  const added = (x, k) => (direct && x.front !== 'direct' ? interval(runsOf(x).map((y, i) => ({ v: y[k].p50 - (runsOf(direct)[i] ?? runsOf(direct)[0])[k].p50 })), 'v') : null)
  r.add(await r.figure('overhead-latency', charts.overheadLatency(data.rows, stat), 'median time per 0 ms request per front, on a new connection and on a kept-alive one, with 95% intervals'))
  if (hasPeak) r.add(await r.figure('overhead-peak', charts.overheadPeak(data.rows.filter((x) => x.peak), peak), 'peak requests per second with a 0 ms handler, per front, with 95% intervals'))
  r.add(table(['front', 'new connection p50 ms', 'added p50 ms', 'kept alive p50 ms', 'added p50 ms', ...(hasPeak ? ['peak req/s (whole stack)'] : [])], data.rows.map((x) => [
    label(x.front), ci(stat(x, (y) => y.newConnection.p50), ms3), x.front === 'direct' ? '–' : ci(added(x, 'newConnection'), ms3), ci(stat(x, (y) => y.keepAlive.p50), ms3), x.front === 'direct' ? '–' : ci(added(x, 'keepAlive'), ms3), ...(hasPeak ? [ci(peak(x), int)] : [])
  ])))
  r.add(`${data.config.count} sequential requests per front and connection kind in ${data.config.rounds} round${data.config.rounds > 1 ? 's' : ''} visiting the fronts in turn (median of the rounds' p50s, with its 95% interval; "added": each round's p50 minus direct's in the same round), ${data.config.workers} workers per front. HAProxy's generated config opens a new connection to the worker for each request (\`option http-server-close\`), the embedded balancer keeps them alive for GET.${hasPeak ? ` Peak: autocannon with ${data.config.connections} keep-alive connections, ${data.config.peak} s per round, with the load generator, the front and the workers on the same cores: the CPU a request costs the whole stack, not what a front could do alone.` : ''} The embedded balancer's own ceiling, with the load generator on another core, and the CPU each front spends per request are in [Costs](#costs).`)
  r.add(skippedNote(data.skipped))
  r.add(provenance(run, 'overhead', null, data))
}

// What the driver did over a cell's runs.
function happened (cell) {
  const runs = cell.runs ?? [cell]
  const all = (k) => runs.flatMap((r) => r[k] ?? [])
  if (runs.some((r) => r.kills)) return `${all('kills').length} workers killed`
  if (runs.some((r) => r.reloads)) {
    const reloads = all('reloads')
    const done = reloads.filter((l) => l.code === 0)
    const med = interval(done.map((l) => ({ ms: l.ms })), 'ms').value
    return `${reloads.length} reloads (${done.length} completed${done.length ? `, ${secs(med / 1000)} each (median)` : ''})`
  }
  return ''
}

function stuckHappened (x) {
  if (x.hangs) {
    const hangs = x.hangs.map((h) => (h.outcome === 'no answer' ? `≥ ${(h.ms / 1000).toFixed(1)} s (no answer: the client gave up)` : `${(h.ms / 1000).toFixed(1)} s (${/^\d+$/.test(h.outcome) ? h.outcome : `connection ${h.outcome}`})`))
    return `endless requests ended after ${hangs.join(', ')}; ${x.hungKills.length} workers killed as hung`
  }
  if (x.stopped !== undefined) {
    if (!x.stopped) return 'no worker stopped'
    if (x.stopped.endedAfterMs === null) return `stopped worker never ended (still stopped ${x.stopped.observedMs ? `${(x.stopped.observedMs / 1000).toFixed(1)} s later, ` : ''}at the end of the run)`
    return `stopped worker killed after ${(x.stopped.endedAfterMs / 1000).toFixed(1)} s (${x.stopped.reason})`
  }
  return ''
}

// "‡" on a latency some of whose requests are missing because their client gave up: the
// percentiles are of the answered requests, so the true ones are higher.
const censored = (runs) => (runs.some((r) => r.timedOut > 0) ? ' ‡' : '')

async function matrixSection (r, dir, run) {
  const data = load.matrix(dir)
  r.add('## The operator\'s matrix', 'What SSR operators run before trusting a front, as the seed article ran it (`ab -c 5|13|20 -n 10000`: a new connection per request) and with keep-alive clients: closed-loop clients (each sends its next request when the last one ended) at 5 clients (low load), 13 (high load) and 20 (a standing queue of 5 over 15 workers), in situations: normal; rolling reloads back to back; a worker SIGKILLed at random times; requests that never return mixed in; one worker SIGSTOPped (unresponsive, but its port still accepts connections). The kills and reloads run once more in open loop, where failures count per request offered.')
  if (!data?.closed?.length) return r.add(missing(run, 'matrix', 'the matrix'))
  const c = data.config
  const stat = (cell, key) => interval(cell.runs, key)
  if (data.legacy) r.add('> **From an earlier format of this part:** one run per cell, keep-alive clients only, no PM2 and no open-loop runs; `npm run bench -- --only matrix` measures the matrix as described here.')
  r.add(`${c.workers} workers; renders lognormal (median ${c.median} ms, σ ${c.sigma}), modelled with Atomics.wait; the pool runs with \`--timeout ${c.timeout / 1000}s --heartbeat-timeout ${c.timeout / 1000}s\`; clients give up after ${c.clientTimeout} s. ${c.abRequests ? `Normal: ${int(c.abRequests)} requests per cell with a new connection each, ${int(c.keepAliveRequests)} with keep-alive, in ${c.repeats} runs; reloads and kills: ${c.incidentRepeats} runs of ${c.incidentSeconds} s per cell. ` : `${c.duration} s per run. `}Fronts: the embedded balancer (\`pool start\`), HAProxy mode (\`pool start --balancer haproxy\` driving HAProxy from \`pool config haproxy\`), Node's cluster (round-robin, a primary that respawns workers, the rolling restart of the cluster docs: fork a replacement, wait until it listens, disconnect the old worker), PM2 ${pm2Version(run)}cluster mode (\`pm2 start -i 15\`, \`pm2 reload\`; the app closes its server on SIGINT, as PM2's docs ask). A failure is a 5xx, a connection closed without an answer, or no answer in time. With keep-alive clients, cluster and PM2 pin each client to the worker that accepted its connection; with a new connection per request they deal each request round-robin, busy worker or not.`)
  r.add(await r.figure('matrix-latency', charts.matrixLatency(data, stat), 'p50 and p99 latency per situation, view, front and number of clients, with 95% intervals'))
  r.add(await r.figure('matrix-throughput', charts.matrixThroughput(data, stat), 'answered requests per second per situation, view, front and number of clients, with 95% intervals'))
  r.add(await r.figure('matrix-failures', charts.matrixFailures(data), 'failed requests per situation, view, front and number of clients'))
  const rows = data.closed.map((x) => {
    const p = (k) => stat(x, k)
    return [charts.SCENARIO_TITLE[x.scenario], charts.VIEW_TITLE[x.view], label(x.front), x.connections, runsCell(p('rps')), ci(p('rps'), int), ci(p('p50')), ci(p('p99')) + censored(x.runs),
      `${x.runs.reduce((a, y) => a + y.failed, 0)} of ${int(x.runs.reduce((a, y) => a + y.requests, 0))}`, happened(x)]
  })
  r.add(folded(`The matrix's ${rows.length} cells: median [95% interval] of the runs`, table(['situation', 'clients\' connections', 'front', 'clients', 'runs', 'req/s', 'p50 ms', 'p99 ms', 'failed (all runs)', 'what happened'], rows)))
  if (data.closed.some((x) => censored(x.runs))) r.add(`‡ Some clients gave up at the ${c.clientTimeout} s deadline: their requests count as failed and are missing from the percentiles, which are of the answered requests; the true ones are higher.`)
  if (data.open?.length) {
    r.add('### Kills and reloads in open loop')
    r.add(`Poisson arrivals at ρ ${data.open[0].rho} of the workers (about ${int(data.open[0].runs[0]?.offered / c.openSeconds)} req/s), a new connection per request, sent on schedule by a load generator in a process of its own, for ${c.openSeconds} s per run, while workers are SIGKILLed at random times (1/s on average) or reloaded back to back. Every request offered counts: a closed-loop client stalled by a failure sends fewer. Runs whose send lag p99 exceeded ${LAG_LIMIT_MS} ms (the load generator fell behind its schedule: a busy machine) are set aside.`)
    r.add(await r.figure('matrix-open', charts.matrixOpen(data, stat), 'failed requests per 1,000 offered and share answered, per front, for kills and reloads in open loop'))
    r.add(table(['situation', 'front', 'runs', 'offered per run', 'failed per 1,000 offered', 'answered p50 ms', 'answered p99 ms', 'send lag p99 ms', 'what happened'], data.open.map((x) => {
      const p = (k) => stat(x, k)
      return [charts.SCENARIO_TITLE[x.scenario], label(x.front), runsCell(p('offered')), ci(p('offered'), int), ci(p((y) => 1000 * y.failed / y.offered), (v) => v.toFixed(1)), ci(p('p50')), ci(p('p99')), ci(interval(x.runs.map((y) => ({ v: y.lag?.p99 })), 'v'), (v) => v.toFixed(1)), happened(x)]
    })))
  }
  if (data.stuck?.length) {
    r.add('### Workers that hang or stop')
    r.add(`One run per front and view, ${data.stuck[0].connections} clients, ${c.stuckSeconds ?? c.duration} s. A front that retries a GET whose worker died (the embedded balancer does, once: it cannot know the request was at fault) sends an endless request to a second worker, which hangs too: the table counts the workers killed as hung. Cluster and PM2 end neither a hung nor a stopped worker: they are started afresh after each of these runs.`)
    r.add(await r.figure('matrix-hangs', charts.matrixHangs(data), 'time until each endless request ended, per front and view'))
    r.add(table(['situation', 'clients\' connections', 'front', 'req/s', 'p50 ms', 'p99 ms', 'failed', 'what happened'], data.stuck.map((x) => [
      charts.SCENARIO_TITLE[x.scenario], charts.VIEW_TITLE[x.view] ?? x.view, label(x.front), int(x.rps), ms(x.p50), ms(x.p99) + censored([x]),
      x.failed ? `${x.failed} of ${int(x.requests)} (${Object.entries(x.failedByKind).map(([k, n]) => `${n} ${k}`).join(', ')})` : `0 of ${int(x.requests)}`, stuckHappened(x)
    ])))
  }
  r.add(skippedNote(data.skipped))
  r.add(provenance(run, 'matrix', null, data))
}

const pm2Version = (run) => (run?.versions?.pm2 ? `${run.versions.pm2} ` : '')

// Which HAProxy a part's fronts or configurations ran, from [name, version] pairs (results
// from before they recorded it have none): '', or one sentence.
function haproxyRan (pairs) {
  const ran = new Map(pairs.filter(([, version]) => version))
  if (ran.size === 0) return ''
  return `The rows ran ${[...ran].map(([name, version]) => `${version} (${label(name)})`).join(', ')}.`
}

async function killTimelineSection (r, dir, run) {
  const data = load.killTimeline(dir)
  r.add('## Kill timeline', 'Requests answered and failed per second while one worker is SIGKILLed every second: HAProxy driven by the pool (READY when a worker is ready, MAINT the moment it exits) against HAProxy left to itself, which keeps sending the dead server its share of the queue until a health check (if any) notices; a dead worker refuses in microseconds, so to `balance first` it looks like the freest server of all.')
  if (!data?.rows?.length) return r.add(missing(run, 'kill-timeline', 'the kill timeline'))
  r.add(await r.figure('kill-timeline', charts.killTimeline(data), 'answered and failed requests per second over time, per configuration, with the kills marked'))
  r.add(table(['configuration', 'kills', 'answered', 'failed', 'of which', 'p99 ms'], data.rows.map((x) => [
    label(x.config), x.kills.length, int(x.ok), int(x.failed), Object.entries(x.failedByKind).map(([k, n]) => `${n} ${k}`).join(', ') || '–', ms(x.p99)
  ])))
  r.add(`${data.workers} workers, ${data.clients} closed-loop keep-alive clients, ${data.renderMs} ms renders, kills from 2 s on (slots in turn, serving workers only). "closed": the connection was closed without an answer (the request running in the killed worker); "503": HAProxy gave up after its retries, all spent on the dead server.`)
  r.add(haproxyRan(data.rows.map((x) => [x.config, x.haproxy])))
  r.add(skippedNote(data.skipped, (s) => s.config))
  r.add(provenance(run, 'kill-timeline'))
}

async function soakSection (r, dir, run) {
  const data = load.soak(dir)
  r.add('## Soak: kills from outside and reloads', 'A pool under steady load while a worker is SIGKILLed from outside every few seconds (what the kernel\'s OOM killer or an operator does) and `pool reload` is asked every half minute, whether or not the last one has answered. Backoff is for crash loops; a healthy worker killed from outside should cost no capacity, and a reload asked should run. By `bench/soak.js`.')
  if (!data?.run) return r.add(missing(run, 'soak', 'the soak'))
  r.add(await r.figure('soak', charts.soak(data), 'ready workers and failed requests per second over the soak, before and after, with the reloads asked marked'))
  const rows = [data.baseline && ['before', data.baseline], ['after', data]].filter(Boolean)
  r.add(table(['code', 'length s', 'kills', 'requests', 'failed', 'of which', 'ready workers mean / min (target)', 'within one of the target', 'reloads asked / answered / run', 'largest respawn delay ms', 'respawns at the 15 s cap'], rows.map(([name, d]) => {
    const x = d.run
    return [
      `${data.baseline ? name : 'this run'}${d.source?.commit ? ` (${d.source.commit})` : ''}`, d.config?.duration ?? '–', x.kills.length, int(x.requests), `${int(x.failed)} (${(x.failedShare * 100).toFixed(2)}%)`,
      Object.entries(x.failedWhy ?? x.failedByStatus).map(([k, n]) => `${int(n)} ${k}`).join(', ') || '–',
      `${x.capacity.mean} / ${x.capacity.min} (${x.capacity.target})`, `${(x.capacity.withinOne * 100).toFixed(1)}%`,
      `${x.reloads.asked} / ${x.reloads.answered} / ${x.reloads.run}`, int(x.backoff.maxDelayMs ?? 0), x.backoff.atCap
    ]
  })))
  const c = data.config
  r.add(`${c.workers} workers (the bench app: lognormal renders of median ${c.median} ms, σ ${c.sigma}, Atomics.wait), open-loop Poisson arrivals at ρ ${c.rho} on a new connection each, clients that give up after ${c.deadline / 1000} s ("of which": the reasons in the pool's access log); from 2 s on a ready worker picked at random SIGKILLed every ${c['kill-every']} s; \`pool reload\` asked every ${c['reload-every']} s. Ready workers sampled every ${data.sampleMs} ms from the pool's log ("within one": the share of samples with at most one worker short of the target; a reload takes one worker out at a time). "answered": the \`pool reload\` command exited 0; "run": reloads the pool carried out.${data.baseline ? ` "before": \`${data.baseline.command}\` at ${when(data.baseline.startedAt)}${data.baseline.machine?.loadavgStart ? ` (load average ${data.baseline.machine.loadavgStart.join(' ')} before, ${data.baseline.machine.loadavgEnd?.join(' ') ?? '–'} after)` : ''}, from a checkout of the code before kills from outside stopped counting as crashes and reloads asked during a reload were merged (bench/baselines/).` : ''}`)
  if (data.baseline && data.baseline.config?.duration !== c.duration) r.add(`The two runs differ in length (${data.baseline.config?.duration} s before, ${c.duration} s after): compare shares and rates, not counts.`)
  r.add(provenance(run, 'soak', null, data))
}

async function deathNoticeSection (r, dir, run) {
  const data = load.deathNotice(dir)
  r.add('## Death notice', 'How soon the front hears that a worker died, from its SIGKILL: out of the embedded balancer\'s rotation, or MAINT as HAProxy itself reports it (`show servers state`, polled back to back). Until then HAProxy sees the dead server as the free one. "Dead" is when the process had died (the kernel\'s and the scheduler\'s part); "the pool\'s part" is from then to the notice. By `bench/death-notice.js`.')
  if (!data?.rows?.length) return r.add(missing(run, 'death-notice', 'death notice times'))
  const rowsOf = (rows, label_) => rows.map((x) => [label_, label(x.front), x.load, `${ms(x.notice.median)} / ${ms(x.notice.p90)} / ${ms(x.notice.max)}`, ms(x.dead?.median), x.react ? `${ms(x.react.median)} / ${ms(x.react.p90)}` : '–', ms(x.exit.median), x.loadResult ? int(x.loadResult.rps) : '–', finite(x.loadavg) ? x.loadavg.toFixed(1) : '–'])
  r.add(table(['code', 'front', 'load', 'notice ms median / p90 / max', 'dead ms', 'the pool\'s part ms median / p90', 'exit handled ms', 'req/s', 'machine load (1 min)'],
    [...(data.baseline ? rowsOf(data.baseline.rows, 'before') : []), ...rowsOf(data.rows, data.baseline ? 'after' : 'this')]))
  r.add(`${data.workers} workers; ${data.config.kills} kills per row, slots in turn, each after the previous one's replacement was ready. Loaded: autocannon, ${data.config.connections} keep-alive connections, a handler that answers at once. "HAProxy" runs the generated config (\`nbthread 1\`: with more threads HAProxy 2.6 and 3.0 can give a \`maxconn 1\` worker two requests that arrive together); "HAProxy 3.0" the same on Debian 13's HAProxy; "HAProxy, nbthread 2" the same config on two threads, beside it, for what one thread costs here: it answers the pool's \`set server\` between the requests it serves. The pool's log times have a 1 ms resolution (hence a slightly negative part now and then); on a machine shared with other work the spread between runs is wide.${data.baseline ? ` "before": \`${data.baseline.command}\` at ${when(data.baseline.startedAt)}, the code before the fronts heard of an exit from the exit event itself.` : ''}`)
  r.add(haproxyRan(data.rows.map((x) => [x.front, x.haproxy])))
  r.add(skippedNote(data.skipped))
  r.add(provenance(run, 'death-notice', null, data))
}

async function haproxyKillSection (r, dir, run) {
  const data = load.haproxyKill(dir)
  r.add('## The kill experiment, counted', 'The same experiment as the timeline, counted per health-check configuration by `bench/haproxy-kill.js`, with and without the pool setting MAINT on exit.')
  if (!data?.configs?.length) return r.add(missing(run, 'haproxy-kill', 'the kill experiment'))
  if (data.legacy) r.add('> **From an earlier format of this part** (`--json`); `npm run bench -- --only haproxy-kill` measures it as described here.')
  const stat = (c, f) => interval(c.runs, f)
  r.add(await r.figure('haproxy-kill', charts.haproxyKill(data, stat), 'failed requests per kill and answered requests per second for each HAProxy configuration, with 95% intervals'))
  const each = (c, f) => c.runs.map(f).join(', ')
  r.add(table(['run', 'MAINT set by', 'health-check line', 'kills', 'failed', 'of which 503', 'of which closed', 'answered', 'failed per kill'], data.configs.map((c) => [
    c.id, c.maintBy, c.checks, each(c, (x) => x.kills), each(c, (x) => x.failed), each(c, (x) => x.failedByKind['503'] ?? 0), each(c, (x) => x.failedByKind.closed ?? 0), each(c, (x) => int(x.ok)), ci(stat(c, (x) => (x.kills ? x.failed / x.kills : NaN)), (v) => v.toFixed(2))
  ])))
  const w = data.workers ?? 4
  r.add(`${w} workers (the bench app, ${data.renderMs ?? 20} ms renders), ${data.clients ?? 12} closed-loop keep-alive clients through HAProxy${data.config?.duration ? ` for ${data.config.duration} s per run` : ''}, one worker SIGKILLed every second; HAProxy config from \`pool config haproxy -n ${w}\` (maxconn 1, balance first, option redispatch 1, retries 1, L7 retries for GET and HEAD) with its health-check line as stated. Each run's count, in the order run. "closed": the connection was closed without a response (what HAProxy does when the server dies under a request that was not the first on its client connection).`)
  r.add(haproxyRan(data.configs.map((c) => [`run ${c.id}`, c.haproxy])))
  const maint = [...data.maintMs].sort((a, b) => a - b)
  if (maint.length) r.add(`MAINT latency measured by the pool (exit handled → HAProxy's reply), these runs: median ${median(maint).toFixed(2)} ms, max ${maint[maint.length - 1].toFixed(2)} ms over ${maint.length} kills.`)
  r.add(provenance(run, 'haproxy-kill', data.command, data.legacy ? null : data))
}

const reloadName = (c) => `${label(c.front)}${c.warmupRequests === null || c.warmupRequests === undefined ? '' : c.warmupRequests > 0 ? `, warm-up ${c.warmupRequests}` : ', no warm-up'}`

async function reloadSection (r, dir, run) {
  const data = load.reload(dir)
  r.add('## Rolling reload under load', 'Latency while every worker is replaced, one at a time (`pool reload`, `pm2 reload`, the cluster docs\' rolling restart), against steady state just before it in the same run, by `bench/reload.js` on the SSR demo.')
  if (!data?.configs?.length) return r.add(missing(run, 'reload', 'the reload measurement'))
  if (data.legacy) r.add('> **From an earlier format of this part:** the embedded balancer and HAProxy only, through autocannon (which sends a request again, silently, when its connection is closed without an answer), one run shown per configuration; `npm run bench -- --only reload` measures it as described here.')
  const stat = (c, f) => interval(c.runs, f)
  r.add(await r.figure('reload', charts.reload(data, stat, reloadName), 'p50 and p99 latency steady and during the reload, per front, with 95% intervals'))
  r.add(table(['front', 'runs', 'steady p50 / p99 ms', 'during reload p50 / p99 ms', 'p99 ratio', 'failed during reloads', 'reload time s', 'replaced'], data.configs.map((c) => [
    reloadName(c), runsCell(stat(c, (x) => x.during.p99)),
    `${ci(stat(c, (x) => x.steady.p50))} / ${ci(stat(c, (x) => x.steady.p99))}`,
    `${ci(stat(c, (x) => x.during.p50))} / ${ci(stat(c, (x) => x.during.p99))}`,
    ci(stat(c, (x) => x.during.p99 / x.steady.p99), times),
    `${c.runs.reduce((n, x) => n + (x.during.failed ?? 0), 0)} of ${int(c.runs.reduce((n, x) => n + (x.during.requests ?? 0), 0))}`,
    ci(stat(c, (x) => x.reloadMs / 1000), (v) => v.toFixed(1)),
    c.runs.map((x) => `${x.replaced}/${x.workers}`).join(', ')
  ])))
  const a = data.config ?? {}
  if (!data.legacy) r.add(`${a.workers} workers, ${a.connections} closed-loop keep-alive clients (each failure counted, a connection closed without an answer too), the SSR page (20 items) plus ${a.cost} ms of modelled CPU time, ${a.steady} s of steady state before each reload; ${a.rounds} runs per configuration, the configurations taking turns. Warm-up: \`--warmup ${'/?items=20'} --warmup-requests N\`, the page without the modelled cost (what is warmed is the JIT and React); cluster and PM2 have none.`)
  r.add(skippedNote(data.skipped, (s) => label(s.front)))
  r.add(provenance(run, 'reload', data.command, data.legacy ? null : data))
}

async function slowClientsSection (r, dir, run) {
  const data = load.slowClients(dir)
  r.add('## Slow clients', 'What a reverse proxy\'s buffering is for: one slow client at a time, uploading a body or reading a response at 100 KB/s, and how long it holds the worker. Without buffering in front, a worker is held for the whole transfer, and a pool of 15 workers is taken by 15 slow phones.')
  if (!data?.rows?.length) return r.add(missing(run, 'slow-clients', 'slow clients'))
  r.add(await r.figure('slow-clients', charts.slowClients(data), 'worker busy time per front and body size, for a slow uploader and a slow reader'))
  const sizes = [...new Set(data.rows.map((x) => x.sizeKb))].sort((a, b) => a - b)
  const cell = (front, direction, kb) => {
    const rows = data.rows.filter((x) => x.front === front && x.direction === direction && x.sizeKb === kb)
    const iv = interval(rows, 'busyMs')
    return iv.value === null ? '–' : `${ci(iv)}${rows.some((x) => x.finished === false) ? ' (client gave up: at least this)' : ''}`
  }
  const sizeName = (kb) => (kb >= 1024 ? `${kb / 1024} MB` : `${kb} KB`)
  r.add(table(['front', ...sizes.map((kb) => `upload ${sizeName(kb)}`), ...sizes.map((kb) => `read ${sizeName(kb)}`)], data.fronts.map((f) => [
    label(f), ...sizes.map((kb) => cell(f, 'upload', kb)), ...sizes.map((kb) => cell(f, 'read', kb))
  ])))
  const wmem = data.socketBuffers?.tcp_wmem
  const rmem = data.socketBuffers?.tcp_rmem
  r.add(`Worker busy time in ms (median of ${data.config.repeat} runs${data.config.repeat > 1 ? ' with its 95% interval' : ''}), render ${data.config.render} ms, transfers at ${data.config.rate} KB/s. A slow *reader* of up to 1 MB holds no worker even without a front: the kernel's socket buffers take the whole response (here up to ${wmem ? `${(wmem[2] / 2 ** 20).toFixed(0)} MB` : '?'} to send and ${rmem ? `${(rmem[2] / 2 ** 20).toFixed(0)} MB` : '?'} to receive per socket on loopback, \`net.ipv4.tcp_wmem\`/\`tcp_rmem\`); across a real network the window is smaller and the worker waits. A slow *uploader* holds a worker for its whole upload unless the front reads the body first: the embedded balancer and nginx do, HAProxy does not.`)
  r.add(skippedNote(data.skipped))
  r.add(provenance(run, 'slow-clients'))
}

async function streamingSection (r, dir, run) {
  const data = load.streaming(dir)
  r.add('## Streamed pages', 'Pages stream today (React\'s `renderToPipeableStream`, Next.js\'s App Router): the shell goes out once it is rendered, and each part that waits for its data follows when the data comes. What the user sees first arrives with the first byte of the body, so what matters is that a front passes each part on as the worker writes it, and still frees the worker from a slow reader.')
  if (!data?.single?.length) return r.add(missing(run, 'streaming', 'streamed pages'))
  const stat = (cell, pick) => interval(cell.runs, pick)
  const p = data.page
  r.add(await r.figure('streaming-first-byte', charts.streamingFirstByte(data, stat), 'time to the first byte of a streamed page per front, one client at a time and at load ρ'))
  const single = (front) => data.single.find((c) => c.front === front)
  const hold = (front) => data.hold?.find((c) => c.front === front)
  r.add(table(['front', 'first byte p50 ms', 'last byte p50 ms', `worker held by a ${data.config.hold} KB reader at ${data.config.rate} KB/s, ms`], data.fronts.filter((f) => single(f)).map((f) => [
    label(f),
    single(f) ? ci(stat(single(f), (x) => x.first.p50)) : '–',
    single(f) ? ci(stat(single(f), (x) => x.total.p50)) : '–',
    hold(f) ? ci(stat(hold(f), 'busyMs')) : f === 'cluster' || f === 'pm2' ? 'as direct' : '–'
  ])))
  r.add(`One client at a time: ${data.config.single} pages per run on a new connection each, render 0, a ${p.shellKb} KB shell and ${p.restKb} KB more ${p.lateMs} ms later, chunked (median of ${data.config.runs} runs with its 95% interval). "First byte": of the body, the shell. "Direct" is a plain Node server; "a pool worker, its own port" is one of the embedded pool's workers reached without the balancer: the gap from it is what the balancer adds. Slow reader: a ${data.config.hold} KB page of the same shape read at ${data.config.rate} KB/s, and the worker's own busy time, from the request's headers to its last byte handed to the kernel; under cluster and PM2 the worker writes to the client's own socket, as direct does. On loopback the kernel's socket buffers take much of a response by themselves (see [Slow clients](#slow-clients)).`)
  const loaded = data.loaded ?? []
  if (loaded.length) {
    const shapes = [...new Set(loaded.map((c) => c.shape))]
    const cell = (front, shape) => loaded.find((c) => c.front === front && c.shape === shape)
    const shapeName = (shape) => (shape === 'render' ? 'rest rendered' : 'rest awaited')
    r.add(table(['front', ...shapes.flatMap((s) => [`${shapeName(s)}: first byte p50`, 'p99', 'last byte p50', 'runs'])], [...new Set(loaded.map((c) => c.front))].map((f) => [
      label(f),
      ...shapes.flatMap((s) => {
        const c = cell(f, s)
        return c ? [ci(stat(c, (x) => x.first.p50)), ci(stat(c, (x) => x.first.p99)), ci(stat(c, (x) => x.total.p50)), runsCell(interval(c.runs, (x) => x.first.p50))] : ['–', '–', '–', '–']
      })
    ])))
    r.add(`At ρ ${data.config.rho}: open-loop Poisson arrivals on ${data.config.workers} workers per front, renders lognormal (median ${data.config.median} ms), then the rest ${p.lateMs} ms later: *awaited* (a timer; the worker's event loop is free meanwhile) or *rendered* (the event loop blocked). ρ counts those ${p.lateMs} ms, as a worker that takes one request at a time is held through them (\`--worker-concurrency 1\`). When the rest is awaited, a worker's event loop is free: the embedded balancer by default (K=16) gives such a worker other requests, as Node's cluster and PM2 do, and their queue is correspondingly shorter than with one request per worker; when the rest is rendered, the worker's loop is busy and the embedded balancer gives it none. In ms, median of the runs with its 95% interval; runs whose load generator fell behind are set aside.`)
  }
  r.add(skippedNote(data.skipped))
  r.add(provenance(run, 'streaming', null, data))
}

// ── long-lived streams ──────────────────────────────────────────────────────────────────────

// The issue's bounds for the streams part (bench/streams.js).
const STREAMS_HANGUP_P99_MS = 100
const STREAMS_HANGUP_EMBEDDED_P99_MS = 5
const STREAMS_MEMORY_TIMES_DIRECT = 3
const STREAMS_TOKEN_P99_OVER_DIRECT_MS = 2

// A percentile of hang-up delays, a close the app did not see in time (null) counted as the
// latest: Infinity.
function hangupPercentile (delays, p) {
  const xs = delays.map((d) => (d === null ? Infinity : d)).sort((a, b) => a - b)
  return xs.length ? xs[Math.min(xs.length - 1, Math.max(0, Math.ceil(p / 100 * xs.length) - 1))] : NaN
}

const sumOf = (values) => values.reduce((n, v) => n + (v ?? 0), 0)

// What the tables and the bounds read of one run of a streams cell. Memory is per stream open
// in the token window (a front that turned streams away holds fewer).
function streamsFigures (x) {
  const open = x.tokens?.open || 0
  const o = x.outcome
  const statuses = o.statuses ?? {}
  const others = Object.fromEntries(Object.entries(statuses).filter(([k]) => k !== '503'))
  const delays = x.hangup?.delays ?? []
  const perStream = (kb) => (open && finite(kb) ? kb / open : NaN)
  return {
    streams: o.streams,
    complete: o.complete,
    cut: o.cut + (o.unfinished ?? 0),
    s503: statuses[503] ?? 0,
    failedKinds: { ...others, ...o.errors },
    open,
    headP50: x.opened?.headMs?.p50,
    headP99: x.opened?.headMs?.p99,
    rssKbPerStream: perStream(x.memory.open.rssKb),
    overIdleKbPerStream: perStream(x.memory.open.rssKb - x.memory.idle.rssKb),
    pssKbPerStream: perStream(x.memory.open.pssKb),
    tokenP50: x.tokens?.p50,
    tokenP99: x.tokens?.p99,
    clientLoopP99: x.tokens?.loopDelayP99,
    hangupP50: hangupPercentile(delays, 50),
    hangupP99: hangupPercentile(delays, 99),
    hangups: delays.length,
    hangupsLate: delays.filter((d) => d === null).length
  }
}

// Reading a streams result: each cell's figures run by run, their median with its interval,
// counts summed over the runs, and a figure against direct's in the same run.
function streamsReader (data) {
  const cellOf = (front, scale) => data.cells.find((x) => x.front === front && x.scale === scale)
  const figs = (cell) => (cell?.runs ?? []).map(streamsFigures)
  const iv = (cell, key) => interval(figs(cell).map((f) => ({ v: f[key] })), 'v')
  const sum = (cell, key) => sumOf(figs(cell).map((f) => f[key]))
  const againstDirect = (cell, key, op) => {
    const direct = cellOf('direct', cell.scale)
    if (!direct || cell.front === 'direct') return null
    const d = figs(direct)
    return interval(figs(cell).map((f, i) => ({ v: op(f[key], (d[i] ?? d[0])[key]) })), 'v')
  }
  const lost = (cell) => sum(cell, 'streams') - sum(cell, 'complete')
  return { cellOf, figs, iv, sum, againstDirect, lost }
}

const lateMs = (x) => (x === Infinity ? '> 3 s' : ms(x))
const kb1 = (x) => (finite(x) ? x.toFixed(1) : '–')
const ms2 = (x) => (finite(x) ? x.toFixed(2) : '–')
const signed = (x) => (finite(x) ? `${x < 0 ? '−' : '+'}${Math.abs(x).toFixed(2)}` : '–')

function streamsScaleTable (rd, fronts, scale) {
  const { cellOf, figs, iv, sum, againstDirect } = rd
  const pair = (a, b, f = ms) => `${ci(a, f)} / ${ci(b, f)}`
  const header = ['front', 'served / cut / 503', 'failed otherwise', 'open in the window', 'head p50 / p99 ms',
    'KB per stream (RSS)', 'over idle, KB per stream', 'Pss KB per stream', 'token delay p50 / p99 ms',
    'token p99 − direct\'s, ms', 'clients\' loop delay p99 ms', 'hang-up to app p50 / p99 ms (seen of hung up)']
  return table(header, fronts.filter((f) => cellOf(f, scale)).map((f) => {
    const cell = cellOf(f, scale)
    const kinds = {}
    for (const x of figs(cell)) for (const [k, v] of Object.entries(x.failedKinds)) kinds[k] = (kinds[k] ?? 0) + v
    const other = Object.entries(kinds).map(([k, v]) => `${int(v)} ${k}`).join(', ')
    // A percentile that reached a close never seen is as late as can be.
    const hang = (key) => (figs(cell).some((x) => x[key] === Infinity) ? lateMs(Infinity) : ci(iv(cell, key)))
    const seen = sum(cell, 'hangups') - sum(cell, 'hangupsLate')
    return [
      label(f), `${int(sum(cell, 'complete'))} of ${int(sum(cell, 'streams'))} / ${int(sum(cell, 'cut'))} / ` +
        int(sum(cell, 's503')),
      other || '0', ci(iv(cell, 'open'), int), pair(iv(cell, 'headP50'), iv(cell, 'headP99')),
      ci(iv(cell, 'rssKbPerStream'), kb1), ci(iv(cell, 'overIdleKbPerStream'), kb1),
      ci(iv(cell, 'pssKbPerStream'), kb1), pair(iv(cell, 'tokenP50'), iv(cell, 'tokenP99'), ms2),
      f === 'direct' ? '–' : ci(againstDirect(cell, 'tokenP99', (a, b) => a - b), signed),
      ci(iv(cell, 'clientLoopP99')),
      sum(cell, 'hangups') ? `${hang('hangupP50')} / ${hang('hangupP99')} (${seen} of ${sum(cell, 'hangups')})` : '–'
    ]
  }))
}

function streamsRenderTable (rd, fronts, renderAt) {
  const cells = fronts.map((f) => rd.cellOf(f, renderAt)).filter((cell) => cell?.runs.some((x) => x.render))
  if (!cells.length) return null
  const rv = (cell, when, key) => interval(cell.runs.map((x) => ({ v: x.render?.[when]?.[key] })), 'v')
  const ratio = (cell) => interval(cell.runs.map((x) => ({ v: x.render.beside.p99 / x.render.alone.p99 })), 'v')
  const failed = (cell, when) => int(sumOf(cell.runs.map((x) => x.render[when].failed)))
  return table(['front', 'p99 alone, ms', 'p99 beside the streams, ms', 'beside ÷ alone', 'p50 alone / beside, ms',
    'streams open beside', 'failed alone / beside'], cells.map((cell) => [
    label(cell.front), ci(rv(cell, 'alone', 'p99')), ci(rv(cell, 'beside', 'p99')), ci(ratio(cell), times),
    `${ci(rv(cell, 'alone', 'p50'))} / ${ci(rv(cell, 'beside', 'p50'))}`, ci(rd.iv(cell, 'open'), int),
    `${failed(cell, 'alone')} / ${failed(cell, 'beside')}`
  ]))
}

// The issue's bounds, front by front: met or not, with the figure each rests on.
function streamsBounds (rd, fronts, scales) {
  const { cellOf, figs, iv, againstDirect, lost } = rd
  const verdict = (ok) => (ok === null ? '' : ok ? ' (met)' : ' (**not met**)')
  const served = (cells) => {
    if (!cells.length) return '–'
    const n = sumOf(cells.map(lost))
    return `${int(n)} not served${verdict(n === 0)}`
  }
  const small = scales.filter((s) => s <= 1000)
  const rows = [[`every stream served (none cut, none 503) at ${small.map(int).join(' and ')}`,
    ...fronts.map((f) => served(small.map((s) => cellOf(f, s)).filter(Boolean)))]]
  // The worst p99 over the scales, and at which.
  const worstHangup = (f) => {
    const cells = scales.map((s) => cellOf(f, s)).filter(Boolean)
    const p99s = cells.flatMap((cell) => figs(cell).filter((x) => x.hangups).map((x) => [x.hangupP99, cell.scale]))
    return p99s.length ? p99s.reduce((a, b) => (b[0] > a[0] ? b : a)) : null
  }
  const hangup = (f, bound) => {
    const w = worstHangup(f)
    return w === null ? '–' : `${lateMs(w[0])} at ${int(w[1])}${verdict(w[0] <= bound)}`
  }
  rows.push([`hang-up to app p99 ≤ ${STREAMS_HANGUP_P99_MS} ms (the worst scale)`,
    ...fronts.map((f) => hangup(f, STREAMS_HANGUP_P99_MS))])
  if (fronts.includes('embedded')) {
    rows.push([`through the embedded balancer ≤ ${STREAMS_HANGUP_EMBEDDED_P99_MS} ms`,
      ...fronts.map((f) => (f === 'embedded' ? hangup(f, STREAMS_HANGUP_EMBEDDED_P99_MS) : ''))])
  }
  for (const scale of scales.filter((s) => s >= 9000)) {
    const direct = cellOf('direct', scale)
    // Judged only where the front held every stream: a front that held fewer has its fixed cost over fewer.
    const vsDirect = (f, key, op, show, ok) => {
      const cell = cellOf(f, scale)
      if (f === 'direct') return direct ? show(iv(direct, key), true) : '–'
      if (!cell || !direct) return '–'
      const d = againstDirect(cell, key, op)
      const open = iv(cell, 'open').value
      if (open < scale) return `${show(d, false, cell)} (${int(open)} open: not judged)`
      return `${show(d, false, cell)}${verdict(finite(d.value) ? ok(d.value) : null)}`
    }
    rows.push([`${int(scale)} streams: all served`, ...fronts.map((f) => served([cellOf(f, scale)].filter(Boolean)))])
    const memory = (v, own, cell) => (own
      ? `${ci(v, kb1)} KB`
      : `${ci(v, times)} (${ci(againstDirect(cell, 'overIdleKbPerStream', (a, b) => a / b), times)})`)
    const ratio = (a, b) => a / b
    const bound = `KB per stream ≤ ${STREAMS_MEMORY_TIMES_DIRECT}× direct's (RSS; over idle: in brackets)`
    rows.push([`${int(scale)} streams: ${bound}`,
      ...fronts.map((f) => vsDirect(f, 'rssKbPerStream', ratio, memory, (v) => v <= STREAMS_MEMORY_TIMES_DIRECT))])
    const token = (v, own) => (own ? `${ci(v, ms2)} ms` : `${ci(v, signed)} ms`)
    const minus = (a, b) => a - b
    rows.push([`${int(scale)} streams: token p99 ≤ direct's + ${STREAMS_TOKEN_P99_OVER_DIRECT_MS} ms`,
      ...fronts.map((f) => vsDirect(f, 'tokenP99', minus, token, (v) => v <= STREAMS_TOKEN_P99_OVER_DIRECT_MS))
    ])
  }
  return `The issue's bounds:\n\n${table(['bound', ...fronts.map(label)], rows)}`
}

function streamsHow (data) {
  const c = data.config
  return [
    `${c.workers} workers per front (the pool with its defaults, its access log on); "direct" is the app as one`,
    `plain \`node\` process, no front. The app (\`${data.app}\`) writes each token stamped with its`,
    '`process.hrtime.bigint()` (CLOCK_MONOTONIC, one clock for every process on Linux); the clients, a process of',
    `their own, hold a connection per stream (\`Accept: text/event-stream\`), opened at ${int(c.openRate)} a second`,
    '(over at least one token interval). *Served*: every token and the end, once the bench ends all streams together',
    '(the app ends them) after its steps; *cut*: closed before the end; *head*: from the request to the stream\'s',
    'response head. *Memory*: VmRSS of every serving process (the front\'s roots and all their descendants: the',
    'pool\'s supervisor, workers and reaper; HAProxy; nginx\'s master and workers; cluster\'s primary and workers;',
    'PM2\'s daemon and workers) midway through the token window, per stream open then; *over idle*: less the same',
    'processes after a warm-up, before any stream; *Pss*: each shared page split between the processes that map it',
    `(the node binary's pages counted once). *Token delay*: every token received over ${c.window} s, once all`,
    `streams were open and ${c.settle} s had passed. *Hang-up*: ${c.hangups} more streams one at a time, each hung up`,
    '50 ms after its first token (between two tokens), from the client\'s hang-up to the app\'s res \'close\' (the app',
    'records it in a file per process; "seen": within 3 s, and one not seen counts as later than any).',
    `*CPU-bound page*: ${c.renders} requests of a`,
    `${c.renderMs} ms render (Atomics.wait) from ${c.renderClients} keep-alive clients, alone before the streams and`,
    'beside them after the hang-ups.',
    c.runs > 1 ? `Median of ${c.runs} runs with its 95% interval; counts summed.` : 'One run per cell.',
    'Each front is started afresh for each number of streams.'
  ].join(' ')
}

async function streamsSection (r, dir, run) {
  const data = load.streams(dir)
  r.add('## Long-lived streams', 'Server-sent events and AI token streams: requests that stay open for minutes and ' +
    'write a little now and then. A request holds one of the pool\'s render places only until its response head ' +
    'arrives, so a worker can hold thousands of them; in HAProxy mode they go to the `pool_streams` backend over the ' +
    'same workers. Per front and number of streams: how many are served to their end, the memory of every serving ' +
    'process per stream, how late each token arrives against one plain process, how soon a client\'s hang-up reaches ' +
    'the app, and a CPU-bound page\'s p99 beside 1,000 streams. By `bench/streams.js`.')
  if (!data?.cells?.length) return r.add(missing(run, 'streams', 'long-lived streams'))
  const rd = streamsReader(data)
  const scales = [...new Set(data.cells.map((x) => x.scale))].sort((a, b) => a - b)
  const fronts = data.fronts.filter((f) => data.cells.some((x) => x.front === f))
  const lim = data.limits ?? {}
  for (const scale of scales) {
    const every = data.cells.find((x) => x.scale === scale)?.every
    const rate = every >= 1000 ? `a token every ${every / 1000} s` : `${int(1000 / every)} tokens a second`
    const fits = scale === lim.fitted ? ' (the largest that fits the descriptor limit)' : ''
    r.add(`### ${int(scale)} streams, ${rate} each${fits}`)
    r.add(streamsScaleTable(rd, fronts, scale))
  }
  const cpu = streamsRenderTable(rd, fronts, data.config.renderAt)
  if (cpu) r.add(`### A CPU-bound page beside ${int(data.config.renderAt)} streams`, cpu)
  r.add(streamsBounds(rd, fronts, scales))
  r.add(streamsHow(data))
  const over = data.cells.filter((x) => x.descriptors > lim.nofile)
  if (over.length) {
    const top = Math.max(...over.map((x) => x.scale))
    const asked = lim.notRaised
      ? ` (the part asked for ${int(lim.nofileWanted)} with \`prlimit\`, which failed: ${lim.notRaised})`
      : ''
    const who = [...new Set(over.map((x) => label(x.front)))].join(', ')
    const fitted = lim.fitted ? `; ${int(lim.fitted)} streams, the largest round number that fits, were run too` : ''
    r.add(`RLIMIT_NOFILE here: ${int(lim.nofile)}${asked}. A relay (the embedded balancer, HAProxy, an nginx worker) ` +
      `holds two descriptors per stream in one process, so at ${int(top)} streams ${who} could not hold them all: ` +
      `that scale shows what each does at its limit${fitted}.`)
  }
  r.add(skippedNote(data.skipped, (x) => (x.scale ? `${label(x.front)} at ${int(x.scale)} streams` : label(x.front))))
  r.add(provenance(run, 'streams', null, data))
}

// ── WebSockets ──────────────────────────────────────────────────────────────────────────────

// The issue's bounds for the websocket part (bench/websocket.js).
const WS_ECHO_P99_OVER_DIRECT_MS = 1
const WS_PAGE_BESIDE_TIMES_ALONE = 1.1
const WS_MEMORY_TIMES_DIRECT = 3
// Memory against direct's is read only where the plain process grew by at least this per
// socket (KB): a heap grows by steps of a few MB, and may hold a thousand sockets in room it had.
const WS_DIRECT_MIN_KB = 1

// What the tables and the bounds read of one run of a websocket cell. Memory is per tunnel
// opened, over the same front idle.
function wsFigures (x) {
  const o = x.opened ?? {}
  const opened = o.opened || 0
  const mem = x.memory ?? {}
  const grown = (when, key) =>
    opened && finite(mem[when]?.[key]) && finite(mem.idle?.[key]) ? (mem[when][key] - mem.idle[key]) / opened : NaN
  const over = (key) => grown('held', key)
  const e = x.echo ?? {}
  const rd = x.render ?? {}
  const tp = x.throughput ?? {}
  const rl = x.reload ?? null
  const besideRatio = finite(rd.beside?.p99) && rd.alone?.p99 > 0 ? rd.beside.p99 / rd.alone.p99 : NaN
  return {
    asked: o.asked,
    opened,
    failedKinds: o.failed ?? {},
    handshakeP50: o.handshakeMs?.p50,
    handshakeP99: o.handshakeMs?.p99,
    rssOverIdleKb: over('rssKb'),
    pssOverIdleKb: over('pssKb'),
    rssQuietKb: grown('quiet', 'rssKb'),
    idleRssMb: finite(mem.idle?.rssKb) ? mem.idle.rssKb / 1024 : NaN,
    heldRssMb: finite(mem.held?.rssKb) ? mem.held.rssKb / 1024 : NaN,
    echoTargets: e.targets,
    echoSent: e.sent,
    echoReceived: e.received,
    echoP50: e.p50,
    echoP99: e.p99,
    echoP999: e.p999,
    echoLagP99: e.sendLagP99,
    echoLoopP99: e.loopDelayP99,
    pageAloneP50: rd.alone?.p50,
    pageAloneP99: rd.alone?.p99,
    pageBesideP50: rd.beside?.p50,
    pageBesideP99: rd.beside?.p99,
    pageBesideRatio: besideRatio,
    pageFailedAlone: rd.alone?.failed,
    pageFailedBeside: rd.beside?.failed,
    pageEchoP99: rd.echo?.p99,
    tpSockets: tp.sockets,
    tpDepth: tp.depth,
    tpPerSecond: tp.perSecond,
    tpClientCores: tp.clientCpu,
    tpServerCores: tp.serverCores,
    tpServerUsPerMessage: finite(tp.serverCores) && tp.perSecond > 0 ? tp.serverCores * 1e6 / tp.perSecond : NaN,
    reload: rl,
    reloadS: rl && finite(rl.ms) ? rl.ms / 1000 : NaN,
    reloadOverGraceful: rl && finite(rl.ms) && rl.gracefulS > 0 ? rl.ms / 1000 / rl.gracefulS : NaN,
    closeFirstS: finite(rl?.closes?.afterMarkMs?.first) ? rl.closes.afterMarkMs.first / 1000 : NaN,
    closeP50S: finite(rl?.closes?.afterMarkMs?.p50) ? rl.closes.afterMarkMs.p50 / 1000 : NaN,
    closeLastS: finite(rl?.closes?.afterMarkMs?.last) ? rl.closes.afterMarkMs.last / 1000 : NaN
  }
}

// Reading a websocket result: each cell's figures run by run, their median with its interval,
// counts summed over the runs, and a figure against direct's in the same run.
function wsReader (data) {
  const cellOf = (front, scale) => data.cells.find((x) => x.front === front && x.scale === scale)
  const figs = (cell) => (cell?.runs ?? []).map(wsFigures)
  const iv = (cell, key) => interval(figs(cell).map((f) => ({ v: f[key] })), 'v')
  const sum = (cell, key) => sumOf(figs(cell).map((f) => f[key]))
  const againstDirect = (cell, key, op) => {
    const direct = cellOf('direct', cell.scale)
    if (!direct || cell.front === 'direct') return null
    const d = figs(direct)
    // A figure missing on either side (no socket echoed) has nothing to compare.
    const of = (a, b) => (finite(a) && finite(b) ? op(a, b) : NaN)
    return interval(figs(cell).map((f, i) => ({ v: of(f[key], (d[i] ?? d[0])[key]) })), 'v')
  }
  // Every socket asked for was opened, in every run.
  const allOpened = (cell) => figs(cell).every((f) => f.opened === f.asked)
  return { cellOf, figs, iv, sum, againstDirect, allOpened }
}

const kinds = (list) => {
  const m = {}
  for (const k of list) for (const [key, n] of Object.entries(k ?? {})) m[key] = (m[key] ?? 0) + n
  const text = Object.entries(m).map(([k, n]) => `${int(n)} ${k}`).join(', ')
  return text || '0'
}

function wsHeldTable (rd, fronts, scale) {
  const { cellOf, figs, iv, sum, againstDirect, allOpened } = rd
  // A plain process that grew by less than this per socket had room in its heap: a ratio to
  // that would say nothing.
  const ratio = (a, b) => (b >= WS_DIRECT_MIN_KB ? a / b : NaN)
  return table(['front', 'opened of asked', 'failed, by kind', 'handshake p50 / p99 ms',
    'RSS over idle, KB per tunnel', 'Pss over idle, KB per tunnel', 'RSS / Pss per tunnel ÷ direct\'s',
    'all serving processes idle → held, MB RSS', 'once quiet: RSS over idle, KB per tunnel (÷ direct\'s)'],
  fronts.filter((f) => cellOf(f, scale)).map((f) => {
    const cell = cellOf(f, scale)
    const vsDirect = f === 'direct'
      ? '–'
      : !allOpened(cell)
          ? 'not judged (not all opened)'
          : `${ci(againstDirect(cell, 'rssOverIdleKb', ratio), times)} / ${ci(againstDirect(cell, 'pssOverIdleKb', ratio), times)}`
    // Over a few tunnels, the front's own growth is most of what is divided.
    const few = !allOpened(cell) && sum(cell, 'opened') ? ` (over ${int(sum(cell, 'opened'))} opened)` : ''
    return [
      label(f), `${int(sum(cell, 'opened'))} of ${int(sum(cell, 'asked'))}`, kinds(figs(cell).map((x) => x.failedKinds)),
      `${ci(iv(cell, 'handshakeP50'))} / ${ci(iv(cell, 'handshakeP99'))}`,
      ci(iv(cell, 'rssOverIdleKb'), kb1) + few, ci(iv(cell, 'pssOverIdleKb'), kb1) + few, vsDirect,
      `${ci(iv(cell, 'idleRssMb'), int)} → ${ci(iv(cell, 'heldRssMb'), int)}`,
      quietFigure(rd, cell, ratio)
    ]
  }))
}

// The RSS per tunnel `quiet` s after the settle, and against direct's then (results before the
// part took it have none).
function quietFigure ({ iv, againstDirect, allOpened }, cell, ratio) {
  const v = iv(cell, 'rssQuietKb')
  if (!finite(v.value)) return '–'
  if (cell.front === 'direct' || !allOpened(cell)) return ci(v, kb1)
  return `${ci(v, kb1)} (${ci(againstDirect(cell, 'rssQuietKb', ratio), times)})`
}

function wsEchoTable (rd, fronts, scale) {
  const { cellOf, sum, iv, againstDirect } = rd
  const cells = fronts.map((f) => cellOf(f, scale)).filter((cell) => cell?.runs.some((x) => x.echo))
  if (!cells.length) return null
  const diff = (a, b) => a - b
  const ratio = (a, b) => a / b
  return table(['front', 'echoed of sent (sockets)', 'round trip p50 / p99 / p99.9 ms', 'p50 / p99 − direct\'s, ms',
    'p99 ÷ direct\'s', 'client send lag / loop delay p99 ms'], cells.map((cell) => {
    const own = cell.front === 'direct'
    return [
      label(cell.front), `${int(sum(cell, 'echoReceived'))} of ${int(sum(cell, 'echoSent'))} (${ci(iv(cell, 'echoTargets'), int)})`,
      `${ci(iv(cell, 'echoP50'), ms2)} / ${ci(iv(cell, 'echoP99'), ms2)} / ${ci(iv(cell, 'echoP999'), ms2)}`,
      own ? '–' : `${ci(againstDirect(cell, 'echoP50', diff), signed)} / ${ci(againstDirect(cell, 'echoP99', diff), signed)}`,
      own ? '–' : ci(againstDirect(cell, 'echoP99', ratio), times),
      `${ci(iv(cell, 'echoLagP99'), ms2)} / ${ci(iv(cell, 'echoLoopP99'), ms2)}`
    ]
  }))
}

function wsThroughputTable (rd, fronts, scale) {
  const { cellOf, iv, againstDirect } = rd
  const cells = fronts.map((f) => cellOf(f, scale)).filter((cell) => cell?.runs.some((x) => x.throughput))
  if (!cells.length) return null
  return table(['front', 'sockets × in flight', 'echoes a second', '÷ direct\'s', 'client CPU, cores',
    'serving processes\' CPU, cores', 'serving CPU per message, µs'], cells.map((cell) => [
    label(cell.front), `${ci(iv(cell, 'tpSockets'), int)} × ${ci(iv(cell, 'tpDepth'), int)}`, ci(iv(cell, 'tpPerSecond'), int),
    cell.front === 'direct' ? '–' : ci(againstDirect(cell, 'tpPerSecond', (a, b) => a / b), times),
    ci(iv(cell, 'tpClientCores'), ms2), ci(iv(cell, 'tpServerCores'), ms2), ci(iv(cell, 'tpServerUsPerMessage'), ms2)
  ]))
}

function wsPageTable (rd, fronts, scale) {
  const { cellOf, iv, sum } = rd
  const cells = fronts.map((f) => cellOf(f, scale)).filter((cell) => cell?.runs.some((x) => x.render?.alone))
  if (!cells.length) return null
  return table(['front', 'p99 alone, ms', 'p99 beside the echo, ms', 'beside ÷ alone', 'p50 alone / beside, ms',
    'failed alone / beside', 'echo p99 meanwhile, ms'], cells.map((cell) => [
    label(cell.front), ci(iv(cell, 'pageAloneP99')), ci(iv(cell, 'pageBesideP99')), ci(iv(cell, 'pageBesideRatio'), times),
    `${ci(iv(cell, 'pageAloneP50'))} / ${ci(iv(cell, 'pageBesideP50'))}`,
    `${int(sum(cell, 'pageFailedAlone'))} / ${int(sum(cell, 'pageFailedBeside'))}`, ci(iv(cell, 'pageEchoP99'), ms2)
  ]))
}

function wsReloadTable (rd, fronts, scale) {
  const { cellOf, figs, iv } = rd
  const cells = fronts.map((f) => cellOf(f, scale)).filter((cell) => cell?.runs.some((x) => x.reload))
  if (!cells.length) return null
  const s1 = (x) => (finite(x) ? x.toFixed(1) : '–')
  return table(['front', 'reload took, s (--graceful-timeout)', '÷ --graceful-timeout', 'GETs failed of sent',
    'close codes the clients saw', 'closes after the reload began: first / median / last, s', 'still open after'],
  cells.map((cell) => {
    const rs = figs(cell).map((x) => x.reload).filter(Boolean)
    const codeCounts = {}
    for (const x of rs) for (const [k, n] of Object.entries(x.closes?.codes ?? {})) codeCounts[k] = (codeCounts[k] ?? 0) + n
    const codes = Object.entries(codeCounts).map(([k, n]) => `${k} × ${int(n)}`).join(', ')
    const failedKinds = kinds(rs.map((x) => x.http?.failedByKind))
    const failed = sumOf(rs.map((x) => x.http?.failed))
    const exit = rs.some((x) => x.code !== 0) ? ` (\`pool reload\` exited ${rs.map((x) => x.code).join(', ')})` : ''
    return [
      label(cell.front), `${ci(iv(cell, 'reloadS'), s1)} (${rs.map((x) => `${x.gracefulS} s`).filter((v, i, a) => a.indexOf(v) === i).join(', ')})${exit}`,
      ci(iv(cell, 'reloadOverGraceful'), times),
      `${int(failed)} of ${int(sumOf(rs.map((x) => x.http?.requests)))}${failed ? ` (${failedKinds})` : ''}`,
      codes || 'none',
      `${ci(iv(cell, 'closeFirstS'), s1)} / ${ci(iv(cell, 'closeP50S'), s1)} / ${ci(iv(cell, 'closeLastS'), s1)}`,
      int(sumOf(rs.map((x) => x.closes?.open)))
    ]
  }))
}

// The issue's bounds, front by front: met or not, with the figure each rests on.
function wsBounds (rd, fronts, scales, active) {
  const { cellOf, figs, iv, againstDirect, allOpened } = rd
  const verdict = (ok) => (ok === null ? '' : ok ? ' (met)' : ' (**not met**)')
  const rows = []
  for (const scale of scales) {
    rows.push([`${int(scale)} sockets: every one opened`, ...fronts.map((f) => {
      const cell = cellOf(f, scale)
      if (!cell) return '–'
      const missed = sumOf(figs(cell).map((x) => x.asked - x.opened))
      return `${int(missed)} not opened${verdict(missed === 0)}`
    })])
  }
  const largest = Math.max(...scales)
  const ratioTo = (a, b) => (b >= WS_DIRECT_MIN_KB ? a / b : NaN)
  rows.push([`${int(largest)} sockets held idle: RSS per tunnel ≤ ${WS_MEMORY_TIMES_DIRECT}× direct's (after the settle / ` +
    'once quiet)', ...fronts.map((f) => {
    const cell = cellOf(f, largest)
    if (!cell || f === 'direct') return '–'
    if (!allOpened(cell)) return 'not all opened: not judged'
    return ['rssOverIdleKb', 'rssQuietKb'].map((key) => {
      const v = againstDirect(cell, key, ratioTo)
      return finite(v?.value) ? `${ci(v, times)}${verdict(v.value <= WS_MEMORY_TIMES_DIRECT)}` : '–'
    }).join(' / ')
  })])
  const at = cellOf('direct', active)
  rows.push([`echo p99 ≤ direct's + ${WS_ECHO_P99_OVER_DIRECT_MS} ms (at ${int(active)} sockets)`, ...fronts.map((f) => {
    const cell = cellOf(f, active)
    if (!cell?.runs.some((x) => x.echo)) return '–'
    if (f === 'direct') return `${ci(iv(cell, 'echoP99'), ms2)} ms`
    if (!at) return '–'
    const d = againstDirect(cell, 'echoP99', (a, b) => a - b)
    const judged = allOpened(cell) ? verdict(finite(d.value) ? d.value <= WS_ECHO_P99_OVER_DIRECT_MS : null) : ' (not all opened: not judged)'
    return `${ci(d, signed)} ms${judged}`
  })])
  rows.push([`HTTP page p99 beside the echo ≤ ${WS_PAGE_BESIDE_TIMES_ALONE}× alone`, ...fronts.map((f) => {
    const cell = cellOf(f, active)
    if (!cell?.runs.some((x) => x.render?.alone)) return '–'
    const v = iv(cell, 'pageBesideRatio')
    const failed = sumOf(figs(cell).map((x) => x.pageFailedBeside))
    if (failed) return `${ci(v, times)} (**not met**: ${int(failed)} failed beside)`
    return `${ci(v, times)}${verdict(finite(v.value) ? v.value <= WS_PAGE_BESIDE_TIMES_ALONE : null)}`
  })])
  rows.push(['no GET failed during the reload', ...fronts.map((f) => {
    const rs = figs(cellOf(f, active)).map((x) => x.reload).filter(Boolean)
    if (!rs.length) return '–'
    const failed = sumOf(rs.map((x) => x.http?.failed))
    return `${int(failed)} failed${verdict(failed === 0)}`
  })])
  return `The issue's bounds:\n\n${table(['bound', ...fronts.map(label)], rows)}`
}

function wsHow (data) {
  const c = data.config
  return [
    `${c.workers} workers per front (the pool with its defaults, its access log on, \`--graceful-timeout ${c.graceful}s\`;`,
    'Node\'s cluster round-robin, which WebSockets need no more than that: only Socket.IO\'s long-polling start needs',
    'sticky sessions); "direct" is the app as one plain `node` process, no front, and "relay" that process behind a',
    'minimal TCP relay of Node\'s (`bench/lib/tcp-relay.js`, `pipe()` both ways: what one extra hop costs at least).',
    `The app (\`${data.app}\`, the \`ws\``,
    'library without permessage-deflate) sends every message back as it came. The clients, a process of their own',
    `(one event loop: one client core), hold a connection per socket, opened at ${int(c.openRate)} a second.`,
    '*Handshake*: from the client\'s request to its `open`. *Memory*: VmRSS and Pss of every serving process (the',
    'front\'s roots and all their descendants: the pool\'s supervisor, workers and reaper; HAProxy; nginx\'s master and',
    `workers; cluster's primary and workers) ${c.settle} s after the last socket opened, nothing sent, less the same`,
    'processes after a warm-up, before any socket, per socket opened; "÷ direct\'s" is that against the plain process\'s,',
    `run by run, and only where the plain process grew by ${WS_DIRECT_MIN_KB} KB per socket or more (its heap grows by`,
    'steps of a few MB, and may hold a thousand sockets in room it already had). *Once quiet*: the same, read',
    `${c.quiet ?? '–'} s later: a heap keeps for a while the young generation a burst of handshakes grew.`,
    `*Echo*: at ${int(c.activeAt)} sockets,`,
    `${int(c.rate)} messages a second spread evenly over the sockets open (each in turn) for ${c.window} s, each timed`,
    'on the client\'s clock from its send to its echo; the client\'s send lag (against its schedule) and its event',
    'loop\'s delay show how far the client itself was late. *Echoes a second*: each of the first',
    `${c.tpSockets} sockets keeps ${c.tpDepth} messages of ${c.tpBytes} bytes in flight for ${c.tpSeconds} s; the CPU of the`,
    'serving processes is read from /proc over the same time. *HTTP page*:',
    `${c.renders} requests of a ${c.renderMs} ms render (Atomics.wait) from ${c.renderClients} keep-alive clients, alone`,
    'before the sockets and beside the same echo after it. *Reload*: `pool reload` with the sockets open and',
    `nothing sent, while ${c.reloadClients} clients GET a ${c.reloadPageMs} ms page one after the other from 0.5 s before`,
    'until 0.5 s after it; the close codes are those of the sockets the front or the app closed (1006: the',
    'connection ended without a close frame), and their times count from the reload\'s start. Node\'s cluster is not',
    'reloaded: its rolling restart (a worker\'s `disconnect()`) has no bound and waits until every socket of the worker',
    'closes.',
    c.runs > 1 ? `Median of ${c.runs} runs with its 95% interval; counts summed.` : 'One run per cell.',
    'Each front is started afresh for each number of sockets.'
  ].join(' ')
}

async function websocketSection (r, dir, run) {
  const data = load.websocket(dir)
  r.add('## WebSockets', 'A WebSocket through `pool start` is a tunnel: the balancer passes the handshake to the worker ' +
    'holding fewest open requests, and after its 101 joins the client\'s connection and the worker\'s both ways, holding ' +
    'no render place (see the guide\'s "WebSockets"). Per front: how many sockets it holds idle and what memory each ' +
    'costs every serving process; at a thousand sockets, an echo\'s round trip against one plain process, the echoes a ' +
    'second one client core gets through, an HTTP page\'s p99 beside the echo, and a reload. By `bench/websocket.js`.')
  if (!data?.cells?.length) return r.add(missing(run, 'websocket', 'WebSockets'))
  const rd = wsReader(data)
  const scales = [...new Set(data.cells.map((x) => x.scale))].sort((a, b) => a - b)
  const fronts = data.fronts.filter((f) => data.cells.some((x) => x.front === f))
  const lim = data.limits ?? {}
  const active = data.config.activeAt
  for (const scale of scales) {
    const fits = scale === lim.fitted ? ` (the largest that fits the descriptor limit, for the issue's ${(lim.fittedFor ?? []).map(int).join(', ')})` : ''
    r.add(`### ${int(scale)} sockets held idle${fits}`, wsHeldTable(rd, fronts, scale))
  }
  const echo = wsEchoTable(rd, fronts, active)
  if (echo) r.add(`### Echo: ${int(data.config.rate)} messages a second over ${int(active)} sockets`, echo)
  const tp = wsThroughputTable(rd, fronts, active)
  if (tp) r.add('### Echoes a second, one client core', tp)
  const page = wsPageTable(rd, fronts, active)
  if (page) r.add(`### An HTTP page beside ${int(active)} sockets that echo`, page)
  const reload = wsReloadTable(rd, fronts, active)
  if (reload) r.add(`### A reload with ${int(active)} sockets open`, reload)
  r.add(wsBounds(rd, fronts, scales, active))
  r.add(wsHow(data))
  if (lim.fitted) {
    const asked = lim.notRaised
      ? ` (the part asked for ${int(lim.nofileWanted)} with \`prlimit\`, which failed: ${lim.notRaised})`
      : ''
    r.add(`RLIMIT_NOFILE here: ${int(lim.nofile)}${asked}. A relay (the embedded balancer, HAProxy, an nginx worker) ` +
      `holds two descriptors per tunnel in one process, so ${(lim.fittedFor ?? []).map(int).join(', ')} sockets would not fit: ` +
      `${int(lim.fitted)}, the largest round number that does, were measured instead.`)
  }
  const failedSteps = data.cells.flatMap((cell) => cell.runs.flatMap((x, i) => Object.entries(x.failed ?? {}).map(([step, why]) =>
    `${label(cell.front)} at ${int(cell.scale)} sockets${cell.runs.length > 1 ? `, run ${i + 1}` : ''}: ${step.replace(/S$/, '')} (${why})`)))
  if (failedSteps.length) r.add(notAvailable('some steps', `${failedSteps.join('; ')}.`))
  r.add(skippedNote(data.skipped, (x) => (x.scale ? `${label(x.front)} at ${int(x.scale)} sockets` : label(x.front))))
  r.add(provenance(run, 'websocket', null, data))
}

async function bodyBudgetSection (r, dir, run) {
  const data = load.bodyBudget(dir)
  r.add('## Request bodies in memory', 'A front that reads each body before a worker is taken holds the bodies of every queued request. A burst of large POSTs behind busy workers, and what it costs each front: the embedded balancer holds bodies up to its budget (`--body-budget`, by default 1/16 of RAM, at most 256 MiB) and answers the rest 503 with `Retry-After` before reading them; with `--body-budget 0` it holds them all; nginx keeps 16 KB of each in memory (its default `client_body_buffer_size`) and writes the rest to a temp file. By `bench/body-budget.js`.')
  if (!data?.rows?.length) return r.add(missing(run, 'body-budget', 'request bodies in memory'))
  r.add(await r.figure('body-budget', charts.bodyBudget(data), 'peak and after-burst RSS of each front against the number of large POSTs sent at once'))
  const answered = (x) => Object.entries(x.statuses).map(([s, n]) => `${int(n)} × ${s}`).join(', ')
  r.add(table(['POSTs at once', 'front', 'RSS before MB', 'peak RSS MB', 'RSS after MB', 'answers', 'spilled to disk MB (at once)'], data.rows.map((x) => [
    int(x.count), label(x.front), ms(x.rssBeforeMb), ms(x.peakRssMb), ms(x.rssAfterMb), answered(x), finite(x.spilledMb) ? `${int(x.spilledMb)} (${int(x.peakDiskMb)})` : '–'
  ])))
  r.add(`${data.config.mb} MB bodies, ${data.config.workers} workers busy with a render long enough for the whole burst to arrive, then ${data.config.render} ms per POST; RSS of the front's processes (for nginx → HAProxy, nginx's master and workers and HAProxy) sampled every 20 ms, and ${data.config.settle / 1000} s after the last answer. nginx's spilled bytes are its own count of bodies "buffered to a temporary file"; "at once" is the most its processes held open. A spilled body costs nginx no memory but a write and a read through the page cache.`)
  r.add(skippedNote(data.skipped))
  r.add(provenance(run, 'body-budget'))
}

// Where a FIFO answers everyone in time (the FIFO's clients gave up on none of its requests, in
// the median run), overload control on (the default) against off, in the same runs: goodput, p50
// and p99 side by side, what it turned away, and whether "on" is no worse (its intervals reach
// the other's: goodput at or above, latencies at or below).
function overloadWhereFifoKeepsUp (data, stat) {
  const cell = (load, front) => data.cells.find((c) => c.load === load && c.front === front)
  const pairs = [...new Set(data.cells.map((c) => c.load))].sort((a, b) => a - b)
    .map((load) => [load, cell(load, 'embedded-oc'), cell(load, 'embedded-fifo')])
    .filter(([, on, off]) => on && off && stat(off, 'gaveUp').value === 0)
  if (!pairs.length) return null
  const atMost = (a, b) => finite(a.lo) && finite(b.hi) && a.lo <= b.hi
  return table(['load', 'goodput, on', 'goodput, off', 'p50 ms, on', 'p50 ms, off', 'p99 ms, on', 'p99 ms, off', '503, on', 'no worse within the intervals'], pairs.map(([load, on, off]) => {
    const [g1, g0, p50on, p50off, p99on, p99off, shed] = [stat(on, 'share'), stat(off, 'share'), stat(on, 'p50'), stat(off, 'p50'), stat(on, 'p99'), stat(off, 'p99'), stat(on, 'turnedAway')]
    const ok = finite(g1.hi) && finite(g0.lo) && g1.hi >= g0.lo && atMost(p50on, p50off) && atMost(p99on, p99off)
    return [`${load}×`, ci(g1, pct), ci(g0, pct), ci(p50on), ci(p50off), ci(p99on), ci(p99off), ci(shed, pct), ok ? 'yes' : '**no**']
  }))
}

const RENDER_NAME = { cpu: 'CPU', await: 'awaits data' }

// Closed-loop clients, the defaults against FIFO per shape: p99 of each and their ratio (run by
// run), and what each turned away; `verdict` says how many shapes keep the issue's bounds.
function overloadClosedTable (data, stat) {
  const shapes = [...new Map(data.closed.map((c) => [`${c.workers}/${c.render}/${c.clients}`, c])).values()]
  let kept = 0
  let judged = 0
  const rows = shapes.map((s) => {
    const of = (front) => data.closed.find((c) => c.workers === s.workers && c.render === s.render && c.clients === s.clients && c.front === front)
    const on = of('embedded-oc')
    const off = of('embedded-fifo')
    const ratio = on && off ? interval(on.runs.map((x, i) => ({ v: off.runs[i] ? x.p99 / off.runs[i].p99 : NaN })), 'v') : null
    const shed = (c) => (c ? c.runs.reduce((n, x) => n + x.turnedAway, 0) : null)
    if (on && off) {
      judged++
      if (shed(on) === 0 && finite(ratio.value) && ratio.value <= 1.1) kept++
    }
    return [s.workers, RENDER_NAME[s.render] ?? s.render, s.clients, on ? ci(stat(on, 'p99')) : '–', off ? ci(stat(off, 'p99')) : '–', ratio ? ci(ratio, times) : '–', int(shed(on)), int(shed(off)), on ? int(on.runs.reduce((n, x) => n + x.requests, 0)) : '–']
  })
  return {
    table: table(['workers', 'render', 'clients', 'p99 ms, defaults', 'p99 ms, FIFO', 'p99 ÷ FIFO\'s', '503, defaults', '503, FIFO', 'requests, defaults'], rows),
    verdict: `${kept} of ${judged} shapes with nothing turned away and p99 within 1.1× of the FIFO's.`
  }
}

async function overloadSection (r, dir, run) {
  const data = load.overload(dir)
  r.add('## Overload', 'More arrives than the workers can render, and clients give up after a deadline, as browsers and upstream proxies do. Goodput is what still reaches clients in time, as a share of what the workers can render. A FIFO queue under a standing backlog serves each request just before its client leaves. The embedded balancer\'s overload control (on by default; `--no-overload-control` for FIFO) leaves the queue a FIFO until more arrives than the workers take and a FIFO could no longer answer within what clients wait; then it serves later arrivals newest first and turns away, at once, what can no longer be answered in time. The generated HAProxy config turns away what finds its queue full (`--max-queue`). By `bench/overload.js`; the same loads on the dispatcher with a simulated clock: `node bench/overload-sim.js`.')
  if (!data?.cells?.length) return r.add(missing(run, 'overload', 'overload goodput'))
  if (data.legacy) r.add('> **From an earlier format of this part:** one run per cell (no interval), the fronts sharing one set of workers and HAProxy from a hand-written config; `npm run bench -- --only overload` measures it as described here.')
  const stat = (c, k) => interval(c.runs, k)
  r.add(await r.figure('overload-goodput', charts.overloadGoodput(data, stat), 'goodput as a share of capacity against the offered load, per front, with 95% intervals'))
  r.add(await r.figure('overload-latency', charts.overloadLatency(data, stat), 'p99 latency of the answered requests against the offered load, per front, with 95% intervals'))
  r.add(table(['load', 'warm-up s', 'front', 'runs', 'offered req/s', 'goodput req/s', 'goodput ÷ capacity', 'answered p50 ms', 'answered p99 ms', '503', 'gave up', 'drained after s'], data.cells.map((c) => {
    const p = (k) => stat(c, k)
    return [`${c.load}×`, c.warmup ?? data.config?.warmup ?? '–', label(c.front), runsCell(p('offered')), ci(p('offered'), int), ci(p('goodput'), int), ci(p('share'), pct), ci(p('p50')), ci(p('p99')), ci(p('turnedAway'), pct), ci(p('gaveUp'), pct), ci(p('drainS'), (v) => v.toFixed(1))]
  })))
  const keepsUp = overloadWhereFifoKeepsUp(data, stat)
  if (keepsUp) r.add('Where a FIFO answers every request in time (its clients gave up on none), overload control must change nothing: the same runs with it on (the default) and off.', keepsUp)
  if (data.mixed?.length) {
    r.add('### Mixed routes', `The same open loop with two routes: ${(data.renders?.mixed?.routes ?? []).map((x) => `${pct(x.share)} of ${x.ms} ms`).join(' and ')}, the defaults against FIFO.`)
    r.add(await r.figure('overload-mixed', charts.overloadGoodput(data, stat, { cells: data.mixed, title: 'Goodput with a fast route and a slow one', what: 'mixed routes; ' }), 'goodput as a share of capacity against the offered load with mixed routes, overload control on and off, with 95% intervals'))
    r.add(table(['load', 'warm-up s', 'front', 'runs', 'goodput ÷ capacity', 'answered p50 ms', 'answered p99 ms', '503', 'gave up'], data.mixed.map((c) => {
      const p = (k) => stat(c, k)
      return [`${c.load}×`, c.warmup, label(c.front), runsCell(p('offered')), ci(p('share'), pct), ci(p('p50')), ci(p('p99')), ci(p('turnedAway'), pct), ci(p('gaveUp'), pct)]
    })))
  }
  if (data.closed?.length) {
    const closed = overloadClosedTable(data, stat)
    const burst = data.burst ? `${data.burst.count} requests of ${data.burst.ms} ms from ${data.burst.clients} clients` : 'a burst of fast requests'
    r.add('### Closed-loop clients', `Each client sends its next request once the last one is answered: the queue they make is bounded, and a FIFO serves them in turn, so it is no overload, however many they are. Each run comes right after ${burst}, so that the pace measured on those must not judge the slow renders after them; renders on the CPU are lognormal (median ${data.renders?.cpu?.median ?? '?'} ms), pages awaiting data hold their worker ${data.renders?.await?.ms ?? '?'} ms with its event loop idle. ${closed.verdict}`)
    r.add(await r.figure('overload-closed', charts.overloadClosed(data, stat), 'p99 latency of closed-loop clients, overload control on and off, per number of clients, pool size and kind of render, with 95% intervals'))
    r.add(closed.table)
  }
  const a = data.config ?? {}
  r.add(`${a.workers ?? '?'} workers, lognormal renders (median ${a.median ?? '?'} ms, σ ${a.sigma ?? '?'}), Poisson arrivals at the given multiple of capacity, clients' deadline ${a.deadline ?? '?'} ms, ${a.measure ?? '?'} s measured per run${a.runs ? `, ${a.runs} runs per cell` : ''}, after a warm-up of ${a.warmup ?? '?'} s, or, where a FIFO's wait would reach the deadline within the run, once every front has reached its steady state (the FIFO's wait at the deadline, then one deadline more: 3 s at 1.5×, 2 s at 2×). Answered latencies are of the requests answered at all: those whose client gave up are missing, so under overload they understate what clients saw.${data.haproxyQueueTimeoutMs ? ` "HAProxy, short queue timeout": the generated config with \`--queue-timeout ${data.haproxyQueueTimeoutMs}ms\`, below the deadline.` : ' "HAProxy": the generated config, its queue capped at 100 requests; "--max-queue 0": uncapped, a FIFO.'}`)
  r.add(skippedNote(data.skipped, (s) => `${label(s.front)}${s.workers ? ` (${s.workers} workers)` : ''}`))
  r.add(provenance(run, 'overload', 'node bench/overload.js', data.legacy ? null : data))
}

async function fleetSection (r, dir, run) {
  const data = load.fleet(dir)
  r.add('## Several hosts behind an edge HAProxy', 'A fleet of pools (hosts × workers) behind one edge HAProxy: with each host\'s maxconn set by its agent to its ready workers, requests wait at the edge in one queue for the whole fleet; with plain round-robin each host queues its share. Against the ideal central queue over all the workers, by `bench/fleet.js`.')
  const cells = data?.cells?.filter((c) => c.runs.some((x) => finite(x.p50) && finite(x.ideal50)))
  if (!cells?.length) return r.add(data ? notAvailable('multi-host results', 'fleet.json has no cells the report can read.') : missing(run, 'fleet', 'multi-host results'))
  const a = data.config ?? {}
  if (data.legacy) r.add('> **From an earlier format of this part:** the rounds of each cell pooled into one figure (no interval); `npm run bench -- --only fleet` measures it as described here.')
  const model = label(cells.find((c) => c.model)?.edge ?? 'split 3')
  r.add(await r.figure('fleet-ratio', charts.ratioVsLoad(cells, ratioOf, { key: 'edge', title: 'A fleet against the ideal central queue', subtitle: `${a.hosts ?? '?'} hosts × ${a.perHost ?? '?'} workers; p50 and p99 as a multiple of the ideal's${data.legacy ? '' : ', median of the runs with its 95% interval'}; "${model}" is computed` }), 'p50 and p99 as a multiple of the ideal for each edge configuration and the model, against the load'))
  r.add(table(['ρ', 'edge', 'runs', 'req/s', 'p50 ms (ideal)', 'p99 ms (ideal)', 'p50 ÷ ideal', 'p99 ÷ ideal', 'errors', 'edge CPU µs/req'], cells.map((c) => {
    const p = (k) => interval(c.runs, k)
    return [c.rho, label(c.edge), runsCell(p('p50')), int(p('rps').value), `${ci(p('p50'))} (${ci(p('ideal50'))})`, `${ci(p('p99'))} (${ci(p('ideal99'))})`, ci(ratioOf(c, 50), times), ci(ratioOf(c, 99), times), c.model ? '–' : int(c.runs.reduce((n, x) => n + (x.errors ?? 0), 0)), c.model ? '–' : ci(p('cpuUsPerRequest'), int)]
  })))
  r.add(`"${model}" is a model, not a run: the agent runs' arrivals dealt at random to ${a.hosts ?? 3} edges, each an ideal queue over its share of every host's workers, zero overhead: the best several edges with a fixed share each could do. ${data.mode === 'netns' ? 'Each host is a network namespace.' : data.mode ? `Hosts: ${data.mode}.` : ''}`)
  if (data.addedLatencyMs) r.add(`Time per 0 ms request, sequential, a new connection each (median): ${Object.entries(data.addedLatencyMs).map(([k, v]) => `${k} ${v.toFixed(2)} ms`).join('; ')}.`)
  r.add(discoveryText(data))
  r.add(provenance(run, 'fleet', 'node bench/fleet.js', data.legacy ? null : data))
}

// The DNS edge's rounds (bench/fleet.js discovery): a host's record added, then removed as its
// pool stops, under load.
function discoveryText (data) {
  const d = data.discovery
  if (!d?.rounds?.length) return data.discoverySkipped ? `**Hosts found by DNS:** not measured (${data.discoverySkipped}).` : null
  const joins = d.rounds.map((x) => x.joinMs).filter(finite).sort((a, b) => a - b)
  const failed = d.rounds.reduce((n, x) => n + x.failed, 0)
  const requests = d.rounds.reduce((n, x) => n + x.requests, 0)
  const late = d.rounds.length - joins.length
  return `**Hosts found by DNS** (\`pool config edge --discover\`, dnsmasq beside the edge, resolve every ${d.resolveInterMs} ms, ρ ${d.rho} of the hosts in DNS): over ${d.rounds.length} rounds, a host whose record appeared was sent its first request after ${joins.length ? `${int(joins[Math.floor((joins.length - 1) / 2)])} ms (median; ${int(joins[0])}–${int(joins.at(-1))} ms)` : 'no round'}${late ? `, ${late} round${late > 1 ? 's' : ''} not within 4 s` : ''}; a host that left, its record removed and its pool stopped at once, cost ${int(failed)} failed of ${int(requests)} requests.`
}

async function costsSection (r, dir, run) {
  const data = load.costs(dir)
  r.add('## Costs', 'What a front costs besides latency, read against the floor: a minimal Node balancer for the pool\'s rule (Node\'s http server, one central FIFO, one request per worker, kept-alive worker connections, buffered responses, nothing else: `bench/lib/minimal-balancer.js`). CPU time per request of each front\'s own processes and of its workers at four loads, what one core of the front serves, an idle pool\'s CPU and memory against Node\'s cluster, and the fronts with renders that burn their core. By `bench/costs.js`.')
  if (!data?.requests?.length && !data?.idle?.length) return r.add(missing(run, 'costs', 'costs'))
  const c = data.config
  const stat = (cell, f) => interval(cell.runs, f)
  const loads = data.loads ?? []
  const cell = (front, key) => data.requests.find((x) => x.front === front && x.load === key)
  // Each front's CPU per request, and its ratio to the minimal balancer's, round by round.
  const ratioToFloor = (x, key) => {
    const floor = cell('minimal', key)
    if (!floor || x.front === 'minimal') return null
    return interval(x.runs.map((y, i) => ({ v: y.frontUsPerRequest / (floor.runs[i] ?? floor.runs[0]).frontUsPerRequest, lag: y.lag })), 'v')
  }
  const fronts = [...new Set(data.requests.map((x) => x.front))]
  if (fronts.length) {
    r.add(await r.figure('costs-cpu', charts.costsCpu(data, stat), 'CPU time per request of each front\'s own processes at each load, with 95% intervals'))
    const rows = []
    for (const front of fronts) {
      const cells = loads.map((l) => cell(front, l.key))
      const names = Object.keys(cells.find(Boolean)?.runs[0]?.processes ?? {})
      for (const name of names) rows.push([label(front), name, ...cells.map((x) => (x ? ci(stat(x, (y) => y.processes[name]?.cpuUsPerRequest), int) : '–'))])
      if (names.length > 1) rows.push([label(front), '**all its processes**', ...cells.map((x) => (x ? ci(stat(x, 'frontUsPerRequest'), int) : '–'))])
      if (front !== 'minimal') rows.push([label(front), '÷ the minimal balancer', ...cells.map((x, i) => (x ? ci(ratioToFloor(x, loads[i].key), times) : '–'))])
      rows.push([label(front), `its ${c.workers} workers, together`, ...cells.map((x) => (x ? ci(stat(x, 'workersUsPerRequest'), int) : '–'))])
    }
    r.add(table(['front', 'CPU µs per request', ...loads.map((l) => l.label)], rows))
    r.add(`A 0 ms handler, ${c.workers} workers per front. Open loop for ${c.seconds} s at each rate (a new connection per request, or kept-alive client connections); saturation: autocannon with ${c.connections} keep-alive connections for ${c.peakSeconds} s, everything sharing the machine's ${data.cores} cores. Each front is warmed up first on kept-alive connections, at saturation and (when a load uses them) on new connections, so that the first round does not alone pay V8's compiles of that path. CPU is every thread's, from /proc schedstat, each process's idle cost (measured for ${c.idleSeconds} s just before) subtracted; ${c.runs} run${c.runs > 1 ? 's' : ''} per cell, the fronts taking turns, ratios taken round by round. The embedded balancer runs with its defaults (access log and metrics on). In HAProxy mode the supervisor is not in the request's path: what it spends per request is what it hears of each.`)
  }
  if (data.pinned?.length) {
    r.add('### One core for the front')
    const floor = data.pinned.find((x) => x.front === 'minimal')
    r.add(table(['front', 'req/s measured', 'its core busy', 'req/s per core of the front', '÷ the minimal balancer', 'p99 ms'], data.pinned.map((x) => [
      label(x.front), ci(stat(x, 'rps'), int), ci(stat(x, 'frontCore'), pct), ci(stat(x, 'perCore'), int),
      floor && x.front !== 'minimal' ? ci(interval(x.runs.map((y, i) => ({ v: y.perCore / (floor.runs[i] ?? floor.runs[0]).perCore })), 'v'), times) : '–', ci(stat(x, 'p99'))
    ])))
    r.add(`autocannon with ${c.connections} keep-alive connections for ${c.peakSeconds} s, a 0 ms handler; the front's processes pinned alone to CPU 0, the workers and autocannon to CPU 1 (taskset). "Per core": the requests answered over the share of CPU 0 the front used, the rate it would serve with that core saturated (the rate measured, when it was). Below ~90% busy the other core was the limit. Other work on the machine can run on CPU 0 too.`)
  }
  if (data.idle?.length) {
    const m = (key, f = ms3) => ci(interval(data.idle, key), f)
    const mb = (v) => v.toFixed(1)
    r.add('### An idle pool')
    r.add(table(['', 'pool', 'Node\'s cluster'], [
      ['supervisor / primary, CPU ms/s', m('supervisorMsPerS'), m('clusterPrimaryMsPerS')],
      ['the supervisor in HAProxy mode, CPU ms/s', m('haproxySupervisorMsPerS'), ''],
      ['a worker, CPU ms/s', m('workerMsPerS'), m('clusterWorkerMsPerS')],
      ['a worker, RSS MB', m('workerRssMb', mb), m('clusterWorkerRssMb', mb)],
      ['a worker\'s own memory (private pages), MB', m('workerPrivateMb', mb), m('clusterWorkerPrivateMb', mb)],
      ['a worker\'s threads', m('workerThreads', int), m('clusterWorkerThreads', int)],
      ['the pool\'s reaper, once per pool: RSS MB (own)', `${m('reaperRssMb', mb)} (${m('reaperPrivateMb', mb)})`, '']
    ]))
    r.add(`${c.workers} workers each, the pool with its defaults and the stats listener on; after 200 requests and ${c.idleSettle} s to settle, CPU over ${c.idleMeasure} s (every thread, /proc schedstat); ${data.idle.length} run${data.idle.length > 1 ? 's' : ''}.`)
  }
  const targets = costTargets(data)
  if (targets.some((t) => t.value !== null)) {
    r.add('### The cost targets')
    r.add(table(['figure', 'measured (median of the rounds)', 'target', ''], targets.map((t) => [t.what, t.value === null ? 'not measured' : `${t.unit === '×' ? t.value.toFixed(2) : t.value.toFixed(t.unit === 'ms/s' ? 3 : 1)} ${t.unit}`, `${t.op} ${t.target} ${t.unit}`, t.met === null ? '–' : t.met ? 'met' : '**not met**'])))
  }
  if (data.cpuBound?.some((y) => y.runs.length)) {
    r.add('### CPU-bound renders')
    r.add(table(['front', 'runs', 'p50 ms (ideal)', 'p99 ms (ideal)', 'p50 ÷ ideal', 'p99 ÷ ideal', 'send lag p99 ms'], data.cpuBound.filter((y) => y.runs.length).map((y) => [
      label(y.front), runsCell(stat(y, 'p50')), `${ci(stat(y, 'p50'))} (${ci(stat(y, 'ideal50'))})`, `${ci(stat(y, 'p99'))} (${ci(stat(y, 'ideal99'))})`, ci(ratioOf(y, 50), times), ci(ratioOf(y, 99), times), lagCell(y.runs)
    ])))
    r.add(`${data.cores} workers (one per core) whose renders burn the CPU (a busy loop) for a lognormal service time (median ${c.median} ms, σ ${c.sigma}, cap 500 ms), Poisson arrivals at ρ ${c.cpuRho}, ${c.cpuSeconds} s per run; the ideal is the central queue over ${data.cores} servers with the same arrivals and service times. Here the front, the load generator and the renders share the cores: what the front costs shows as latency.`)
  }
  r.add(skippedNote(data.skipped))
  r.add(provenance(run, 'costs', null, data))
}

// The concurrency part's server that relays without admitting by CPU (bench/concurrency.js).
const RELAY = 'Node relay'

async function concurrencySection (r, dir, run) {
  const data = load.concurrency(dir)
  r.add('## One render on the CPU per worker', 'Pages that await their data inside the render keep a one-request worker idle for most of its request. `--worker-concurrency K` lets a worker hold up to K requests while every one it holds awaits I/O, never while one renders ([the guide](guide/embedded-balancer.md#one-render-on-the-cpu-per-worker)). The pool at K=1 (one request per worker) and at a larger K, against Node\'s cluster and one plain process (and, on pages awaiting data, a plain Node relay), with closed-loop clients and open-loop arrivals. By `bench/concurrency.js`.')
  if (!data?.summary?.length) return r.add(missing(run, 'concurrency', 'this part'))
  const servers = [...new Set(data.summary.map((c) => c.server))]
  const loadOf = (x) => x.clients ? `${x.clients} clients` : `ρ ${x.rho}`
  const rows = []
  for (const page of [...new Set(data.summary.map((c) => c.page))]) {
    for (const load of [...new Set(data.summary.filter((c) => c.page === page).map(loadOf))]) {
      rows.push([page, load, ...servers.map((s) => {
        const c = data.summary.find((x) => x.page === page && loadOf(x) === load && x.server === s)
        return c ? `${c.rps} req/s, p50 ${int(c.p50)}, p99 ${int(c.p99)} ms, ${int(c.rssMb)} MB${c.failed ? `, ${c.failed} failed` : ''}` : '–'
      })])
    }
  }
  r.add(table(['page', 'load', ...servers], rows))
  const pages = Object.entries(data.pages ?? {}).map(([name, page]) => `*${name}* ${page.about}`).join(', ')
  const c = data.config
  const open = c.rhos?.length ? ` Open loop: Poisson arrivals on a new connection each at ρ of the pool's capacity at K=1 (ρ × workers ÷ the time a request holds its worker there), ${c.openS} s per cell, the same arrivals for every server.` : ''
  r.add(`Pages: ${pages} (the CPU blocked with Atomics.wait, data awaited on a timer). -n ${data.workers || 'cores'} for the pool, cluster${servers.includes(RELAY) ? ` and the ${RELAY}` : ''}, K=${data.k}; closed loop ${c.durationS} s per cell on kept-alive connections.${open} ${c.repeats} repeat${c.repeats > 1 ? 's' : ''}, the median shown; each server warmed with a second of each of its pages first; MB: the RSS of every serving process together.`)
  if (data.targets?.length) {
    // For scale, the p99 of the servers that do not admit by CPU against cluster's, on the same
    // pages: one process (no front at all) and the Node relay, where measured.
    const p99VsCluster = (server, x) => {
      const of = (name) => data.summary.find((c) => c.server === name && c.page === 'data' && loadOf(c) === loadOf(x))
      return of(server) && of('cluster') ? `${Math.round(of(server).p99 / of('cluster').p99 * 1000) / 1000}×` : '–'
    }
    const relay = servers.includes(RELAY)
    r.add(table(['load', 'data pages: req/s ÷ one process (≥ 0.9)', 'data pages: p99 ÷ cluster (≤ 1)', 'one process: p99 ÷ cluster', ...(relay ? [`${RELAY}: p99 ÷ cluster`] : []), 'CPU-bound: p99 ÷ K=1 (≤ 1.02)', 'mix: req/s ÷ K=1', 'mix: p99 ÷ K=1'],
      data.targets.map((x) => [loadOf(x), `${x.dataRpsVsPlain}×`, `${x.dataP99VsCluster}×`, p99VsCluster('plain', x), ...(relay ? [p99VsCluster(RELAY, x)] : []), `${x.cpuP99VsK1}×`, `${x.mixRpsVsK1}×`, `${x.mixP99VsK1}×`])))
    if (relay) r.add(`On pages awaiting data a worker loses nothing by holding several requests, so Node's cluster, which hands each connection to a worker and is then out of its way, is as good a rule there as any, while a front that relays (the pool's balancer) adds its hop to every request. The ${RELAY} (the minimal balancer: Node's http server and client, up to ${data.k} requests per worker dealt in turn, no admission rule) adds that hop and nothing else. One process, which adds no hop either, shows how far apart the p99s of two such servers fall here.`)
  }
  r.add(provenance(run, 'concurrency', null, data))
}

const SECTIONS = [
  ['balancer', 'Latency against the ideal central queue', latencySection],
  ['overhead', 'Front overhead', overheadSection],
  ['costs', 'Costs', costsSection],
  ['matrix', "The operator's matrix", matrixSection],
  ['kill-timeline', 'Kill timeline', killTimelineSection],
  ['soak', 'Soak: kills from outside and reloads', soakSection],
  ['death-notice', 'Death notice', deathNoticeSection],
  ['haproxy-kill', 'The kill experiment, counted', haproxyKillSection],
  ['reload', 'Rolling reload under load', reloadSection],
  ['slow-clients', 'Slow clients', slowClientsSection],
  ['non-readers', 'Clients that read nothing', nonReadersSection],
  ['streaming', 'Streamed pages', streamingSection],
  ['streams', 'Long-lived streams', streamsSection],
  ['websocket', 'WebSockets', websocketSection],
  ['body-budget', 'Request bodies in memory', bodyBudgetSection],
  ['overload', 'Overload', overloadSection],
  ['fleet', 'Several hosts behind an edge HAProxy', fleetSection],
  ['concurrency', 'One render on the CPU per worker', concurrencySection]
]

const anchor = (title) => title.toLowerCase().replace(/[^\w\s-]/g, '').trim().replace(/\s+/g, '-')

function header (r, run) {
  const m = run?.machine
  const v = run?.versions ?? {}
  r.add('# Benchmarks')
  r.add(`${run?.quick ? '**Quick run** (`npm run bench -- --quick`: fewer and shorter runs, for a first look; the full suite is `npm run bench`).' : 'Made by `npm run bench`.'} Last run ${when(run?.endedAt)}. Every number and chart here is rebuilt by the command from the result files in \`${run?.resultsDir ?? 'bench/results'}\`; \`npm run bench -- --only NAME\` reruns one part and rebuilds the whole report from the stored results of the others, so the parts below may come from different runs (each says when it was made).`)
  r.add(table(['', ''], [
    ['CPU', m ? `${m.cpus} × ${m.model}` : '–'],
    ['memory', m ? `${m.memGb} GB` : '–'],
    ['system', m?.kernel ?? '–'],
    ['load average (1, 5, 15 min)', run?.loadavgStart ? `${run.loadavgStart.join(' ')} at the start, ${run.loadavgEnd?.join(' ') ?? '–'} at the end of the last run` : '–'],
    ['versions', [v.node && `Node ${v.node}`, v.haproxy, v.haproxy30 && `${v.haproxy30} (the rows marked HAProxy 3.0)`, v.nginx, v.pool && `pool ${v.pool}`, v.autocannon && `autocannon ${v.autocannon}`, v.pm2 && `PM2 ${v.pm2}`, v.vega && `vega ${v.vega}`, v.vegaLite && `vega-lite ${v.vegaLite}`].filter(Boolean).join(', ') || '–']
  ]))
  r.add('Renders are modelled by blocking each worker\'s event loop with `Atomics.wait` for the service time: a busy worker burns no CPU, so 15 workers behave like a 15-core machine even on a small one, and what is measured is the balancing in front. Everything runs on one machine over loopback; other work on it shows in the numbers (hence the load averages).')
  const rows = PARTS.map((p) => {
    const rec = run?.parts?.[p.name]
    const title = SECTIONS.find(([n]) => n === p.name)?.[1] ?? p.name
    const status = !rec ? 'not run by `npm run bench`' : rec.lastFailure ? `${rec.lastFailure.status} at ${when(rec.lastFailure.startedAt)}${rec.status === 'ok' ? '; results from the run before' : ''}` : rec.status
    const ok = rec?.status === 'ok'
    return [`[${title}](#${anchor(title)})`, `\`${p.name}\``, status, ok ? when(rec.startedAt) : '–', ok ? secs(rec.seconds) : '–', ok && rec.loadavgBefore ? `${rec.loadavgBefore[0]} → ${rec.loadavgAfter?.[0] ?? '–'}` : '–']
  })
  r.add(table(['part', '--only', 'last run', 'results made at', 'took', 'load (1 min) before → after'], rows))
}

async function buildReport ({ resultsDir, outFile, chartsDir, run }) {
  const r = new Report({ outFile, chartsDir })
  header(r, run)
  for (const [, , section] of SECTIONS) await section(r, resultsDir, run)
  r.write()
  return { outFile, charts: r.figures.map((f) => path.join(chartsDir, f)) }
}

module.exports = { buildReport, SECTIONS }
