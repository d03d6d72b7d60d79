'use strict'

// Priority classes: which queue a request waits in. A higher class is always served before a
// lower one (lib/fronts/balancer/queue.js), so health checks and cheap pages are never stuck behind
// a queue of renders. What a class cannot do is take a worker from a render already running: it
// waits for the next worker to come free.
//
// A request's class comes from, in this order:
//   --priority-header NAME   the header's value (high, normal or low), only from a peer in
//                            --trust-proxy: anyone else could send `high` and jump the queue;
//   --priority-routes RULES  `PREFIX=CLASS,...`: the longest path prefix that matches;
//   otherwise normal.
// HAProxy's `http-request set-priority-class` is the same idea, with numbers.

const { trustsPeerOf } = require('./trust')

const CLASSES = ['high', 'normal', 'low'] // index = serving order
const NORMAL = CLASSES.indexOf('normal')

function classIndex (name) {
  return CLASSES.indexOf(String(name).trim().toLowerCase())
}

// '/health=high,/static/=high,/api/report=low' → [{ prefix, cls }], longest prefix first.
// Throws a plain Error naming what is wrong; the caller makes it a PoolError.
function parseRoutes (text) {
  const rules = []
  for (const part of String(text).split(',')) {
    const rule = part.trim()
    if (rule === '') continue
    const eq = rule.lastIndexOf('=')
    const prefix = rule.slice(0, eq).trim()
    const cls = eq > 0 ? classIndex(rule.slice(eq + 1)) : -1
    if (eq <= 0 || !prefix.startsWith('/')) throw new Error(`'${rule}' is not PATH-PREFIX=CLASS with a prefix starting with /`)
    if (cls < 0) throw new Error(`'${rule}': the class must be one of ${CLASSES.join(', ')}`)
    if (rules.some((r) => r.prefix === prefix)) throw new Error(`'${prefix}' is given twice`)
    rules.push({ prefix, cls })
  }
  if (rules.length === 0) throw new Error('no rule given')
  return rules.sort((a, b) => b.prefix.length - a.prefix.length)
}

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

module.exports = { CLASSES, NORMAL, classifier, parseRoutes }
