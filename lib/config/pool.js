'use strict'

// A pool's options, assembled once: what `new Pool(options)` is given, or what `pool start`
// gathered from its flags, POOL_* variables and a --config file. The supervisor's options are
// read by the schema (the option table); `balancer` names a front, whose own options its
// registry entry resolves without building anything; the pool's own ports are checked against
// the workers'; and the library-only keys below pass as they are. An unknown key is an error
// naming the closest known one: a typo must not be ignored silently. Everything is checked here,
// before anything starts.

const { OPTIONS, resolveOptions, checkOwnPorts } = require('../options/table')
const { FRONTS, available, frontNamed, listenerOf } = require('../fronts/registry')
const { closest } = require('../shared/closest')
const { removedOption } = require('../options/removed')
const { poolError, codes } = require('../errors')
const { ephemeralOverlap } = require('../net/ports')

// Keys only the library has (objects, not flags).
const LIBRARY_KEYS = ['app', 'logger', 'fronts', 'env', 'execArgv', 'cwd', 'args', 'balancer']

// What the Pool is made from. `options`: the supervisor's options, resolved, with the library's
// keys. `front`: the front `balancer` named, { name, options (resolved), listener }, or null.
class PoolConfig {
  constructor ({ options, front }) {
    this.options = Object.freeze(options)
    this.front = front ? Object.freeze(front) : null
    Object.freeze(this)
  }

  // The same configuration with library-only keys added (`pool start` gives its logger).
  with (keys) {
    for (const key of Object.keys(keys)) {
      if (!LIBRARY_KEYS.includes(key)) throw poolError(codes.BAD_OPTION, `${key} is not a library-only option`)
    }
    return new PoolConfig({ options: { ...this.options, ...keys }, front: this.front })
  }

  // The fronts to put before the workers: the one `balancer` named, or the library's own.
  createFronts (logger) {
    if (this.front) return [FRONTS[this.front.name].create(this.front.options, { logger })]
    return [].concat(this.options.fronts ?? [])
  }
}

function assemblePool (input = {}) {
  if (input instanceof PoolConfig) return input
  const balancer = input.balancer
  const entry = balancer === undefined ? null : frontNamed(balancer)
  if (balancer !== undefined && balancer !== 'none' && input.fronts !== undefined) {
    throw poolError(codes.BAD_OPTION, 'give either balancer or fronts, not both')
  }
  const frontTable = entry ? entry.options() : {}
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
  // A front's client port is one of the pool's own listeners too.
  const listener = entry ? listenerOf(balancer, frontOptions) : null
  const options = checkOwnPorts(resolveOptions(own), listener ? [listener] : [])
  if (options.heartbeatInterval >= options.heartbeatTimeout) {
    throw poolError(codes.BAD_OPTION,
      `heartbeatInterval (--heartbeat-interval) ${options.heartbeatInterval} ms must be below heartbeatTimeout ` +
        `(--heartbeat-timeout) ${options.heartbeatTimeout} ms: an idle worker would be taken for hung between two ` +
        'heartbeats')
  }
  refuseEphemeral(options.workerPort, options.workerPort + Math.max(options.workers, options.maxWorkers || 0) - 1)
  const path = options.warmup.find((p) => !p.startsWith('/'))
  if (path !== undefined) {
    throw poolError(codes.BAD_OPTION, `warmup (--warmup) paths must start with / (got ${JSON.stringify(path)})`)
  }
  const front = entry ? { name: balancer, options: entry.resolve(frontOptions, options), listener } : null
  // What the workers time themselves: the limits no front of the pool's enforces as it relays.
  options.workerLimits = entry?.relays
    ? { read: 0, total: 0 }
    : { read: options.readTimeout, total: options.maxRequestTime }
  return new PoolConfig({ options, front })
}

// Worker ports the kernel may give to an outgoing connection while a worker is down (net/ports.js).
function refuseEphemeral (first, last) {
  const overlap = ephemeralOverlap(first, last)
  if (!overlap) return
  const { range } = overlap
  const ports = overlap.first === overlap.last ? `port ${overlap.first}` : `ports ${overlap.first}-${overlap.last}`
  throw poolError(codes.BAD_OPTION,
    `worker ${ports} ${overlap.first === overlap.last ? 'is' : 'are'} in the kernel's ephemeral ` +
      `range ${range.low}-${range.high} (net.ipv4.ip_local_port_range), where any outgoing connection can take one ` +
      `while its worker restarts: choose a --worker-port below ${range.low} (the default is 9002), or reserve them ` +
      `(sysctl -w net.ipv4.ip_local_reserved_ports=${overlap.first}-${overlap.last})`)
}

function unknownMessage (key, known, balancer) {
  const near = closest(key, known)
  const hint = near ? ` (did you mean ${near}?)` : ''
  const fronts = available().filter((name) => Object.keys(FRONTS[name].options()).length > 0)
  const front = balancer ? '' : `; a front's options need balancer: ${fronts.map((name) => `'${name}'`).join(' or ')}`
  return `unknown option ${key}${hint}${near ? '' : front}`
}

module.exports = { assemblePool, PoolConfig, LIBRARY_KEYS, refuseEphemeral }
