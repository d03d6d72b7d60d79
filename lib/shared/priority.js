'use strict'

// Priority classes and --priority-routes (`PREFIX=CLASS,...`), for the embedded balancer and for the
// generated HAProxy `http-request set-priority-class`.

const CLASSES = ['high', 'normal', 'low'] // index = serving order
const NORMAL = CLASSES.indexOf('normal')

function classIndex (name) {
  return CLASSES.indexOf(String(name).trim().toLowerCase())
}

// '/health=high,/static/=high,/api/report=low' → [{ prefix, cls }], longest prefix first.
// Throws a plain Error; the caller makes it a PoolError.
function parseRoutes (text) {
  const rules = []
  for (const part of String(text).split(',')) {
    const rule = part.trim()
    if (rule === '') continue
    const eq = rule.lastIndexOf('=')
    const prefix = rule.slice(0, eq).trim()
    const cls = eq > 0 ? classIndex(rule.slice(eq + 1)) : -1
    if (eq <= 0 || !prefix.startsWith('/')) {
      throw new Error(`'${rule}' is not PATH-PREFIX=CLASS with a prefix starting with /`)
    }
    if (cls < 0) throw new Error(`'${rule}': the class must be one of ${CLASSES.join(', ')}`)
    if (rules.some((r) => r.prefix === prefix)) throw new Error(`'${prefix}' is given twice`)
    rules.push({ prefix, cls })
  }
  if (rules.length === 0) throw new Error('no rule given')
  return rules.sort((a, b) => b.prefix.length - a.prefix.length)
}

module.exports = { CLASSES, NORMAL, classIndex, parseRoutes }
