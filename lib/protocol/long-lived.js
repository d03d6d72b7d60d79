'use strict'

// Which requests are long-lived, as every front decides it before a worker is chosen (a stream
// cannot be told from a page until its answer comes): those whose client accepts
// text/event-stream (server-sent events), and those under a prefix of --stream-routes (an AI
// chat route, long polls). A front sends them on with STREAM_HEADER, so that the worker's guard
// gives them no render place; a client cannot send the header itself (fronts drop it), though it
// can meet the rules: such a request skips the render queue, bounded by --worker-max-open.

const STREAM_HEADER = 'X-Pool-Stream'
const EVENT_STREAM = 'text/event-stream'

// '/api/chat, /events' → ['/api/chat', '/events']. Throws on a prefix that is not a path.
function streamRoutes (text) {
  if (text === undefined || text === null || text === '') return []
  const routes = String(text).split(',').map((r) => r.trim()).filter(Boolean)
  for (const r of routes) {
    if (!r.startsWith('/') || /[\s?#]/.test(r)) throw new Error(`${JSON.stringify(r)} is not a path prefix`)
  }
  return routes
}

// Whether `req` ({ url, headers }, its target in origin form) is long-lived: HAProxy's
// `req.hdr(accept) -m sub text/event-stream` and `path_beg` on each route, as the generated
// config says it.
function isLongLived (req, routes) {
  const accept = req.headers.accept
  if (typeof accept === 'string' && accept.includes(EVENT_STREAM)) return true
  if (routes.length === 0) return false
  const query = req.url.indexOf('?')
  const path = query === -1 ? req.url : req.url.slice(0, query)
  return routes.some((r) => path.startsWith(r))
}

// In the worker: whether a front declared the request long-lived.
function declaredLongLived (headers) {
  return headers['x-pool-stream'] === '1'
}

module.exports = { STREAM_HEADER, streamRoutes, isLongLived, declaredLongLived }
