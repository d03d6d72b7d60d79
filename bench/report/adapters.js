'use strict'

// What the report reads, part by part, from the results directory: every part writes its
// JSON (bench/lib/part.js). Where a part's format changed, its loader also reads the committed
// results of the earlier format and says so (`legacy: true`), so that a report rebuilt before the
// next full run still shows them, marked. Every loader returns null when its file is missing,
// and never makes a number up: a cell it cannot read is null, and the report says "not available".

const fs = require('node:fs')
const path = require('node:path')

function readJson (dir, file) {
  try { return JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) } catch { return null }
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

// bench/haproxy-kill.js: each configuration with its runs (kills, failed, answered, MAINT
// latencies). Its first format (--json: `results`, one entry per run) reads the same, `legacy`.
function haproxyKill (dir) {
  const json = readJson(dir, 'haproxy-kill.json')
  const list = Array.isArray(json?.runs) ? json.runs : Array.isArray(json?.results) ? json.results : null
  if (!list) return null
  const ids = [...new Set(list.map((x) => x.id))]
  const configs = ids.map((id) => {
    const rs = list.filter((x) => x.id === id).map((x) => ({ ...x, failedByKind: x.failedByKind ?? x.byKind ?? {} }))
    return { id, maintBy: rs[0].drive ? 'pool' : 'nobody', checks: rs[0].checks, haproxy: rs[0].haproxy ?? null, runs: rs }
  })
  const maint = list.flatMap((x) => x.maintMs ?? [])
  return { ...json, legacy: !json.runs, configs, maintMs: maint, command: json.command ?? json.madeBy ?? null }
}

// bench/reload.js: each configuration (front, warm-up) with its runs, each { steady, during:
// { p50, p99, failed, requests }, reloadMs, replaced }. Its first format (rows, each the round
// with the median p99 ratio) comes out in the same shape, marked `legacy`.
function reload (dir) {
  const json = readJson(dir, 'reload.json')
  if (!json) return null
  if (Array.isArray(json.configs)) return json
  if (!Array.isArray(json.rows)) return null
  const configs = json.rows.map((x) => ({
    front: x.name ?? x.front,
    warmupRequests: x.warmupRequests ?? 0,
    runs: [{ steady: x.steady, during: { ...x.inReload, failed: x.failed, requests: x.requests }, reloadMs: x.reloadMs, replaced: Number(String(x.replaced).split('/')[0]), workers: Number(String(x.replaced).split('/')[1]) }]
  }))
  return { legacy: true, config: json.args, configs, command: json.madeBy ?? null }
}

// bench/matrix.js: closed-loop cells (each with its runs), open-loop kill and reload runs, and
// the runs with a hung or stopped worker. Results of its first format (one run per cell, rows of
// keep-alive runs) come out in the same shape, marked `legacy`.
function matrix (dir) {
  const data = readJson(dir, 'matrix.json')
  if (!data) return null
  if (Array.isArray(data.closed)) return { ...data, file: 'matrix.json' }
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
  return data ? { ...data, file } : null
}

module.exports = {
  balancer,
  haproxyKill,
  reload,
  overload,
  fleet,
  matrix,
  slowClients: json('slow-clients.json'),
  nonReaders: json('non-readers.json'),
  streaming: json('streaming.json'),
  streams: json('streams.json'),
  websocket: json('websocket.json'),
  bodyBudget: json('body-budget.json'),
  killTimeline: json('kill-timeline.json'),
  soak: json('soak.json'),
  deathNotice: json('death-notice.json'),
  overhead: json('overhead.json'),
  costs: json('costs.json'),
  concurrency: json('concurrency.json'),
  run: json('run.json')
}
