'use strict'

// What the report reads, part by part, from the results directory. The parts written for the
// suite (matrix, slow-clients, kill-timeline, overhead) and bench/overload.js write JSON; until
// bench/balancer.js, bench/haproxy-kill.js and bench/reload.js can write JSON too, their numbers
// are read back from the markdown tables they write (balancer.md, haproxy-kill.md, reload.md).
// Every loader returns null when its file is missing, and never makes a number up: a cell it
// cannot read is null, and the report says "not available".

const fs = require('node:fs')
const path = require('node:path')

function readText (dir, file) {
  try { return fs.readFileSync(path.join(dir, file), 'utf8') } catch { return null }
}

function readJson (dir, file) {
  const text = readText(dir, file)
  if (text === null) return null
  try { return JSON.parse(text) } catch { return null }
}

// Every markdown table in `text`: { heading (the last '#' line or paragraph before it), header,
// rows } with cells as trimmed strings, `**bold**` unwrapped.
function markdownTables (text) {
  const tables = []
  let context = ''
  let current = null
  for (const line of text.split('\n')) {
    if (/^\s*\|/.test(line)) {
      const cells = line.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim().replace(/^\*\*(.*)\*\*$/, '$1'))
      if (!current) { current = { heading: context, header: cells, rows: [] }; tables.push(current) } else if (!cells.every((c) => /^:?-+:?$/.test(c))) current.rows.push(cells)
    } else {
      current = null
      if (line.trim()) context = line.trim()
    }
  }
  return tables
}

const num = (s) => {
  const m = /-?\d+(?:\.\d+)?/.exec(s ?? '')
  return m ? Number(m[0]) : null
}
// "32.9 (30.8)" → [32.9, 30.8]
const pair = (s) => {
  const m = /(-?[\d.]+)\s*\((-?[\d.]+)\)/.exec(s ?? '')
  return m ? [Number(m[1]), Number(m[2])] : [null, null]
}
const list = (s) => (s ?? '').split(',').map((x) => num(x)).filter((x) => x !== null)

function column (table, pattern) {
  return table.header.findIndex((h) => pattern.test(h))
}

// The "Made by: `command` in N s on ..." line the benches end with.
function madeBy (text) {
  const line = text.split('\n').find((l) => /^Made by:/.test(l))
  if (!line) return null
  const command = /`([^`]+)`/.exec(line)?.[1] ?? line.replace(/^Made by:\s*/, '').trim()
  return { command, line: line.replace(/^Made by:\s*/, '') }
}

// bench/balancer.js: latency against the ideal at each ρ, per front, each cell with its runs.
// Its first format (--json: one pooled row per cell in `queueing`, with added latency and
// buffering measured elsewhere now) comes out in the same shape, marked `legacy`.
function balancer (dir) {
  const json = readJson(dir, 'balancer.json')
  if (!json) return null
  if (Array.isArray(json.cells)) return json
  if (!Array.isArray(json.queueing)) return null
  const samples = json.samples?.latency ? { rho: json.samples.rho, latency: { ...json.samples.latency, ...(json.samples.ideal ? { ideal: json.samples.ideal } : {}) } } : null
  return { legacy: true, cells: json.queueing.map((q) => ({ rho: q.rho, front: q.front, runs: [q] })), samples, madeBy: json.madeBy ? { command: json.madeBy } : null }
}

// bench/haproxy-kill.js: failed requests per configuration, each repeat's count. From its JSON
// once it writes one (--json FILE, asked for: { args, madeBy, results: [{ id, drive, checks,
// kills, ok, failed, byKind, maintMs }] }, one entry per run as it has them), else from its table.
function haproxyKill (dir) {
  const json = readJson(dir, 'haproxy-kill.json')
  if (json && Array.isArray(json.results)) {
    const ids = [...new Set(json.results.map((r) => r.id))]
    const runs = ids.map((id) => {
      const rs = json.results.filter((r) => r.id === id)
      return {
        id,
        maintBy: rs[0].drive ? 'pool' : 'nobody',
        checks: rs[0].checks,
        kills: rs.map((r) => r.kills),
        failed: rs.map((r) => r.failed),
        status503: rs.map((r) => r.byKind?.['503'] ?? 0),
        closed: rs.map((r) => r.byKind?.closed ?? 0),
        answered: rs.map((r) => r.ok)
      }
    })
    const maint = json.results.flatMap((r) => r.maintMs ?? []).sort((a, b) => a - b)
    return {
      source: 'haproxy-kill.json',
      command: json.madeBy ?? null,
      about: null,
      maint: maint.length ? `MAINT latency measured by the pool (exit handled → HAProxy's reply): median ${maint[Math.floor(maint.length / 2)].toFixed(2)} ms, max ${maint[maint.length - 1].toFixed(2)} ms over ${maint.length} kills.` : null,
      versions: null,
      runs
    }
  }
  const text = readText(dir, 'haproxy-kill.md')
  if (text === null) return null
  const t = markdownTables(text).find((x) => column(x, /failed requests/) >= 0)
  if (!t) return null
  const col = (re) => column(t, re)
  const runs = t.rows.map((r) => ({
    id: r[0],
    maintBy: /pool/.test(r[col(/MAINT set by/)]) ? 'pool' : 'nobody',
    checks: r[col(/health-check/)],
    kills: list(r[col(/^kills/)]),
    failed: list(r[col(/failed requests/)]),
    status503: list(r[col(/503/)]),
    closed: col(/closed/) >= 0 ? list(r[col(/closed/)]) : [],
    answered: list(r[col(/answered/)])
  }))
  const command = /`(node bench\/haproxy-kill\.js[^`]*)`/.exec(text)?.[1] ?? null
  const about = text.split('\n').find((l) => /closed-loop/.test(l)) ?? null
  const maint = text.split('\n').find((l) => /^MAINT latency/.test(l)) ?? null
  const versions = /` — (.*)\.$/m.exec(text)?.[1] ?? null
  return { source: 'haproxy-kill.md', command, about, maint, versions, runs }
}

// bench/reload.js: latency during a rolling reload against steady state, per front (and, in
// its JSON, per warm-up setting). Both forms come out as rows of { front, warmup, steady,
// during, failed, requests, reloadS, replaced, ratios }.
function reload (dir) {
  const json = readJson(dir, 'reload.json')
  if (json && Array.isArray(json.rows)) {
    const rows = json.rows.map((r) => ({
      front: r.name ?? r.front,
      warmup: r.warmupRequests ?? 0,
      steady: { p50: r.steady?.p50 ?? null, p99: r.steady?.p99 ?? null },
      during: { p50: r.inReload?.p50 ?? null, p99: r.inReload?.p99 ?? null },
      failed: r.failed ?? r.inReload?.failed ?? null,
      requests: r.requests ?? r.inReload?.requests ?? null,
      reloadS: r.reloadMs !== undefined ? r.reloadMs / 1000 : null,
      replaced: r.replaced ?? null,
      ratios: r.ratios ?? null
    }))
    return { source: 'reload.json', madeBy: json.madeBy ? { command: json.madeBy } : null, args: json.args ?? null, at: json.at ?? null, rows }
  }
  const text = readText(dir, 'reload.md')
  if (text === null) return null
  const t = markdownTables(text).find((x) => column(x, /during reload/) >= 0)
  if (!t) return null
  const col = (re) => column(t, re)
  const slash = (s) => (s ?? '').split('/').map((x) => num(x))
  const rows = t.rows.map((r) => {
    const [s50, s99] = slash(r[col(/steady/)])
    const [d50, d99] = slash(r[col(/during reload p50/)])
    const failedCell = r[col(/failed/)] ?? ''
    return {
      front: r[0],
      warmup: null,
      steady: { p50: s50, p99: s99 },
      during: { p50: d50, p99: d99 },
      failed: num(failedCell),
      requests: num(/of\s+(\d+)/.exec(failedCell)?.[1]),
      reloadS: num(r[col(/reload time/)]),
      replaced: r[col(/replaced/)] ?? null
    }
  })
  return { source: 'reload.md', about: t.heading, madeBy: madeBy(text), rows }
}

// bench/matrix.js: closed-loop cells (each with its runs), open-loop kill and reload runs, and
// the runs with a hung or stopped worker. Results of its first format (one run per cell, rows of
// keep-alive runs) come out in the same shape, marked `legacy`.
function matrix (dir) {
  const data = readJson(dir, 'matrix.json')
  if (!data) return null
  if (Array.isArray(data.closed)) return { ...data, source: data.source, file: 'matrix.json' }
  if (!Array.isArray(data.rows)) return null
  const closed = data.rows.filter((x) => ['normal', 'reload', 'kill'].includes(x.scenario))
    .map((x) => ({ view: 'keep-alive', scenario: x.scenario, connections: x.connections, front: x.front, runs: [x] }))
  const stuck = data.rows.filter((x) => ['loop', 'stop'].includes(x.scenario)).map((x) => ({ view: 'keep-alive', ...x }))
  return { ...data, views: ['keep-alive'], closed, open: [], stuck, legacy: true, file: 'matrix.json' }
}

// bench/fleet.js: latency against the ideal per edge and ρ, each cell with its runs, the split
// edges a model (`model: true`). Its first format (rows pooled over rounds) comes out in the
// same shape, marked `legacy`.
function fleet (dir) {
  const data = readJson(dir, 'fleet.json')
  if (!data) return null
  if (Array.isArray(data.cells)) return data
  if (!Array.isArray(data.rows)) return null
  return { ...data, config: data.args, legacy: true, cells: data.rows.map((x) => ({ rho: x.rho, edge: x.edge, model: /^split/.test(x.edge), runs: [x] })) }
}

// bench/overload.js: goodput per offered load and front, each cell with its runs. Its first
// format (one run per cell, rows) comes out in the same shape, marked `legacy`.
function overload (dir) {
  const data = readJson(dir, 'overload.json')
  if (!data) return null
  if (Array.isArray(data.cells)) return data
  if (!Array.isArray(data.rows)) return null
  return { ...data, config: data.args, legacy: true, cells: data.rows.map((x) => ({ load: x.load, front: x.front, runs: [x] })) }
}

// Parts that write JSON themselves.
const json = (file) => (dir) => {
  const data = readJson(dir, file)
  return data ? { ...data, source: file } : null
}

module.exports = {
  balancer,
  haproxyKill,
  reload,
  overload,
  fleet,
  matrix,
  slowClients: json('slow-clients.json'),
  bodyBudget: json('body-budget.json'),
  killTimeline: json('kill-timeline.json'),
  overhead: json('overhead.json'),
  run: json('run.json'),
  markdownTables
}
