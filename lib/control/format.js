'use strict'

// What `pool status|reload|scale|stop` print. Pure functions of the pool's answers, so the
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
  { title: 'REQUEST', right: true, value: (w) => (w.request ? formatDuration(w.request.age) : '-') } // age of the running one
]

function table (rows) {
  const cells = rows.map((w) => COLUMNS.map((c) => String(c.value(w))))
  const widths = COLUMNS.map((c, i) => Math.max(c.title.length, ...cells.map((r) => r[i].length)))
  const line = (values) => values.map((v, i) => (COLUMNS[i].right ? v.padStart(widths[i]) : v.padEnd(widths[i]))).join('  ').trimEnd()
  return [line(COLUMNS.map((c) => c.title)), ...cells.map(line)].join('\n')
}

// "embedded http://127.0.0.1:9001", "haproxy backend app via /run/haproxy.sock", "none".
function describeFront (front) {
  if (Array.isArray(front)) return front.map(describeFront).join('; ')
  if (!front || typeof front !== 'object') return 'none'
  const parts = [front.type || 'unknown']
  if (front.url) parts.push(front.url)
  if (front.backend) parts.push(`backend ${front.backend}`)
  if (front.socket) parts.push(`via ${front.socket}`)
  if (front.reachable === false) parts.push(`(unreachable${front.lastError ? `: ${front.lastError.message || front.lastError}` : ''})`)
  return parts.join(' ')
}

function formatStatus (status) {
  const workers = status.workers || []
  const ready = workers.filter((w) => w.state === 'ready' || w.state === 'busy').length
  const lines = [
    `pool pid ${status.pid}, ${status.phase}, ${ready}/${status.target} workers ready, app ${status.app}`,
    '',
    table(workers),
    '',
    `queue: ${status.queue ?? 0}`,
    `front: ${describeFront(status.front)}`
  ]
  if (status.reload) {
    const r = status.reload
    lines.push(`reload: ${r.stage}, ${r.replaced} replaced, ${r.pending} pending` + (r.active?.length ? `, replacing slot ${r.active.join(', ')}` : ''))
  }
  return lines.join('\n') + '\n'
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

function formatStop ({ clean }) {
  return clean ? 'stopped (clean)\n' : 'stopped (not clean: some workers had to be signalled)\n'
}

module.exports = { formatDuration, formatStatus, statusJson, formatReload, formatScale, formatStop, describeFront }
