'use strict'

// Long-lived requests, told before a worker is chosen: Accept text/event-stream, or a --stream-routes
// prefix. Fronts mark them with STREAM_HEADER (dropping a client's own) and the guard gives them no render place.

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

// As the generated HAProxy config's `req.hdr(accept) -m sub text/event-stream` and `path_beg`.
function isLongLived (req, routes) {
  const accept = req.headers.accept
  if (typeof accept === 'string' && accept.includes(EVENT_STREAM)) return true
  if (routes.length === 0) return false
  const query = req.url.indexOf('?')
  const path = query === -1 ? req.url : req.url.slice(0, query)
  return routes.some((r) => path.startsWith(r))
}

function declaredLongLived (headers) {
  return headers['x-pool-stream'] === '1'
}

module.exports = { STREAM_HEADER, streamRoutes, isLongLived, declaredLongLived }
