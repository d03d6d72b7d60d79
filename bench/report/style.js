'use strict'

// One look for every chart: the same name and colour for a front wherever it appears, fonts and
// sizes that stay readable when GitHub scales the SVG down, and a white background.

// Fronts and configurations, in the order legends list them.
const SERIES = [
  ['ideal', 'ideal central queue', '#222222'],
  ['direct', 'direct (no front)', '#8c8c8c'],
  ['minimal', 'minimal Node balancer (the floor)', '#7f7f7f'],
  ['relay', 'minimal TCP relay (one hop\'s floor)', '#a6a6a6'],
  ['pool-worker', 'a pool worker, its own port', '#bcbd22'],
  ['embedded', 'embedded balancer', '#1f77b4'],
  ['embedded-k1', 'embedded, --worker-concurrency 1', '#9edae5'],
  ['embedded-oc', 'embedded, overload control (default)', '#17becf'],
  ['embedded-fifo', 'embedded, --no-overload-control', '#1f77b4'],
  ['embedded-unbounded', 'embedded, --body-budget 0', '#aec7e8'],
  ['haproxy', 'HAProxy', '#ff7f0e'],
  ['haproxy-3.0', 'HAProxy 3.0', '#8c564b'],
  ['haproxy-2-threads', 'HAProxy, nbthread 2', '#ffbb78'],
  ['haproxy-tq', 'HAProxy, short queue timeout', '#c9a400'],
  ['haproxy-fifo', 'HAProxy, --max-queue 0', '#c9a400'],
  ['nginx-haproxy', 'nginx → HAProxy', '#2ca02c'],
  ['cluster', "Node's cluster", '#d62728'],
  ['pm2', 'PM2 cluster mode', '#e377c2'],
  ['http-proxy', 'http-proxy', '#9467bd'],
  ['pool-haproxy', 'HAProxy driven by the pool', '#ff7f0e'],
  ['pool-haproxy-3.0', 'HAProxy 3.0 driven by the pool', '#8c564b'],
  ['haproxy-observe', 'HAProxy alone, checks + observe layer4', '#2ca02c'],
  ['haproxy-check', 'HAProxy alone, health checks', '#9467bd'],
  ['haproxy-alone', 'HAProxy alone, no checks', '#d62728'],
  ['agent', 'edge with agent maxconn', '#1f77b4'],
  ['rr', 'edge round-robin', '#d62728'],
  ['split 3', '3 edges (a model, not run)', '#9467bd']
]
const LABEL = Object.fromEntries(SERIES.map(([k, label]) => [k, label]))
const COLOR = Object.fromEntries(SERIES.map(([k, , color]) => [k, color]))

const label = (key) => LABEL[key] ?? key

// A colour scale for the labels of `keys` (in SERIES order), for `encoding.color.scale`.
function colorScale (keys) {
  const known = SERIES.map(([k]) => k).filter((k) => keys.includes(k))
  const rest = keys.filter((k) => !known.includes(k))
  const fallback = ['#8c564b', '#e377c2', '#7f7f7f', '#bcbd22']
  const ordered = [...known, ...rest]
  return { domain: ordered.map(label), range: ordered.map((k, i) => COLOR[k] ?? fallback[i % fallback.length]) }
}

const CONFIG = {
  background: 'white',
  padding: 12,
  font: 'Helvetica, Arial, sans-serif',
  view: { stroke: '#dddddd' },
  title: { fontSize: 15, fontWeight: 'bold', anchor: 'start', offset: 12, subtitleFontSize: 12, subtitleColor: '#555555' },
  axis: { labelFontSize: 12, titleFontSize: 12, titleFontWeight: 'normal', titleColor: '#333333', labelColor: '#333333', gridColor: '#eeeeee' },
  legend: { labelFontSize: 12, titleFontSize: 12, titleFontWeight: 'normal', labelLimit: 400, orient: 'bottom', direction: 'horizontal', columns: 3, symbolStrokeWidth: 2 },
  header: { labelFontSize: 13, titleFontSize: 13, labelFontWeight: 'bold' },
  line: { strokeWidth: 2 },
  point: { size: 50, filled: true }
}

// The common frame of a spec: schema, config, title.
function chart (title, subtitle, body) {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    config: CONFIG,
    title: subtitle ? { text: title, subtitle } : title,
    ...body
  }
}

module.exports = { label, colorScale, chart, COLOR }
