'use strict'

// The charts of the report, as Vega-Lite specs built from each part's results. Every builder
// returns a spec (rendered by vega.js) or null when it has nothing to draw. Axis titles carry
// their units; every series is named as in style.js, with the same colour in every chart.

const { label, colorScale, chart } = require('./style')
const { bootstrap } = require('../lib/stats')

// A legend beside the plot, one entry per line: for line charts that are not too wide already.
const RIGHT = { orient: 'right', direction: 'vertical', columns: 1 }
const fronts = (rows, key = 'front') => [...new Set(rows.map((r) => r[key]))]
const finite = (x) => typeof x === 'number' && Number.isFinite(x)

// p50 and p99 as a multiple of the ideal's, against the load: one panel per percentile; each
// point the median of the runs with its 95% interval, the series set a little apart on the x
// axis so that none hides another. cells: [{ rho, [key], runs }]; ratio(cell, p) → interval.
function ratioVsLoad (cells, ratio, { key = 'front', title, subtitle }) {
  const keys = fronts(cells, key)
  const order = colorScale(keys).domain
  const rhos = [...new Set(cells.map((c) => c.rho))].sort((a, b) => a - b)
  const step = rhos.length > 1 ? Math.min(...rhos.slice(1).map((r, i) => r - rhos[i])) : 0.2
  const values = []
  for (const c of cells) {
    for (const p of [50, 99]) {
      const iv = ratio(c, p)
      if (!iv || !finite(iv.value)) continue
      const series = label(c[key])
      const shift = (order.indexOf(series) - (order.length - 1) / 2) * step * 0.06
      values.push({ rho: c.rho, x: c.rho + shift, series, panel: `p${p} ÷ ideal p${p}`, ratio: iv.value, lo: iv.lo, hi: iv.hi, flag: Boolean(iv.allRejected) })
    }
  }
  if (!values.length) return null
  subtitle = withFaint(subtitle, values)
  const color = { field: 'series', type: 'nominal', title: null, scale: colorScale(keys) }
  const x = { field: 'x', type: 'quantitative', title: 'load ρ (share of the workers busy)', scale: { domain: [Math.min(0.5, rhos[0] - 0.05), Math.max(0.95, rhos[rhos.length - 1] + 0.05)] }, axis: { values: rhos, format: '.2f' } }
  return chart(title, subtitle, {
    data: { values },
    facet: { column: { field: 'panel', type: 'nominal', title: null, sort: ['p50 ÷ ideal p50', 'p99 ÷ ideal p99'] } },
    spec: {
      width: 260,
      height: 220,
      layer: [
        { mark: { type: 'rule', strokeDash: [4, 3], color: '#222222' }, encoding: { y: { datum: 1 } } },
        { mark: { type: 'line', strokeWidth: 1.2, opacity: 0.7 }, encoding: { x, y: { field: 'ratio', type: 'quantitative' }, color } },
        { mark: { type: 'rule', strokeWidth: 1.5 }, encoding: { x, y: { field: 'lo', type: 'quantitative' }, y2: { field: 'hi' }, color, opacity: FAINT } },
        {
          mark: { type: 'point', filled: true, size: 45 },
          encoding: {
            x,
            opacity: FAINT,
            y: { field: 'ratio', type: 'quantitative', title: 'latency ÷ ideal (×; 1 = ideal)', scale: { zero: false, nice: true }, axis: { format: '.3~g' } },
            color,
            shape: { field: 'series', type: 'nominal', title: null, scale: { domain: order, range: ['circle', 'square', 'triangle-up', 'diamond', 'cross', 'triangle-down'] } }
          }
        }
      ]
    },
    resolve: { scale: { y: 'shared' } }
  })
}

// Share of requests slower than x, per front, from sorted latency samples (log-log: the body and
// the tail both show). samples: { name: [ms...] }.
function latencyTail (samples, { title, subtitle }) {
  const values = []
  for (const [name, list] of Object.entries(samples)) {
    const sorted = Float64Array.from(list).sort()
    if (sorted.length < 10) continue
    const n = sorted.length
    for (let k = 0; k <= 200; k++) {
      const slower = Math.pow(10, -3 * k / 200) // 1 down to 0.001
      const i = Math.min(n - 1, Math.max(0, Math.floor((1 - slower) * n)))
      values.push({ series: label(name), ms: Math.max(0.1, sorted[i]), slower })
    }
  }
  if (!values.length) return null
  return chart(title, subtitle, {
    data: { values },
    width: 520,
    height: 300,
    mark: { type: 'line', interpolate: 'step-after' },
    encoding: {
      x: { field: 'ms', type: 'quantitative', title: 'latency (ms, log scale)', scale: { type: 'log' } },
      y: { field: 'slower', type: 'quantitative', title: 'share of requests slower (log scale)', scale: { type: 'log', domain: [0.001, 1] }, axis: { format: '~%' } },
      color: { field: 'series', type: 'nominal', title: null, scale: colorScale(Object.keys(samples)) }
    }
  })
}

// Horizontal bars with their 95% interval and their value written at the end. values:
// [{ series, value, lo, hi, group? }].
function bars (values, { title, subtitle, x, format = ',.0f', offsetField, offsetTitle, keys, width = 440 }) {
  const encoding = {
    y: { field: 'series', type: 'nominal', title: null, sort: keys.map(label), axis: { labelLimit: 400 } },
    x: { field: 'value', type: 'quantitative', title: x, axis: { format } }
  }
  const colored = offsetField
    ? { ...encoding, yOffset: { field: offsetField, type: 'nominal' }, color: { field: offsetField, type: 'nominal', title: offsetTitle, scale: { range: ['#4c78a8', '#a0c4e8'] } } }
    : { ...encoding, color: { field: 'series', type: 'nominal', legend: null, scale: colorScale(keys) } }
  const at = (field) => ({ ...colored, x: { field, type: 'quantitative' } })
  return chart(title, subtitle, {
    data: { values },
    width,
    height: { step: offsetField ? 16 : 26 },
    layer: [
      { mark: { type: 'bar' }, encoding: colored },
      { mark: { type: 'rule', color: '#222222' }, encoding: { ...at('lo'), x2: { field: 'hi' }, color: { value: '#222222' } } },
      { mark: { type: 'text', align: 'left', dx: 4, fontSize: 11 }, encoding: { ...at('hi'), color: { value: '#333333' }, text: { field: 'value', type: 'quantitative', format } } }
    ]
  })
}

// The front overhead: time per 0 ms request, new connection and kept alive. stat(row, f) → interval.
function overheadLatency (rows, stat) {
  if (!rows?.length) return null
  const values = rows.flatMap((r) => [
    dot(stat(r, (y) => y.newConnection.p50), { series: label(r.front), how: 'new connection per request' }),
    dot(stat(r, (y) => y.keepAlive.p50), { series: label(r.front), how: 'one kept-alive connection' })
  ]).filter(Boolean)
  return bars(values, {
    title: 'Time per request with a 0 ms handler',
    subtitle: 'median of sequential requests, one at a time (median of the rounds, 95% interval); the gap to direct is what the front adds',
    x: 'ms per request (median)',
    format: '.2f',
    offsetField: 'how',
    offsetTitle: null,
    keys: rows.map((r) => r.front)
  })
}

function overheadPeak (rows, peak) {
  if (!rows?.length) return null
  const values = rows.map((r) => dot(peak(r), { series: label(r.front) })).filter(Boolean)
  return bars(values, {
    title: 'Peak requests per second with a 0 ms handler',
    subtitle: 'autocannon, keep-alive; load generator, front and workers share the same 2 cores (median of the rounds, 95% interval)',
    x: 'requests per second',
    keys: rows.map((r) => r.front)
  })
}

// bench/costs.js: CPU time per request of each front's own processes (all of them together) at
// each load.
function costsCpu (data, stat) {
  const keys = [...new Set(data.requests.map((c) => c.front))]
  const values = data.requests.map((c) => dot(stat(c, 'frontUsPerRequest'), { x: data.loads.find((l) => l.key === c.load)?.label ?? c.load, series: label(c.front) })).filter(Boolean)
  return intervalDots(values, {
    title: 'CPU time per request of the front\'s own processes',
    subtitle: `0 ms handler, ${data.config.workers} workers; the minimal balancer is the floor; median of the runs with its 95% interval`,
    x: null,
    y: 'CPU µs per request',
    keys,
    xSort: data.loads.map((l) => l.label),
    width: 520,
    yFormat: ',.0f'
  })
}

const SCENARIO_TITLE = { normal: 'normal', reload: 'rolling reloads', kill: 'SIGKILLs, 1/s', loop: 'endless requests', stop: 'SIGSTOP 1 worker' }
const VIEW_TITLE = { ab: 'ab: new connections', 'keep-alive': 'keep-alive clients' }

// Medians with their 95% interval, one dot and one rule per series, side by side within each x
// (so that no series hides another), in panels of rows × columns. values: [{ x, series, value,
// lo, hi, row?, col?, hollow? }]; `hollow` draws the dot open (a second statistic, e.g. p50).
function intervalDots (values, { title, subtitle, x, y, keys, rowSort, colSort, xSort, yScale = {}, yFormat = '~s', width = 150, height = 170 }) {
  if (!values.length) return null
  const enc = {
    x: { field: 'x', type: 'ordinal', title: x, sort: xSort, axis: { labelAngle: 0 } },
    xOffset: { field: 'series', type: 'nominal', sort: colorScale(keys).domain, scale: { paddingOuter: 0.3 } },
    color: { field: 'series', type: 'nominal', title: null, scale: colorScale(keys) }
  }
  const facet = {}
  if (values.some((v) => v.row !== undefined)) facet.row = { field: 'row', type: 'nominal', title: null, sort: rowSort }
  if (values.some((v) => v.col !== undefined)) facet.column = { field: 'col', type: 'nominal', title: null, sort: colSort }
  const layer = [
    { mark: { type: 'rule', strokeWidth: 1.5 }, encoding: { ...enc, opacity: FAINT, y: { field: 'lo', type: 'quantitative', title: y, scale: yScale, axis: { format: yFormat } }, y2: { field: 'hi' } } },
    { mark: { type: 'point', size: 40, filled: true }, transform: [{ filter: '!datum.hollow' }], encoding: { ...enc, opacity: FAINT, y: { field: 'value', type: 'quantitative' } } },
    { mark: { type: 'point', size: 36, filled: false, strokeWidth: 1.5 }, transform: [{ filter: 'datum.hollow' }], encoding: { ...enc, opacity: FAINT, y: { field: 'value', type: 'quantitative' } } }
  ]
  const spec = { width, height, layer }
  return chart(title, withFaint(subtitle, values), Object.keys(facet).length ? { data: { values }, facet, spec, resolve: { scale: { y: 'shared' } } } : { data: { values }, ...spec })
}

// A cell's statistic over its runs as { value, lo, hi } (the report computes it).
// `flag`: every run of the cell went over the send-lag limit (drawn faint).
const dot = (iv, extra) => (iv && finite(iv.value) ? { value: iv.value, lo: iv.lo, hi: iv.hi, flag: Boolean(iv.allRejected), ...extra } : null)
const FAINT = { condition: { test: 'datum.flag', value: 0.25 }, value: 1 }
// A subtitle's note when some points are faint.
const withFaint = (subtitle, values) => (values.some((v) => v.flag) ? [subtitle, 'faint: every run over the send-lag limit (the load generator fell behind its schedule)'] : subtitle)

// The matrix: p99 (filled) and p50 (open) per situation (columns) and view (rows), against
// the number of clients. `stat(cell, key)` gives a cell's interval.
function matrixLatency (data, stat) {
  const values = data.closed.flatMap((c) => ['p99', 'p50'].map((p) => dot(stat(c, p), { x: c.connections, series: label(c.front), row: VIEW_TITLE[c.view], col: SCENARIO_TITLE[c.scenario], hollow: p === 'p50' }))).filter(Boolean)
  const runs = Math.max(...data.closed.map((c) => c.runs.length))
  return intervalDots(values, {
    title: 'Latency in the matrix: p99 (filled) and p50 (open)',
    subtitle: `median of ${runs > 1 ? `up to ${runs} runs per cell, with its bootstrap 95% interval` : 'one run per cell (no interval)'}; ${data.config.workers} workers, lognormal renders (median ${data.config.median} ms); closed loop`,
    x: 'clients',
    y: 'latency (ms, log scale)',
    keys: fronts(data.closed),
    rowSort: data.views.map((v) => VIEW_TITLE[v]),
    colSort: Object.values(SCENARIO_TITLE),
    yScale: { type: 'log' }
  })
}

function matrixThroughput (data, stat) {
  const values = data.closed.map((c) => dot(stat(c, 'rps'), { x: c.connections, series: label(c.front), row: VIEW_TITLE[c.view], col: SCENARIO_TITLE[c.scenario] })).filter(Boolean)
  return intervalDots(values, {
    title: 'Answered requests per second in the matrix',
    subtitle: 'median of the runs with its bootstrap 95% interval; 15 workers can answer about 360/s',
    x: 'clients',
    y: 'answered req/s',
    keys: fronts(data.closed),
    rowSort: data.views.map((v) => VIEW_TITLE[v]),
    colSort: Object.values(SCENARIO_TITLE),
    yScale: { zero: true },
    yFormat: ',.0f'
  })
}

// Failed requests of all the runs of a cell, with how many were sent, written on each bar.
function matrixFailures (data) {
  const values = data.closed.filter((c) => c.scenario !== 'normal' || c.runs.some((r) => r.failed > 0)).map((c) => {
    const failed = c.runs.reduce((a, r) => a + r.failed, 0)
    const requests = c.runs.reduce((a, r) => a + r.requests, 0)
    return { c: String(c.connections), series: label(c.front), row: VIEW_TITLE[c.view], col: SCENARIO_TITLE[c.scenario], failed, text: `${failed}`, requests }
  })
  if (!values.length) return null
  const keys = fronts(data.closed)
  const enc = {
    x: { field: 'c', type: 'ordinal', title: 'clients', sort: data.config.connections.map(String), axis: { labelAngle: 0 } },
    xOffset: { field: 'series', type: 'nominal', sort: colorScale(keys).domain },
    y: { field: 'failed', type: 'quantitative', title: 'failed requests (symlog)', scale: { type: 'symlog', domainMax: Math.max(2, ...values.map((v) => v.failed)) * 2 } }
  }
  return chart('Failed requests in the matrix', `all runs of a cell together; a failure is a 5xx, a connection closed without an answer, or no answer within ${data.config.clientTimeout} s`, {
    data: { values },
    facet: { row: { field: 'row', type: 'nominal', title: null, sort: data.views.map((v) => VIEW_TITLE[v]) }, column: { field: 'col', type: 'nominal', title: null, sort: Object.values(SCENARIO_TITLE) } },
    spec: {
      width: 170,
      height: 150,
      layer: [
        { mark: 'bar', encoding: { ...enc, color: { field: 'series', type: 'nominal', title: null, scale: colorScale(keys) } } },
        { mark: { type: 'text', dy: -6, fontSize: 9 }, encoding: { ...enc, text: { field: 'text', type: 'nominal' } } }
      ]
    }
  })
}

const OPEN_TITLE = { kill: 'kills', reload: 'reloads' }

// Open loop: failed requests per 1,000 offered while workers are killed or reloaded, and the
// share answered beside it.
function matrixOpen (data, stat) {
  const values = data.open.flatMap((c) => [
    dot(stat(c, (r) => 1000 * r.failed / r.offered), { x: OPEN_TITLE[c.scenario], series: label(c.front), col: 'failed per 1,000 offered' }),
    dot(stat(c, (r) => 100 * r.ok / r.offered), { x: OPEN_TITLE[c.scenario], series: label(c.front), col: 'answered (% of offered)' })
  ]).filter(Boolean)
  if (!values.length) return null
  return chart('Open loop: what a kill or a reload costs per request offered', withFaint(`Poisson arrivals at ρ ${data.open[0].rho} (a new connection each, sent on schedule); median of the runs with its 95% interval`, values), {
    data: { values },
    facet: { column: { field: 'col', type: 'nominal', title: null, sort: ['failed per 1,000 offered', 'answered (% of offered)'] } },
    spec: {
      width: 220,
      height: 180,
      layer: [
        { mark: { type: 'rule', strokeWidth: 1.5 }, encoding: { x: { field: 'x', type: 'ordinal', title: null, axis: { labelAngle: 0 } }, xOffset: { field: 'series', type: 'nominal', sort: colorScale(fronts(data.open)).domain }, y: { field: 'lo', type: 'quantitative', title: null }, y2: { field: 'hi' }, opacity: FAINT, color: { field: 'series', type: 'nominal', title: null, scale: colorScale(fronts(data.open)) } } },
        { mark: { type: 'point', filled: true, size: 45 }, encoding: { x: { field: 'x', type: 'ordinal' }, xOffset: { field: 'series', type: 'nominal', sort: colorScale(fronts(data.open)).domain }, y: { field: 'value', type: 'quantitative' }, opacity: FAINT, color: { field: 'series', type: 'nominal', title: null, scale: colorScale(fronts(data.open)) } } }
      ]
    },
    resolve: { scale: { y: 'independent' } }
  })
}

// Requests that never return: how long until each one's client got an answer (or gave up:
// then the time is only a lower bound, drawn as an open mark).
function matrixHangs (data) {
  const rows = data.stuck.filter((r) => r.hangs?.length)
  const values = rows.flatMap((r) => r.hangs.map((h, i) => ({
    series: label(r.front),
    i,
    row: VIEW_TITLE[r.view] ?? r.view,
    s: h.ms / 1000,
    outcome: h.outcome === 'no answer' ? 'no answer: client gave up (at least this long)' : `ended: ${/^\d+$/.test(h.outcome) ? `status ${h.outcome}` : `connection ${h.outcome}`}`
  })))
  if (!values.length) return null
  const keys = fronts(rows)
  const timeout = data.config.timeout / 1000
  return chart('Endless requests: time until each one ended', `one mark per request; dashed: the pool's --timeout, ${timeout} s; a front that never ends one leaves it to the client's patience`, {
    data: { values },
    facet: { row: { field: 'row', type: 'nominal', title: null, sort: (data.views ?? []).map((v) => VIEW_TITLE[v]) } },
    spec: {
      width: 480,
      height: { step: 14 * Math.max(2, ...rows.map((r) => r.hangs.length)) },
      layer: [
        { mark: { type: 'rule', strokeDash: [4, 3], color: '#888888' }, encoding: { x: { datum: timeout } } },
        {
          mark: { type: 'point', size: 90, opacity: 0.85, strokeWidth: 2 },
          encoding: {
            y: { field: 'series', type: 'nominal', title: null, sort: keys.map(label) },
            x: { field: 's', type: 'quantitative', title: 'seconds from sending the request to its end', scale: { domainMin: 0 } },
            stroke: { field: 'series', type: 'nominal', legend: null, scale: colorScale(keys) },
            shape: { field: 'outcome', type: 'nominal', title: null, legend: { orient: 'bottom', columns: 1, labelLimit: 600 } },
            // Requests that ended alike would land on one another: each its own line.
            yOffset: { field: 'i', type: 'ordinal' },
            fill: { condition: { test: "indexof(datum.outcome, 'no answer') === 0", value: 'transparent' }, field: 'series', type: 'nominal', scale: colorScale(keys), legend: null }
          }
        }
      ]
    }
  })
}

// Answered and failed requests per second over time, kills marked: one row per configuration
// (so that no line hides another), answered and failed side by side on one symlog axis.
function killTimeline (data) {
  if (!data?.rows?.length) return null
  const perS = 1000 / data.binMs
  const values = data.rows.flatMap((r) => r.bins.flatMap((b) => [
    { series: label(r.config), t: b.t, rate: b.ok * perS, what: 'answered' },
    { series: label(r.config), t: b.t, rate: b.failed * perS, what: 'failed' }
  ]))
  const kills = data.rows[0].kills.map((t) => ({ t }))
  const max = Math.max(1, ...values.map((v) => v.rate))
  const ticks = [0, 10, 100, 1000, 10000].filter((t) => t <= max * 1.5)
  return chart('Kill timeline: a worker SIGKILLed every second', [`${data.workers} workers, ${data.clients} closed-loop keep-alive clients, ${data.renderMs} ms renders; rates over ${data.binMs} ms bins`, 'one run per configuration (the counts over several runs are in the next section)'], {
    data: { values },
    facet: { row: { field: 'series', type: 'nominal', title: null, sort: data.rows.map((r) => label(r.config)), header: { labelAngle: 0, labelAlign: 'left', labelAnchor: 'start', labelOrient: 'top', labelFontSize: 12 } } },
    spec: {
      width: 560,
      height: 80,
      layer: [
        { data: { values: kills }, mark: { type: 'rule', color: '#bbbbbb', strokeDash: [3, 3] }, encoding: { x: { field: 't', type: 'quantitative' } } },
        {
          mark: { type: 'line', interpolate: 'step-after', strokeWidth: 1.6 },
          encoding: {
            x: { field: 't', type: 'quantitative', title: 'time (s); dashed lines: a worker SIGKILLed', axis: { format: 'd', tickMinStep: 1 } },
            y: { field: 'rate', type: 'quantitative', title: 'req/s (symlog)', scale: { type: 'symlog', domain: [0, max * 1.5] }, axis: { values: ticks } },
            color: { field: 'what', type: 'nominal', title: null, sort: ['answered', 'failed'], scale: { domain: ['answered', 'failed'], range: ['#1f77b4', '#d62728'] } }
          }
        }
      ]
    },
    spacing: 6
  })
}

// bench/soak.js: ready workers and failed requests per second over the soak, the code before
// a change (its `baseline`) above the code measured, with the kills and the reloads asked.
function soak (data) {
  const runs = [data.baseline && { name: `before (${data.baseline.source?.commit ?? 'baseline'})`, run: data.baseline.run }, { name: data.baseline ? `after (${data.source?.commit ?? 'this run'})` : 'this run', run: data.run }].filter((x) => x?.run?.bins?.length)
  if (!runs.length) return null
  const values = runs.flatMap(({ name, run }) => run.bins.flatMap((b) => [
    b.readyMean === null ? null : { series: name, t: b.t, value: b.readyMean, panel: 'ready workers (mean per second)' },
    { series: name, t: b.t, value: b.failed / (data.binS ?? 1), panel: 'failed requests per second' }
  ]).filter(Boolean))
  const reloads = runs.flatMap(({ name, run }) => (run.reloads?.each ?? []).filter((r) => r.askedS !== undefined).map((r) => ({ series: name, t: r.askedS })))
  const target = runs[0].run.capacity?.target
  const order = runs.map((x) => x.name)
  const panel = (name, y) => ({
    transform: [{ filter: `datum.panel === '${name}'` }],
    width: 620,
    height: 110,
    layer: [
      { data: { values: reloads }, mark: { type: 'rule', color: '#999999', strokeDash: [3, 3] }, encoding: { x: { field: 't', type: 'quantitative' }, opacity: { value: 0.8 } } },
      ...(name.startsWith('ready') && target ? [{ mark: { type: 'rule', color: '#2ca02c' }, encoding: { y: { datum: target } } }] : []),
      {
        mark: { type: 'line', interpolate: 'step-after', strokeWidth: 1.4 },
        encoding: {
          x: { field: 't', type: 'quantitative', title: 'time (s); dashed lines: a reload asked' },
          y: { field: 'value', type: 'quantitative', title: name, ...y },
          color: { field: 'series', type: 'nominal', title: null, sort: order, scale: { domain: order, range: ['#d62728', '#1f77b4'].slice(-order.length) } }
        }
      }
    ]
  })
  const c = data.config ?? {}
  return chart('Soak: a worker SIGKILLed from outside every few seconds, a reload every half minute', `${target ?? '?'} workers at ρ ${c.rho ?? '?'}, a kill every ${c['kill-every'] ?? '?'} s, a reload asked every ${c['reload-every'] ?? '?'} s; green: the target`, {
    data: { values },
    vconcat: [panel('ready workers (mean per second)', { scale: { domain: [0, (target ?? 4) + 0.5] } }), panel('failed requests per second', { scale: { type: 'symlog' } })]
  })
}

// bench/haproxy-kill.js: failed requests per kill beside answered requests per second, per
// configuration; each the median of the runs with its 95% interval. stat(config, f) → interval.
function haproxyKill (data, stat) {
  if (!data?.configs?.length) return null
  const POOL = 'the pool sets MAINT on exit'
  const NOBODY = 'nobody drives HAProxy'
  // A run on another HAProxy than the first run's says which.
  const series = (c) => `${c.id}: ${c.checks}${c.haproxy && c.haproxy !== data.configs[0].haproxy ? `, ${c.haproxy}` : ''}`
  const values = data.configs.flatMap((c) => [
    dot(stat(c, (x) => (x.kills ? x.failed / x.kills : NaN)), { series: series(c), by: c.maintBy === 'pool' ? POOL : NOBODY, panel: 'failed requests per kill' }),
    dot(stat(c, (x) => x.ok / (x.seconds ?? 10)), { series: series(c), by: c.maintBy === 'pool' ? POOL : NOBODY, panel: 'answered requests per second' })
  ]).filter(Boolean)
  if (!values.length) return null
  const color = { field: 'by', type: 'nominal', title: null, scale: { domain: [POOL, NOBODY], range: ['#1f77b4', '#d62728'] } }
  const runs = Math.max(...data.configs.map((c) => c.runs.length))
  // Failures per kill span 0 to hundreds: a symlog axis, so that 1 and 3 still show.
  const panel = (name, scale, showLabels) => {
    const y = { field: 'series', type: 'nominal', title: showLabels ? 'run: health-check line' : null, sort: null, axis: showLabels ? { labelLimit: 400 } : { labels: false, ticks: false } }
    return {
      title: { text: name, fontSize: 13, anchor: 'middle' },
      width: 230,
      height: { step: 28 },
      transform: [{ filter: `datum.panel === '${name}'` }],
      layer: [
        { mark: { type: 'bar', opacity: 0.85 }, encoding: { y, x: { field: 'value', type: 'quantitative', title: null, scale: scale.scale, axis: scale.axis }, color } },
        { mark: { type: 'rule', color: '#222222' }, encoding: { y, x: { field: 'lo', type: 'quantitative' }, x2: { field: 'hi' } } },
        { mark: { type: 'text', align: 'left', dx: 4, fontSize: 11 }, encoding: { y, x: { field: 'hi', type: 'quantitative' }, text: { field: 'value', type: 'quantitative', format: ',.1f' } } }
      ]
    }
  }
  const maxFailed = Math.max(1, ...values.filter((v) => v.panel === 'failed requests per kill').map((v) => v.hi))
  return chart('A worker SIGKILLed every second behind HAProxy', `${runs > 1 ? `median of ${runs} runs with its 95% interval` : 'one run each'}; failed requests per kill (symlog scale) beside what was answered`, {
    data: { values },
    hconcat: [
      panel('failed requests per kill', { scale: { type: 'symlog', domain: [0, maxFailed * 2.5] }, axis: { values: [0, 1, 3, 10, 30, 100, 300, 1000, 3000].filter((t) => t <= maxFailed * 2.5) } }, true),
      panel('answered requests per second', { scale: { zero: true } }, false)
    ]
  })
}

// bench/reload.js: p50 and p99 steady against during the reload, the median of the runs with
// its 95% interval. stat(config, f) → interval; name(config) → its label.
function reload (data, stat, name) {
  if (!data?.configs?.length) return null
  const values = data.configs.flatMap((c) => ['p50', 'p99'].flatMap((p) => [
    dot(stat(c, (x) => x.steady[p]), { series: name(c), when: 'steady', p: `${p} latency (ms)` }),
    dot(stat(c, (x) => x.during[p]), { series: name(c), when: 'during the reload', p: `${p} latency (ms)` })
  ])).filter(Boolean)
  const runs = Math.max(...data.configs.map((c) => c.runs.length))
  const enc = {
    y: { field: 'series', type: 'nominal', title: null, sort: null, axis: { labelLimit: 400 } },
    yOffset: { field: 'when', type: 'nominal', sort: ['steady', 'during the reload'] }
  }
  return chart('Rolling reload under load', withFaint(`latency while every worker is replaced, against steady state just before, same run; ${runs > 1 ? 'median of the runs with its 95% interval' : 'one run'}`, values), {
    data: { values },
    facet: { column: { field: 'p', type: 'nominal', title: null } },
    spec: {
      width: 260,
      height: { step: 22 },
      layer: [
        { mark: 'bar', encoding: { ...enc, x: { field: 'value', type: 'quantitative', title: 'ms' }, color: { field: 'when', type: 'nominal', title: null, sort: ['steady', 'during the reload'], scale: { range: ['#a0c4e8', '#1f4e8c'] } } } },
        { mark: { type: 'rule', color: '#222222' }, encoding: { ...enc, x: { field: 'lo', type: 'quantitative' }, x2: { field: 'hi' } } },
        { mark: { type: 'text', align: 'left', dx: 3, fontSize: 10 }, encoding: { ...enc, x: { field: 'hi', type: 'quantitative' }, text: { field: 'value', type: 'quantitative', format: '.0f' }, color: { value: '#333333' } } }
      ]
    },
    resolve: { scale: { x: 'independent' } }
  })
}

// Streamed pages: the time to a page's first byte per front, one client at a time and under
// load (p50 and p99 per shape of page). stat(cell, pick) → interval.
function streamingFirstByte (data, stat) {
  if (!data?.single?.length) return null
  const keys = data.fronts
  const values = [
    ...data.single.map((c) => dot(stat(c, (x) => x.first.p50), { x: 'p50', series: label(c.front), col: 'one client at a time' })),
    ...(data.loaded ?? []).flatMap((c) => ['p50', 'p99'].map((p) => dot(stat(c, (x) => x.first[p]), { x: p, series: label(c.front), col: `ρ ${c.rho}, ${c.shape === 'render' ? 'the rest rendered' : 'the rest\'s data awaited'}` })))
  ].filter(Boolean)
  const runs = Math.max(...data.single.map((c) => c.runs.length))
  return intervalDots(values, {
    title: 'Time to the first byte of a streamed page',
    subtitle: `a ${data.page.shellKb} KB shell, the rest ${data.page.lateMs} ms later; median of ${runs} runs with its 95% interval (log scale)`,
    x: null,
    y: 'ms to the first byte of the body (log scale)',
    keys,
    colSort: null,
    yScale: { type: 'log' },
    yFormat: '~s',
    width: 170,
    height: 220
  })
}

// Slow clients: the worker's busy time per front and size, uploads and reads side by side.
function slowClients (data) {
  if (!data?.rows?.length) return null
  const sizeLabel = (kb) => (kb >= 1024 ? `${kb / 1024} MB` : `${kb} KB`)
  const byKey = new Map()
  for (const r of data.rows) {
    if (!finite(r.busyMs)) continue
    const key = `${r.front}|${r.direction}|${r.sizeKb}`
    byKey.set(key, [...(byKey.get(key) || []), r.busyMs])
  }
  const values = [...byKey].map(([key, list]) => {
    const [front, direction, sizeKb] = key.split('|')
    const iv = bootstrap(list)
    return { series: label(front), direction: direction === 'upload' ? `slow uploader (${data.config.rate} KB/s)` : `slow reader (${data.config.rate} KB/s)`, size: sizeLabel(Number(sizeKb)), kb: Number(sizeKb), ms: iv.value, lo: iv.lo, hi: iv.hi }
  })
  const sizes = [...new Set(data.rows.map((r) => r.sizeKb))].sort((a, b) => a - b).map(sizeLabel)
  const keys = data.fronts
  return chart('How long one slow client holds a worker', `render ${data.config.render} ms; the worker's own busy time, from request headers to its last byte handed to the kernel; median of the runs with its 95% interval`, {
    data: { values },
    facet: { column: { field: 'direction', type: 'nominal', title: null, sort: 'descending' } },
    spec: {
      width: 250,
      height: 220,
      encoding: {
        x: { field: 'size', type: 'ordinal', title: 'body size', sort: sizes, axis: { labelAngle: 0 } },
        xOffset: { field: 'series', type: 'nominal', sort: keys.map(label) },
        y: { field: 'ms', type: 'quantitative', title: 'worker busy (ms, log scale)', scale: { type: 'log', domain: [10, Math.max(1000, ...values.map((v) => v.ms)) * 1.5], nice: false } },
        // A log scale has no zero: the bars start at its bottom.
        y2: { datum: 10 }
      },
      layer: [
        { mark: 'bar', encoding: { color: { field: 'series', type: 'nominal', title: null, scale: colorScale(keys), legend: { columns: 4 } } } },
        { mark: { type: 'errorbar', color: '#222222', ticks: { width: 5 } }, encoding: { y: { field: 'lo', type: 'quantitative', title: 'worker busy (ms, log scale)' }, y2: { field: 'hi' } } }
      ]
    }
  })
}

// bench/body-budget.js: each front's peak RSS against the POSTs queued at once, solid; its RSS
// once the burst is over, dashed.
function bodyBudget (data) {
  if (!data?.rows?.length) return null
  const values = []
  for (const r of data.rows) {
    values.push({ series: label(r.front), count: r.count, when: 'peak', mb: r.peakRssMb })
    values.push({ series: label(r.front), count: r.count, when: 'after the burst', mb: r.rssAfterMb })
  }
  const counts = [...new Set(data.rows.map((r) => r.count))].sort((a, b) => a - b)
  return chart('Memory of the front against large POSTs queued at once', `${data.config.mb} MB bodies behind ${data.config.workers} busy workers; RSS of the front's processes (nginx → HAProxy: both), at its peak and ${data.config.settle / 1000} s after the burst`, {
    data: { values },
    width: 460,
    height: 260,
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'count', type: 'quantitative', title: 'POSTs sent at once', axis: { values: counts, format: 'd' } },
      y: { field: 'mb', type: 'quantitative', title: 'RSS (MB)' },
      color: { field: 'series', type: 'nominal', title: null, scale: colorScale(fronts(data.rows)), legend: RIGHT },
      strokeDash: { field: 'when', type: 'nominal', title: null, sort: ['peak', 'after the burst'], scale: { domain: ['peak', 'after the burst'], range: [[1, 0], [4, 3]] }, legend: RIGHT }
    }
  })
}

// Medians with their 95% interval against a quantitative x, one line per series, the series set
// a little apart on x so that none hides another. values: [{ x, series, value, lo, hi, flag }].
function intervalLines (values, { title, subtitle, x, y, keys, yScale = {}, yFormat, ref, width = 460, height = 250 }) {
  if (!values.length) return null
  const order = colorScale(keys).domain
  const xs = [...new Set(values.map((v) => v.x))].sort((a, b) => a - b)
  const step = xs.length > 1 ? Math.min(...xs.slice(1).map((v, i) => v - xs[i])) : 1
  const shifted = values.map((v) => ({ ...v, xo: v.x + (order.indexOf(v.series) - (order.length - 1) / 2) * step * 0.05 }))
  const color = { field: 'series', type: 'nominal', title: null, scale: colorScale(keys), legend: RIGHT }
  const xEnc = { field: 'xo', type: 'quantitative', title: x, axis: { values: xs, format: '.2~f' }, scale: { domain: [xs[0] - step * 0.4, xs[xs.length - 1] + step * 0.4] } }
  const yEnc = { field: 'value', type: 'quantitative', title: y, scale: yScale, ...(yFormat ? { axis: { format: yFormat } } : {}) }
  return chart(title, withFaint(subtitle, values), {
    data: { values: shifted },
    width,
    height,
    layer: [
      ...(ref !== undefined ? [{ mark: { type: 'rule', strokeDash: [4, 3], color: '#888888' }, encoding: { y: { datum: ref } } }] : []),
      { mark: { type: 'line', strokeWidth: 1.2, opacity: 0.7 }, encoding: { x: xEnc, y: yEnc, color } },
      { mark: { type: 'rule', strokeWidth: 1.5 }, encoding: { x: xEnc, y: { field: 'lo', type: 'quantitative' }, y2: { field: 'hi' }, color, opacity: FAINT } },
      { mark: { type: 'point', filled: true, size: 45 }, encoding: { x: xEnc, y: yEnc, color, opacity: FAINT } }
    ]
  })
}

// bench/overload.js: goodput as a share of capacity, and the p99 of what was answered, per load
// and front; `cells`: the open-loop cells (data.cells) or those of the mixed routes.
// stat(cell, key) → interval.
function overloadGoodput (data, stat, { cells = data?.cells, title = 'Goodput under overload', what = '' } = {}) {
  if (!cells?.length) return null
  const values = cells.map((c) => dot(stat(c, 'share'), { x: c.load, series: label(c.front) })).filter(Boolean)
  return intervalLines(values, {
    title,
    subtitle: `${what}answers within the clients' ${data.config?.deadline ?? '?'} ms deadline, per second, as a share of what the workers can render; ${data.legacy ? 'one run per point' : 'median of the runs with its 95% interval'}`,
    x: 'offered load (× capacity)',
    y: 'goodput (of capacity)',
    keys: fronts(cells),
    yScale: { zero: true },
    yFormat: '.0%',
    ref: 1
  })
}

function overloadLatency (data, stat) {
  if (!data?.cells?.length) return null
  const values = data.cells.map((c) => dot(stat(c, 'p99'), { x: c.load, series: label(c.front) })).filter(Boolean)
  return intervalLines(values, {
    title: 'Latency of what was answered under overload',
    subtitle: 'p99 of the requests answered (200), whether in time or not; no point: nothing was answered',
    x: 'offered load (× capacity)',
    y: 'p99 of answered (ms)',
    keys: fronts(data.cells),
    yScale: { zero: true }
  })
}

const RENDER_TITLE = { cpu: 'renders on the CPU', await: 'pages awaiting data' }

// bench/overload.js, closed-loop clients: p99 of the defaults and of FIFO side by side, per
// number of clients, pool size (columns) and kind of render (rows).
function overloadClosed (data, stat) {
  if (!data?.closed?.length) return null
  const values = data.closed.map((c) => dot(stat(c, 'p99'), { x: c.clients, series: label(c.front), row: RENDER_TITLE[c.render] ?? c.render, col: `${c.workers} workers` })).filter(Boolean)
  const runs = Math.max(...data.closed.map((c) => c.runs.length))
  return intervalDots(values, {
    title: 'Closed-loop clients: overload control against a FIFO',
    subtitle: `p99 latency (log scale), each run right after a burst of fast requests; ${runs > 1 ? 'median of the runs with its 95% interval' : 'one run'}`,
    x: 'closed-loop clients',
    y: 'p99 (ms)',
    keys: fronts(data.closed),
    xSort: [...new Set(data.closed.map((c) => c.clients))].sort((a, b) => a - b),
    rowSort: Object.values(RENDER_TITLE),
    yScale: { type: 'log' },
    width: 200
  })
}

module.exports = { costsCpu, intervalDots, intervalLines, dot, ratioVsLoad, latencyTail, overheadLatency, overheadPeak, matrixLatency, matrixThroughput, matrixFailures, matrixOpen, matrixHangs, VIEW_TITLE, killTimeline, soak, haproxyKill, reload, slowClients, streamingFirstByte, bodyBudget, overloadGoodput, overloadLatency, overloadClosed, SCENARIO_TITLE }
