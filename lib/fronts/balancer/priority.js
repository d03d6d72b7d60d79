'use strict'

// A request's priority class: which queue it waits in. A higher class is always served before a
// lower one, so health checks and cheap pages are never stuck behind a queue of renders. What a
// class cannot do is take a worker from a render already running: it waits for the next worker
// to come free.
//
// A request's class comes from, in this order:
//   --priority-header NAME   the header's value (high, normal or low), only from a peer in
//                            --trust-proxy: anyone else could send `high` and jump the queue;
//   --priority-routes RULES  `PREFIX=CLASS,...`: the longest path prefix that matches;
//   otherwise normal.
// HAProxy's `http-request set-priority-class` is the same idea, with numbers.

const { CLASSES, NORMAL, classIndex, parseRoutes } = require('../../shared/priority')
const { trustsPeerOf } = require('./trust')

function pathOf (url) {
  const q = url.indexOf('?')
  return q < 0 ? url : url.slice(0, q)
}

// (req) → class index. Without a header or rules, every request is normal.
function classifier ({ header, routes, isTrustedPeer }) {
  const name = header ? header.toLowerCase() : null
  const rules = routes ? parseRoutes(routes) : []
  if (!name && rules.length === 0) return () => NORMAL
  return (req) => {
    if (name) {
      const value = req.headers[name]
      if (value !== undefined && trustsPeerOf(req.socket, isTrustedPeer)) {
        const cls = classIndex(value)
        if (cls >= 0) return cls
      }
    }
    if (rules.length > 0) {
      const path = pathOf(req.url)
      for (const r of rules) if (path.startsWith(r.prefix)) return r.cls
    }
    return NORMAL
  }
}

// The classes themselves and their grammar are the pool's, shared with `pool config haproxy`.
module.exports = { CLASSES, NORMAL, classifier, parseRoutes }
