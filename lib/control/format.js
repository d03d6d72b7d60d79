'use strict'

// What `pool status|ls|reload|scale|recycle|stop` print. Pure functions of the pool's answers, so the
// output can be tested without a pool.

const MB = 1024 * 1024

// 340ms, 12.3s, 3m05s, 1h02m, 2d03h: short, and still readable at a glance in a column.
function formatDuration (ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-'
  if (ms < 1000) return `${Math.round(ms)}ms`
  const s = ms / 1000
  if (s < 60) return `${s.toFixed(1)}s`
  const pad = (n) => String(Math.floor(n)).padStart(2, '0')
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`
  if (s < 86400) return `${Math.floor(s / 3600)}h${pad((s % 3600) / 60)}m`
  return `${Math.floor(s / 86400)}d${pad((s % 86400) / 3600)}h`
}

function formatSeconds (ms) {
  return `${(ms / 1000).toFixed(1)} s`
}

function formatMB (bytes) {
  return typeof bytes === 'number' ? (bytes / MB).toFixed(1) : '-'
}

// A process that is not running shows no pid: the last one is history, not something to kill.
const RUNNING = new Set(['booting', 'ready', 'busy', 'draining'])

const COLUMNS = [
  { title: 'SLOT', right: true, value: (w) => w.slot },
  { title: 'PID', right: true, value: (w) => (RUNNING.has(w.state) && w.pid ? w.pid : '-') },
  { title: 'PORT', right: true, value: (w) => w.port },
  { title: 'STATE', value: (w) => w.state },
  { title: 'UPTIME', right: true, value: (w) => (w.readyAt && RUNNING.has(w.state) ? formatDuration(w.uptime) : '-') },
  { title: 'REQUESTS', right: true, value: (w) => w.requests ?? 0 }, // served by this process
  { title: 'TOTAL', right: true, value: (w) => w.totalRequests ?? 0 }, // served in this slot, every process
  { title: 'RESTARTS', right: true, value: (w) => w.restarts ?? 0 },
  { title: 'RSS MB', right: true, value: (w) => formatMB(w.rss) },
  // age of the running one
  { title: 'REQUEST', right: true, value: (w) => (w.request ? formatDuration(w.request.age) : '-') }
]

// `pool status --watch`: what the worker did since the previous answer (see rates()).
const RATE_COLUMNS = [
  { title: 'CPU%', right: true, value: (w, { rates }) => formatRate(rates.get(w.slot)?.cpu) },
  { title: 'REQ/S', right: true, value: (w, { rates }) => formatRate(rates.get(w.slot)?.rps) }
]

function formatRate (x) {
  if (x === undefined || x === null || !Number.isFinite(x)) return '-'
  return x < 10 ? x.toFixed(1) : String(Math.round(x))
}

// WebSockets open at the last check-in: only once a worker had any, the usual table as wide as ever.
const TUNNELS_COLUMN = { title: 'TUNNELS', right: true, value: (w) => w.tunnels ?? 0 }
const hasTunnels = (workers) => workers.some((w) => w.tunnels > 0 || w.tunnelsOpened > 0)

// `fronts`: each front's own columns (its status's `columns`: HAProxy's wanted and seen state of
// each server, say), after the pool's.
function columnsFor (context) {
  const columns = [...COLUMNS]
  if (context.tunnels) columns.push(TUNNELS_COLUMN)
  if (context.rates) columns.splice(columns.findIndex((c) => c.title === 'UPTIME') + 1, 0, ...RATE_COLUMNS)
  for (const front of context.fronts ?? []) {
    for (const c of Array.isArray(front.columns) ? front.columns : []) {
      columns.push({ title: String(c.title), right: Boolean(c.right), value: (w) => c.values?.[w.slot] ?? '-' })
    }
  }
  return columns
}

function table (rows, context = {}) {
  return grid(columnsFor(context), rows, context)
}

// Titles over aligned columns, two spaces apart.
function grid (columns, rows, context = {}) {
  const cells = rows.map((row) => columns.map((c) => String(c.value(row, context))))
  const widths = columns.map((c, i) => Math.max(c.title.length, ...cells.map((r) => r[i].length)))
  const line = (values) => values
    .map((v, i) => (columns[i].right ? v.padStart(widths[i]) : v.padEnd(widths[i])))
    .join('  ').trimEnd()
  return [line(columns.map((c) => c.title)), ...cells.map(line)].join('\n')
}

function readyCount (workers = []) {
  return workers.filter((w) => w.state === 'ready' || w.state === 'busy').length
}

// A pool's status names one front, or a list of them.
function frontsOf (front) {
  return (Array.isArray(front) ? front : [front]).filter((f) => f && typeof f === 'object')
}

// "embedded http://127.0.0.1:9001", "haproxy backend app via /run/haproxy.sock", "none": a
// front's status as it describes itself (FrontStatus).
function describeFront (front) {
  if (Array.isArray(front)) return front.map(describeFront).join('; ')
  if (!front || typeof front !== 'object') return 'none'
  const parts = [front.type || 'unknown', front.url, front.target, front.detail].filter(Boolean)
  if (front.problem) parts.push(`(${front.problem})`)
  return parts.join(' ')
}

// `rates` (pool status --watch): a Map slot → { cpu, rps } from rates() below.
function formatStatus (status, { rates = null } = {}) {
  const workers = status.workers || []
  const ready = readyCount(workers)
  const lines = [
    `pool pid ${status.pid}, ${status.phase}, ${ready}/${status.target} workers ready, app ${status.app}`,
    '',
    table(workers, { rates, tunnels: hasTunnels(workers), fronts: frontsOf(status.front) }),
    '',
    `queue: ${status.queue ?? 0}`,
    `front: ${describeFront(status.front)}`
  ]
  if (status.front?.tunnelsOpened > 0) {
    lines.push(`websockets: ${status.front.tunnels} open, ${status.front.tunnelsOpened} since the front started`)
  }
  if (status.reload) {
    const r = status.reload
    lines.push(`reload: ${r.stage}, ${r.replaced} replaced, ${r.pending} pending` +
      (r.active?.length ? `, replacing slot ${r.active.join(', ')}` : '') +
      (r.queued ? `; another follows (asked ${r.queued} time${r.queued === 1 ? '' : 's'})` : ''))
  }
  return lines.join('\n') + '\n'
}

// Per slot, from two successive status answers ({ at: ms, status }): REQ/S from the `requests`
// counts, CPU% from the CPU time the worker used (`cpu: { user, system }` in microseconds, and
// `at`, when it was measured, if the pool says). Only for the same process in both answers: a
// new pid starts afresh. A value that cannot be known is left out (shown as -).
function rates (previous, current) {
  const out = new Map()
  if (!previous) return out
  const before = new Map((previous.status.workers || []).map((w) => [w.slot, w]))
  const seconds = (current.at - previous.at) / 1000
  for (const w of current.status.workers || []) {
    const p = before.get(w.slot)
    if (!p || !w.pid || p.pid !== w.pid || !RUNNING.has(w.state)) continue
    const r = {}
    if (seconds > 0 && Number.isFinite(w.requests) && Number.isFinite(p.requests)) {
      r.rps = Math.max(0, w.requests - p.requests) / seconds
    }
    r.cpu = cpuPercent(p.cpu, w.cpu, seconds)
    out.set(w.slot, r)
  }
  return out
}

function cpuPercent (before, now, seconds) {
  const used = (c) => (c && Number.isFinite(c.user) && Number.isFinite(c.system) ? c.user + c.system : null)
  const a = used(before)
  const b = used(now)
  if (a === null || b === null) return undefined
  // The measurement's own clock when the pool gives it, else the time between the answers.
  const span = Number.isFinite(now.at) && Number.isFinite(before.at) ? (now.at - before.at) / 1000 : seconds
  if (!(span > 0)) return undefined
  return Math.max(0, b - a) / 1e6 / span * 100
}

// `pool ls`: a line per pool that answered, by front port: what `pool status` heads its table
// with, and the ports. Then the sockets no pool answered on.
const POOL_COLUMNS = [
  { title: 'PID', right: true, value: ({ status }) => status.pid },
  { title: 'STATE', value: ({ status }) => status.phase },
  { title: 'READY', right: true, value: ({ status }) => `${readyCount(status.workers)}/${status.target}` },
  { title: 'FRONT', value: ({ status }) => frontCell(status.front) },
  { title: 'WORKER PORTS', value: ({ status }) => portRange(status.workers) },
  { title: 'STATS', value: ({ status }) => status.stats ?? '-' },
  { title: 'APP', value: ({ status }) => status.app }
]

function formatPools (pools) {
  const live = pools.filter((p) => p.status)
  const lines = live.length > 0 ? [grid(POOL_COLUMNS, live)] : []
  for (const p of pools.filter((x) => !x.status)) {
    lines.push(p.reason === 'refused'
      ? `stale: ${p.control} (no pool answers on it: one was killed; the next pool start on it replaces it)`
      : `not answering: ${p.error}`)
  }
  if (pools.length === 0) {
    lines.push('no pool of yours is running (a pool started with --control elsewhere is not listed: pool status ' +
      '--control PATH asks it)')
  }
  return lines.join('\n') + '\n'
}

// Where its clients reach the front (the embedded balancer's URL), else what it drives
// (HAProxy's backend), else its type.
function frontCell (front) {
  if (Array.isArray(front)) return front.map(frontCell).join(', ') || 'none'
  if (!front || typeof front !== 'object') return 'none'
  if (front.url) return front.url
  return [front.type || 'none', front.target].filter(Boolean).join(' ')
}

// "9002-9005" for slots 1-4 (slot i's port is --worker-port + i − 1).
function portRange (workers = []) {
  const ports = workers.map((w) => w.port).filter(Number.isInteger).sort((a, b) => a - b)
  if (ports.length === 0) return '-'
  return ports.length === 1 ? String(ports[0]) : `${ports[0]}-${ports.at(-1)}`
}

// The documented `--json` shape first, then the rest of what the pool said.
function statusJson (status) {
  const { front, queue, workers, ...rest } = status
  return JSON.stringify({ front, queue, workers, ...rest }, null, 2) + '\n'
}

function formatReload ({ replaced = [], ms = 0 }) {
  const n = replaced.length
  const head = `reloaded ${n} worker${n === 1 ? '' : 's'} in ${formatSeconds(ms)}`
  if (n === 0) return `${head} (no worker was ready to replace)\n`
  return `${head}: ${replaced.map((r) => `slot ${r.slot} pid ${r.oldPid} → ${r.newPid}`).join(', ')}\n`
}

function formatScale ({ from, to }) {
  if (from === to) return `already at ${to} worker${to === 1 ? '' : 's'}\n`
  return `scaled from ${from} to ${to} worker${to === 1 ? '' : 's'}\n`
}

function formatRecycle ({ slot, oldPid, newPid, ms }) {
  return `recycled slot ${slot} in ${formatSeconds(ms)}: pid ${oldPid} → ${newPid}\n`
}

function formatStop ({ clean }) {
  return clean ? 'stopped (clean)\n' : 'stopped (not clean: some workers had to be signalled)\n'
}

module.exports = {
  formatDuration,
  formatStatus,
  formatPools,
  statusJson,
  formatReload,
  formatScale,
  formatRecycle,
  formatStop,
  describeFront,
  rates
}
