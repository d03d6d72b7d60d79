'use strict'

// What `new Pool(options)` accepts, all of it checked before anything starts: the supervisor's
// table (lib/options/table.js), `balancer` with the chosen front's own table
// (lib/fronts/registry.js: the embedded balancer's port, maxconn…; HAProxy's socket…), and the
// library-only keys below. An unknown key is an error naming the closest known one: a typo must not
// be ignored silently.

const { OPTIONS, resolveOptions, checkOwnPorts } = require('./table')
const { FRONTS } = require('../fronts/registry')
const { poolError, codes } = require('../errors')
const { removedOption } = require('./removed')

// Keys only the library has (objects, not flags).
const LIBRARY_KEYS = ['app', 'logger', 'fronts', 'env', 'execArgv', 'cwd', 'args', 'balancer']

// Returns { options, createFront(logger) }: the resolved supervisor options, and a maker of the
// front `balancer` names (null without one). The front's own options are checked here too.
function resolvePoolOptions (input = {}) {
  const balancer = input.balancer
  if (balancer !== undefined && !Object.hasOwn(FRONTS, balancer)) {
    throw poolError(codes.BAD_OPTION, `balancer must be one of ${Object.keys(FRONTS).join(', ')} (got ${JSON.stringify(balancer)})`)
  }
  if (balancer !== undefined && balancer !== 'none' && input.fronts !== undefined) {
    throw poolError(codes.BAD_OPTION, 'give either balancer or fronts, not both')
  }
  const frontTable = balancer ? FRONTS[balancer].options() : {}
  const known = new Set([...Object.keys(OPTIONS), ...Object.keys(frontTable), ...LIBRARY_KEYS])
  for (const key of Object.keys(input)) {
    if (!known.has(key)) throw poolError(codes.BAD_OPTION, removedOption(key) ?? unknownMessage(key, known, balancer))
  }
  const own = {}
  const frontOptions = {}
  for (const [key, value] of Object.entries(input)) {
    if (Object.hasOwn(frontTable, key)) frontOptions[key] = value
    else own[key] = value
  }
  // The embedded balancer's port is one of the pool's own listeners too.
  const frontPorts = balancer === 'embedded' ? [{ name: 'port', flag: 'port', port: frontOptions.port ?? frontTable.port.default, host: frontOptions.host ?? frontTable.host.default }] : []
  const options = checkOwnPorts(resolveOptions(own), frontPorts)
  if (options.heartbeatInterval >= options.heartbeatTimeout) {
    throw poolError(codes.BAD_OPTION, `heartbeatInterval (--heartbeat-interval) ${options.heartbeatInterval} ms must be below heartbeatTimeout (--heartbeat-timeout) ${options.heartbeatTimeout} ms: an idle worker would be taken for hung between two heartbeats`)
  }
  const path = options.warmup.find((p) => !p.startsWith('/'))
  if (path !== undefined) throw poolError(codes.BAD_OPTION, `warmup (--warmup) paths must start with / (got ${JSON.stringify(path)})`)
  if (!balancer) return { options, createFront: null }
  const create = (logger) => FRONTS[balancer].create({ ...frontOptions, workers: options.workers }, { logger })
  create() // throws now, before anything starts, if the front's options are wrong
  return { options, createFront: create }
}

function unknownMessage (key, known, balancer) {
  const near = closest(key, known)
  const hint = near ? ` (did you mean ${near}?)` : ''
  const front = balancer ? '' : '; the embedded balancer\'s and HAProxy\'s options need balancer: \'embedded\' or \'haproxy\''
  return `unknown option ${key}${hint}${near ? '' : front}`
}

// The known key at the smallest edit distance, if it is close enough to be a typo.
function closest (key, known) {
  let best = null
  let bestDistance = Infinity
  for (const candidate of known) {
    const d = distance(key.toLowerCase(), candidate.toLowerCase())
    if (d < bestDistance) { best = candidate; bestDistance = d }
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 4)) ? best : null
}

function distance (a, b) {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = row
  }
  return previous[b.length]
}

module.exports = { resolvePoolOptions, LIBRARY_KEYS, closest }
