'use strict'

// The few figures README.md quotes, made from the same result files as the report, so that the
// README never says what the report does not: `npm run bench` (a full run) rewrites the block
// between the markers below in README.md. Each bullet links to its section of the report.

const fs = require('node:fs')
const load = require('./adapters')
const { interval } = require('../lib/stats')
const { label } = require('./style')

const START = '<!-- bench:measured -->'
const END = '<!-- /bench:measured -->'

const times = (iv) => `${iv.value.toFixed(2)}×`
const pct = (iv) => `${Math.round(iv.value * 100)}%`
const ok = (iv) => iv && Number.isFinite(iv.value)
const list = (items) => (items.length > 1 ? `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}` : items[0] ?? '')

function latency (dir) {
  const data = load.balancer(dir)
  const cells = data?.cells?.filter((c) => c.rho === 0.8) ?? []
  const ratio = (c) => interval(c.runs, (x) => x.p99 / x.ideal99)
  const parts = cells.map((c) => [c, ratio(c)]).filter(([, iv]) => ok(iv)).map(([c, iv]) => `${times(iv)} with ${c.front === 'embedded' ? 'the embedded balancer' : label(c.front)}`)
  return parts.length ? `At 80% load, p99 latency against the ideal central queue's: ${list(parts)} ([latency](docs/benchmarks.md#latency-against-the-ideal-central-queue)).` : null
}

function overload (dir) {
  const data = load.overload(dir)
  const at = (front) => data?.cells?.find((c) => c.load === 1.5 && c.front === front)
  const oc = at('embedded-oc')
  // The FIFO queues: named so since overload control is the default; earlier runs had them as
  // the plain fronts.
  const fifoFronts = data?.cells?.some((c) => c.front === 'embedded-fifo') ? ['haproxy-fifo', 'embedded-fifo'] : ['haproxy', 'embedded']
  const fifo = fifoFronts.map(at).filter(Boolean).map((c) => interval(c.runs, 'share')).filter(ok)
  if (!oc || !fifo.length) return null
  const share = interval(oc.runs, 'share')
  const values = fifo.map((iv) => Math.round(iv.value * 100)).sort((a, b) => a - b)
  const range = values[0] === values[values.length - 1] ? `${values[0]}%` : `${values[0]}–${values[values.length - 1]}%`
  const steady = oc.warmup > (data.config?.warmup ?? 1) ? `, in its steady state (after ${oc.warmup} s),` : ''
  return `At 1.5× capacity${steady} with clients that give up after ${data.config?.deadline ?? 1000} ms, the embedded balancer (overload control, its default) answers ${pct(share)} of capacity in time; a FIFO queue (HAProxy's without a queue cap, or the balancer's with \`--no-overload-control\`) ${range} ([overload](docs/benchmarks.md#overload)).`
}

function overloadClosed (dir) {
  const data = load.overload(dir)
  const on = data?.closed?.filter((c) => c.front === 'embedded-oc') ?? []
  if (!on.length) return null
  const ratios = on.flatMap((c) => {
    const off = data.closed.find((o) => o.front === 'embedded-fifo' && o.workers === c.workers && o.render === c.render && o.clients === c.clients)
    return off ? [interval(c.runs.map((x, i) => ({ v: off.runs[i] ? x.p99 / off.runs[i].p99 : NaN })), 'v').value] : []
  }).filter(Number.isFinite)
  if (!ratios.length) return null
  const shed = on.reduce((n, c) => n + c.runs.reduce((m, x) => m + x.turnedAway, 0), 0)
  const requests = on.reduce((n, c) => n + c.runs.reduce((m, x) => m + x.requests, 0), 0)
  const clients = [...new Set(on.map((c) => c.clients))].sort((a, b) => a - b)
  const workers = [...new Set(on.map((c) => c.workers))].sort((a, b) => a - b)
  return `Closed-loop clients (${list(clients.map(String))}, on ${list(workers.map(String))} workers, renders on the CPU and pages awaiting data, each run right after a burst of fast requests) are no overload: the defaults turned away ${shed.toLocaleString('en-US')} of ${requests.toLocaleString('en-US')} requests, with a p99 at most ${Math.max(...ratios).toFixed(2)}× a FIFO's ([overload](docs/benchmarks.md#closed-loop-clients)).`
}

function failures (dir) {
  const data = load.matrix(dir)
  if (!data?.closed?.length) return null
  const fronts = [...new Set(data.closed.map((c) => c.front))]
  const count = (front) => {
    const cells = data.closed.filter((c) => c.front === front && (c.scenario === 'kill' || c.scenario === 'reload'))
    const failed = cells.reduce((n, c) => n + c.runs.reduce((m, r) => m + r.failed, 0), 0)
    const requests = cells.reduce((n, c) => n + c.runs.reduce((m, r) => m + r.requests, 0), 0)
    return `${front === 'embedded' ? 'the embedded balancer' : label(front)} ${failed.toLocaleString('en-US')} of ${requests.toLocaleString('en-US')}`
  }
  const clients = [...new Set(data.closed.map((c) => c.connections))].sort((a, b) => a - b)
  return `Failed requests through rolling reloads and workers SIGKILLed about once a second, at ${list(clients.map(String))} clients: ${list(fronts.map(count))} ([the matrix](docs/benchmarks.md#the-operators-matrix)).`
}

function summary (dir) {
  return [latency(dir), overload(dir), overloadClosed(dir), failures(dir)].filter(Boolean).map((line) => `- ${line}`).join('\n')
}

// Rewrites the block between the markers in `file`; false when the file has no block.
function writeSummary (dir, file) {
  const text = fs.readFileSync(file, 'utf8')
  const a = text.indexOf(START)
  const b = text.indexOf(END)
  if (a < 0 || b < a) return false
  const body = summary(dir)
  if (!body) return false
  fs.writeFileSync(file, `${text.slice(0, a + START.length)}\n${body}\n${text.slice(b)}`)
  return true
}

module.exports = { summary, writeSummary, START, END }
