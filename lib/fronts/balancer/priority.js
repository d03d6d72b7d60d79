'use strict'

// A request's priority class: a higher class is always served first, but never takes a worker from
// a running render. The class comes from --priority-header (high/normal/low, only from a
// --trust-proxy peer, or anyone could jump the queue), else the longest matching --priority-routes
// prefix, else normal. Like HAProxy's `http-request set-priority-class`.

const { CLASSES, NORMAL, classIndex, parseRoutes } = require('../../shared/priority')
const { trustsPeerOf } = require('./trust')

function pathOf (url) {
  const q = url.indexOf('?')
  return q < 0 ? url : url.slice(0, q)
}

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

module.exports = { CLASSES, NORMAL, classifier, parseRoutes }
