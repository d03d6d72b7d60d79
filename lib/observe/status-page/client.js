// The status page's script (index.js beside it sends it inline, as `(client)()`). It
// runs in the browser: it may use nothing of the pool's modules.
function client () { // eslint-disable-line no-unused-vars -- sent to the browser as `(client)()` by index.js
  'use strict'
  const REFRESH_MS = 1000
  const FETCH_TIMEOUT_MS = 2500
  const CHART_SPAN_MS = 120000 // the queue chart's width in time
  const KEEP_MS = 150000 // metrics samples kept, for "the last minute" and the chart
  const RATE_SPAN_MS = 5000 // requests/s over about this long
  const MAX_EXITS = 20
  const HISTOGRAMS = [
    { id: 'h-duration', metric: 'pool_request_duration_seconds', title: 'Response time' },
    { id: 'h-wait', metric: 'pool_queue_wait_seconds', title: 'Queue wait' },
    { id: 'h-busy', metric: 'pool_worker_busy_seconds', title: 'Worker held per request' }
  ]
  const SVG = 'http://www.w3.org/2000/svg'
  const $ = (id) => document.getElementById(id)

  const page = {
    status: null,
    series: null,
    receivedAt: 0, // browser clock, when the last good answer came
    clockOffset: 0, // the pool's clock minus the browser's
    samples: [], // { at, queue, inFlight, served, buckets: Map metric → histogram }
    cpu: new Map(), // slot → { pid, used, at, percent }: CPU % between two answers of one process
    failure: null, // { since, message } while the pool does not answer
    paused: false,
    timer: null
  }

  // ── fetching ─────────────────────────────────────────────────────────────────────────────

  async function fetchText (url) {
    const abort = new AbortController()
    const timer = setTimeout(() => abort.abort(), FETCH_TIMEOUT_MS)
    try {
      const res = await fetch(url, { cache: 'no-store', signal: abort.signal })
      const text = await res.text()
      if (!res.ok) throw new Error(`${url}: HTTP ${res.status} ${text.trim().slice(0, 200)}`)
      return { text, date: res.headers.get('date') }
    } catch (err) {
      if (err.name === 'AbortError') throw new Error(`${url}: no answer within ${FETCH_TIMEOUT_MS / 1000} s`)
      if (err.name === 'TypeError') throw new Error(`${url}: no connection (${err.message})`) // refused, reset, DNS
      throw err
    } finally {
      clearTimeout(timer)
    }
  }

  async function refresh () {
    page.timer = null
    const began = Date.now()
    try {
      const [status, metrics] = await Promise.all([fetchText('status'), fetchText('metrics')])
      received(JSON.parse(status.text), parseMetrics(metrics.text), status.date)
    } catch (err) {
      if (!page.failure) page.failure = { since: Date.now(), message: err.message }
      else page.failure.message = err.message
      showFailure()
    }
    schedule(Math.max(0, REFRESH_MS - (Date.now() - began)))
  }

  function schedule (ms) {
    if (page.paused || page.timer !== null) return
    page.timer = setTimeout(refresh, ms)
  }

  function received (status, series, dateHeader) {
    page.receivedAt = Date.now()
    page.clockOffset = poolClock(status, dateHeader) - page.receivedAt
    page.status = status
    page.series = series
    page.failure = null
    remember(status, series)
    measureCpu(status)
    showFailure()
    draw()
  }

  // Each worker's CPU %: the CPU time its process used (`cpu`, microseconds, read by the pool at
  // `cpu.at`) between two answers, in percent of one core. A new process starts afresh.
  function measureCpu (status) {
    for (const w of status.workers || []) {
      const c = w.cpu
      if (!c || !w.pid) { page.cpu.delete(w.slot); continue }
      const used = c.user + c.system
      const before = page.cpu.get(w.slot)
      const percent = before && before.pid === w.pid && c.at > before.at
        ? Math.max(0, used - before.used) / 1000 / (c.at - before.at) * 100
        : null
      page.cpu.set(w.slot, { pid: w.pid, used, at: c.at, percent })
    }
  }

  const cpuPercentOf = (w) => page.cpu.get(w.slot)?.pid === w.pid ? page.cpu.get(w.slot).percent : null

  // The pool's times (readyAt, exits) are on its clock, which may not be this browser's. A
  // worker's snapshot gives it to the millisecond: readyAt + uptime is the moment of the
  // snapshot. Without a ready worker, the Date header, to the second.
  function poolClock (status, dateHeader) {
    const w = (status.workers || []).find((w) => w.readyAt)
    if (w) return w.readyAt + w.uptime
    const date = Date.parse(dateHeader)
    return Number.isFinite(date) ? date : Date.now()
  }

  const poolNow = () => Date.now() + page.clockOffset

  // ── the Prometheus text format ───────────────────────────────────────────────────────────

  function parseMetrics (text) {
    const series = new Map() // name → [{ labels, value }]
    for (const line of text.split('\n')) {
      if (line === '' || line[0] === '#') continue
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line)
      if (!m) continue
      const labels = {}
      for (const l of (m[2] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => c === 'n' ? '\n' : c)
      }
      if (!series.has(m[1])) series.set(m[1], [])
      series.get(m[1]).push({ labels, value: numberOf(m[3]) })
    }
    return series
  }

  function numberOf (text) {
    if (text === '+Inf') return Infinity
    if (text === '-Inf') return -Infinity
    return Number(text)
  }

  const total = (series, name) => (series.get(name) || []).reduce((sum, s) => sum + s.value, 0)

  // One histogram, its label sets (the response codes) added up: upper bounds ascending and
  // the cumulative count at each. Null when the pool has no such series.
  function histogram (series, metric) {
    const buckets = new Map()
    for (const { labels, value } of series.get(metric + '_bucket') || []) {
      const le = numberOf(labels.le)
      buckets.set(le, (buckets.get(le) || 0) + value)
    }
    if (buckets.size === 0) return null
    const les = [...buckets.keys()].sort((a, b) => a - b)
    return {
      les,
      cumulative: les.map((le) => buckets.get(le)),
      count: total(series, metric + '_count'),
      sum: total(series, metric + '_sum')
    }
  }

  // What was added between `earlier` and `later` (same buckets), for "the last minute".
  function difference (later, earlier) {
    if (!earlier || earlier.les.join() !== later.les.join()) return later
    return {
      les: later.les,
      cumulative: later.cumulative.map((c, i) => c - earlier.cumulative[i]),
      count: later.count - earlier.count,
      sum: later.sum - earlier.sum
    }
  }

  // The q-quantile as Prometheus's histogram_quantile() estimates it: linear within its bucket.
  // { value } or, when it falls in the last (+Inf) bucket, { above } the last finite bound.
  function quantile (h, q) {
    if (h.count <= 0) return null
    const rank = q * h.count
    let lower = 0
    let below = 0
    for (let i = 0; i < h.les.length; i++) {
      const le = h.les[i]
      const cum = h.cumulative[i]
      if (cum >= rank) {
        if (le === Infinity) return { above: lower }
        return { value: lower + (le - lower) * (cum > below ? (rank - below) / (cum - below) : 0) }
      }
      lower = le
      below = cum
    }
    return { above: lower }
  }

  // ── history ──────────────────────────────────────────────────────────────────────────────

  function remember (status, series) {
    const at = Date.now()
    const fronts = frontsOf(status)
    const buckets = new Map(HISTOGRAMS.map((h) => [h.metric, histogram(series, h.metric)]))
    page.samples.push({
      at,
      queue: Number(status.queue) || 0,
      inFlight: heldBy(status.workers || []) || sumOf(fronts, 'inFlight'),
      served: sumOf(status.workers || [], 'totalRequests'),
      buckets
    })
    while (page.samples.length > 2 && at - page.samples[0].at > KEEP_MS) page.samples.shift()
  }

  const sumOf = (list, key) => list.reduce((sum, x) => sum + (Number(x[key]) || 0), 0)
  // Requests the workers hold: a worker with --worker-concurrency above 1 may hold several
  // (`open`; its `request` is the oldest).
  const heldBy = (workers) => workers.reduce((sum, w) => sum + (w.open ?? (w.request ? 1 : 0)), 0)

  // The oldest sample no older than `ms`, to measure a change against.
  function sampleAgo (ms) {
    const now = Date.now()
    return page.samples.find((s) => now - s.at <= ms) || null
  }

  // ── drawing ──────────────────────────────────────────────────────────────────────────────

  function el (tag, attrs, ...children) {
    const node = document.createElement(tag)
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue
      if (k === 'class') node.className = v
      else node.setAttribute(k, v)
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof window.Node ? c : String(c))
    return node
  }

  function svg (tag, attrs, text) {
    const node = document.createElementNS(SVG, tag)
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v)
    if (text !== undefined) node.textContent = text
    return node
  }

  // A state as text, coloured by its class (`s-<state>` unless told).
  const badge = (text, state = text) => el('span', { class: `badge s-${String(state).replace(/[^a-z-]/g, '')}` }, text)
  const cell = (content, cls) => el('td', { class: cls }, content ?? '–')
  const setText = (id, text) => { $(id).textContent = text }

  function draw () {
    const s = page.status
    const fronts = frontsOf(s)
    setText('app-name', baseName(s.app || ''))
    document.title = `pool ${baseName(s.app || '')} – ${s.phase}`
    $('phase').replaceChildren(badge(s.phase || 'unknown'))
    const workers = s.workers || []
    const ready = workers.filter((w) => w.state === 'ready' || w.state === 'busy').length
    $('ready').replaceChildren(`${ready}`, el('small', null, ` / ${s.target ?? workers.length} wanted`))
    setText('queue', String(s.queue ?? 0))
    setText('in-flight', String(heldBy(workers)))
    setText('rate', rateText())
    setText('pid', String(s.pid ?? '–'))
    $('front').replaceChildren(...frontSummary(fronts))
    setText('app', s.app || '–')
    setText('reload', s.reload ? reloadText(s.reload) : 'none running')
    drawWorkers(workers, notesOf(fronts))
    drawHistograms()
    drawQueueChart()
    drawOutcomes()
    drawExits(s)
    drawFrontTables(fronts)
    tick()
  }

  function frontsOf (s) {
    if (!s || !s.front) return []
    return Array.isArray(s.front) ? s.front : [s.front]
  }

  // Each front as its status describes it: its type, where its clients reach it or what it
  // drives, and what is wrong with it.
  function frontSummary (fronts) {
    if (fronts.length === 0) return ['–']
    const parts = []
    fronts.forEach((f, i) => {
      if (i > 0) parts.push('; ')
      parts.push(f.type || 'unknown')
      const where = f.url || f.target
      if (where) parts.push(el('small', null, ` ${where}`))
      if (f.problem) parts.push(el('small', null, ` (${f.problem})`))
      if (f.stopping) parts.push(el('small', null, ' (stopping)'))
    })
    return parts
  }

  // What the fronts say of each worker beside its state (`notes`: a badge, a few words), by slot.
  function notesOf (fronts) {
    const notes = new Map()
    for (const f of fronts) {
      for (const [slot, note] of Object.entries(f.notes || {})) {
        notes.set(Number(slot), [...(notes.get(Number(slot)) || []), note])
      }
    }
    return notes
  }

  function reloadText (r) {
    const parts = [r.stage || 'running']
    if (r.replaced != null) parts.push(`${r.replaced} replaced`)
    if (r.pending != null) parts.push(`${r.pending} pending`)
    return parts.join(', ')
  }

  function rateText () {
    const last = page.samples[page.samples.length - 1]
    const first = sampleAgo(RATE_SPAN_MS + REFRESH_MS / 2)
    if (!last || !first || first === last || last.at - first.at < REFRESH_MS / 2) return '–'
    return ((last.served - first.served) / ((last.at - first.at) / 1000)).toFixed(1)
  }

  function drawWorkers (workers, notes) {
    const withCpu = workers.some((w) => w.cpu)
    const withTunnels = workers.some((w) => w.tunnels > 0 || w.tunnelsOpened > 0)
    $('cpu-head').hidden = !withCpu
    $('tunnels-head').hidden = !withTunnels
    const rows = workers.map((w) => {
      const state = el('td', null, badge(w.state))
      for (const note of notes.get(w.slot) || []) {
        if (note.badge) state.append(' ', badge(note.badge))
        if (note.text) state.append(el('small', { class: 'muted' }, ` ${note.text}`))
      }
      const age = el('td', { class: 'num age' }, w.request ? formatMs(w.request.age) : '–')
      if (w.request) age.dataset.age = w.request.age
      return el('tr', { 'data-slot': w.slot },
        el('th', { scope: 'row', class: 'num' }, w.slot),
        state,
        cell(w.pid, 'num'),
        cell(w.port, 'num'),
        cell(w.readyAt && w.state !== 'dead' && w.state !== 'given-up' ? formatMs(w.uptime) : '–', 'num'),
        el('td', { class: 'num' }, String(w.requests ?? 0),
          w.totalRequests !== w.requests ? el('small', { class: 'muted' }, ` (${w.totalRequests})`) : null),
        cell(w.restarts, 'num'),
        cell(w.rss ? formatBytes(w.rss) : '–', 'num'),
        withCpu ? cell(typeof cpuPercentOf(w) === 'number' ? `${cpuPercentOf(w).toFixed(0)} %` : '–', 'num') : null,
        withTunnels ? cell(String(w.tunnels ?? 0), 'num tunnels') : null,
        el('td', { class: w.request ? 'url' : 'muted' }, w.request ? `${w.request.method} ${w.request.url}` : '–',
          w.open > 1 ? el('small', { class: 'muted' }, ` +${w.open - 1} more`) : null),
        age,
        cell(w.lastExit ? exitText(w.lastExit) : '–', w.lastExit ? null : 'muted'))
    })
    $('workers').tBodies[0].replaceChildren(...rows)
    const totalRss = sumOf(workers, 'rss')
    $('workers').tFoot.replaceChildren(el('tr', null,
      el('td', { colspan: 5 }, `${workers.length} slots`),
      el('td', { class: 'num' }, String(sumOf(workers, 'totalRequests'))),
      el('td', { class: 'num' }, String(sumOf(workers, 'restarts'))),
      el('td', { class: 'num' }, totalRss ? formatBytes(totalRss) : '–'),
      el('td', { colspan: 3 + (withCpu ? 1 : 0) + (withTunnels ? 1 : 0) })))
  }

  function exitText (e) {
    const how = e.signal ? e.signal : `code ${e.code}`
    return `${e.reason} (${how}), ${formatMs(Math.max(0, poolNow() - e.at))} ago`
  }

  function drawHistograms () {
    const windowMs = $('window').value === 'all' ? null : Number($('window').value) * 1000
    let any = false
    for (const spec of HISTOGRAMS) {
      const fig = $(spec.id)
      const now = histogram(page.series, spec.metric)
      fig.hidden = now === null
      if (now === null) continue
      any = true
      const earlier = windowMs ? sampleAgo(windowMs) : null
      const h = windowMs ? difference(now, earlier && earlier.buckets.get(spec.metric)) : now
      const stats = histogramStats(h)
      fig.querySelector('.stats').textContent = stats
      const old = fig.querySelector('svg')
      const chart = histogramChart(h, `${spec.title}: ${stats}`)
      if (old) old.replaceWith(chart)
      else fig.append(chart)
    }
    $('no-latency').hidden = any
  }

  function histogramStats (h) {
    if (h.count <= 0) return 'no requests'
    const q = (p) => {
      const r = quantile(h, p)
      return r.above !== undefined ? `> ${formatSeconds(r.above)}` : formatSeconds(r.value)
    }
    return `${h.count} requests, mean ${formatSeconds(h.sum / h.count)}, p50 ${q(0.5)}, p90 ${q(0.9)}, p99 ${q(0.99)}`
  }

  // Vertical bars, one per bucket: how many fell in it (not the cumulative count).
  function histogramChart (h, label) {
    const BAR = 30
    const HEIGHT = 70
    const TOP = 12
    const counts = h.cumulative.map((c, i) => c - (i > 0 ? h.cumulative[i - 1] : 0))
    const max = Math.max(1, ...counts)
    const width = counts.length * BAR
    const height = TOP + HEIGHT + 14
    const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': label })
    counts.forEach((n, i) => {
      const x = i * BAR
      const barHeight = n > 0 ? Math.max(1, Math.round(HEIGHT * n / max)) : 0
      const lower = i > 0 ? formatBound(h.les[i - 1]) : '0'
      const bar = svg('rect',
        { class: 'bar', x: x + 3, y: TOP + HEIGHT - barHeight, width: BAR - 6, height: barHeight, 'data-count': n })
      bar.append(svg('title', null, `${lower} – ${formatBound(h.les[i])}: ${n}`))
      chart.append(bar)
      if (n > 0) {
        chart.append(svg('text',
          { class: 'count', x: x + BAR / 2, y: TOP + HEIGHT - barHeight - 2, 'text-anchor': 'middle' }, String(n)))
      }
      chart.append(svg('text', { x: x + BAR / 2, y: TOP + HEIGHT + 11, 'text-anchor': 'middle' },
        axisLabel(h.les[i], i)))
    })
    chart.append(svg('line', {
      x1: 0,
      x2: counts.length * BAR,
      y1: TOP + HEIGHT + 0.5,
      y2: TOP + HEIGHT + 0.5,
      stroke: 'currentColor',
      'stroke-opacity': 0.3
    }))
    return chart
  }

  function drawQueueChart () {
    const W = 300
    const H = 70
    const now = Date.now()
    const points = page.samples.filter((s) => now - s.at <= CHART_SPAN_MS)
    const max = Math.max(1, ...points.map((p) => Math.max(p.queue, p.inFlight)))
    const x = (p) => (W * (1 - (now - p.at) / CHART_SPAN_MS)).toFixed(1)
    const y = (v) => (4 + (H - 4) * (1 - v / max)).toFixed(1)
    const chart = svg('svg', {
      class: 'wide',
      viewBox: `0 0 ${W} ${H + 2}`,
      height: H + 2,
      preserveAspectRatio: 'none',
      role: 'img',
      'aria-label': `Queue now ${page.status.queue ?? 0}, highest in the last 2 ` +
        `minutes ${Math.max(0, ...points.map((p) => p.queue))}`
    })
    if (points.length > 0) {
      const line = points.map((p) => `${x(p)},${y(p.queue)}`)
      chart.append(svg('polygon',
        { class: 'area', points: `${x(points[0])},${H} ${line.join(' ')} ${x(points[points.length - 1])},${H}` }))
      chart.append(svg('polyline', { class: 'line2', points: points.map((p) => `${x(p)},${y(p.inFlight)}`).join(' ') }))
    }
    chart.append(svg('line', { x1: 0, x2: W, y1: H + 0.5, y2: H + 0.5, stroke: 'currentColor', 'stroke-opacity': 0.3 }))
    setText('queue-max', `(scale 0–${max})`)
    const old = $('queue-chart').querySelector('svg')
    if (old) old.replaceWith(chart)
    else $('queue-chart').append(chart)
  }

  function drawOutcomes () {
    const series = page.series
    const codes = new Map()
    for (const { labels, value } of series.get('pool_request_duration_seconds_count') || []) {
      codes.set(labels.code, (codes.get(labels.code) || 0) + value)
    }
    const all = [...codes.values()].reduce((a, b) => a + b, 0)
    const codeRows = [...codes.entries()].sort().map(([code, n]) => el('tr', null,
      el('th', { scope: 'row' }, badge(code, code >= '500' ? 'bad' : code >= '400' ? 'draining' : 'ready')),
      cell(String(n), 'num'), cell(all ? `${(100 * n / all).toFixed(1)} %` : '–', 'num')))
    $('codes').tBodies[0].replaceChildren(...(codeRows.length
      ? codeRows
      : [el('tr', null, el('td', { colspan: 3, class: 'muted' }, 'none yet'))]))
    const failures = []
    for (const { labels, value } of series.get('pool_failures_total') || []) {
      if (value > 0) failures.push([labels.reason, value])
    }
    for (const { labels, value } of series.get('pool_redispatches_total') || []) {
      if (value > 0) failures.push([`redispatched (${labels.reason})`, value])
    }
    const failureRows = failures.sort((a, b) => b[1] - a[1]).map(([reason, n]) => el('tr', null,
      el('th', { scope: 'row' }, reason), cell(String(n), 'num')))
    $('failures').tBodies[0].replaceChildren(...(failureRows.length
      ? failureRows
      : [el('tr', null, el('td', { colspan: 2, class: 'muted' }, 'none'))]))
  }

  // An exit the pool planned (a stop, a reload, recycling, a listener that closed) is no fault.
  function drawExits (s) {
    const exits = (s.recentExits || []).slice(0, MAX_EXITS)
    setText('exits-caption', `The pool's last ${MAX_EXITS} worker exits, newest first`)
    const rows = exits.map((e) => el('tr', { class: 'exit' },
      el('td', null, `${formatMs(Math.max(0, poolNow() - e.at))} ago`,
        el('small', { class: 'muted' }, ` ${new Date(e.at).toLocaleTimeString()}`)),
      cell(e.slot, 'num'), cell(e.pid, 'num'),
      el('td', null, badge(e.reason, e.planned ? 'dead' : 'bad')),
      cell(e.code, 'num'), cell(e.signal)))
    $('exits').tBodies[0].replaceChildren(...(rows.length
      ? rows
      : [el('tr', null, el('td', { colspan: 6, class: 'muted' }, 'none'))]))
  }

  // A front's own table (`table`: HAProxy's servers as it reported them, say): its first column
  // names the row, a number is right-aligned, { badge, tone } is a badge.
  function drawFrontTables (fronts) {
    const tables = fronts.filter((f) => f.table && Array.isArray(f.table.rows))
    $('front-tables').hidden = tables.length === 0
    $('front-tables-list').replaceChildren(...tables.map((f) => {
      const rows = f.table.rows.map(([name, ...values]) => el('tr', null,
        el('th', { scope: 'row' }, name),
        ...values.map((v) => v !== null && typeof v === 'object'
          ? el('td', null, badge(v.badge, v.tone))
          : cell(v, typeof v === 'number' ? 'num' : null))))
      return el('table', null, el('caption', null, `${f.type}: ${f.table.caption || ''}`),
        el('thead', null, el('tr', null, ...(f.table.head || []).map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', null, ...rows))
    }))
  }

  // Between refreshes: how old the data is, and the running requests' ages moving on.
  function tick () {
    if (page.receivedAt) {
      const ago = (Date.now() - page.receivedAt) / 1000
      setText('updated',
        `updated ${ago < 10 ? ago.toFixed(1) : Math.round(ago)} s ago` + (page.paused ? ' (paused)' : ''))
      if (!page.failure) {
        const since = Date.now() - page.receivedAt
        for (const td of document.querySelectorAll('#workers td.age[data-age]')) {
          td.textContent = formatMs(Number(td.dataset.age) + since)
        }
      }
    }
  }

  function showFailure () {
    const f = page.failure
    $('banner').hidden = !f
    $('main').classList.toggle('stale', Boolean(f))
    if (!f) return
    const last = page.receivedAt
      ? `the data below is from ${new Date(page.receivedAt).toLocaleTimeString()}`
      : 'no data received yet'
    $('banner').textContent =
      `The pool is not answering (since ${new Date(f.since).toLocaleTimeString()}): ${f.message}. Retrying every ` +
        `second; ${last}.`
  }

  // ── formats ──────────────────────────────────────────────────────────────────────────────

  function formatMs (ms) {
    const s = ms / 1000
    if (s < 10) return `${s.toFixed(1)} s`
    if (s < 60) return `${Math.floor(s)} s`
    if (s < 3600) return `${Math.floor(s / 60)}m ${String(Math.floor(s % 60)).padStart(2, '0')}s`
    if (s < 86400) return `${Math.floor(s / 3600)}h ${String(Math.floor(s % 3600 / 60)).padStart(2, '0')}m`
    return `${Math.floor(s / 86400)}d ${Math.floor(s % 86400 / 3600)}h`
  }

  function formatSeconds (s) {
    if (s === 0) return '0 ms'
    if (s < 0.001) return `${(s * 1000).toFixed(2)} ms`
    if (s < 1) return `${+(s * 1000).toPrecision(3)} ms`
    return `${+s.toPrecision(3)} s`
  }

  function formatBound (le) {
    if (le === Infinity) return '+Inf'
    return le < 1 ? `${+(le * 1000).toPrecision(3)}ms` : `${le}s`
  }

  // Bucket bounds under the bars, short: milliseconds as bare numbers after the first ("1ms 2.5
  // 5 … 500 1s 2.5s …"); the bars' tooltips say it in full.
  function axisLabel (le, i) {
    const label = formatBound(le)
    return i > 0 && label.endsWith('ms') ? label.slice(0, -2) : label
  }

  function formatBytes (n) {
    if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(2)} GiB`
    return `${(n / 1024 ** 2).toFixed(1)} MiB`
  }

  function baseName (path) { return path.split('/').filter(Boolean).slice(-2).join('/') }

  // ── controls ─────────────────────────────────────────────────────────────────────────────

  $('pause').addEventListener('click', () => {
    page.paused = !page.paused
    $('pause').textContent = page.paused ? 'Resume' : 'Pause'
    $('pause').setAttribute('aria-pressed', String(page.paused))
    if (page.paused && page.timer !== null) { clearTimeout(page.timer); page.timer = null }
    if (!page.paused) schedule(0)
    tick()
  })
  $('window').addEventListener('change', () => { if (page.status) drawHistograms() })
  setInterval(tick, 200)
  refresh()
}
