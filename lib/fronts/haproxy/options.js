'use strict'

// `pool start --balancer haproxy` options, in the option table's format so that the
// CLI builds its flags from it and docs/reference/options.md's table is generated from it.

const { resolveOptions } = require('../../options/table')
const { poolError, codes } = require('../../errors')
const { parseAddress } = require('../../haproxy/client')
// The backend name `pool config haproxy` writes by default: the two agree out of the box.
const { DEFAULT_BACKEND } = require('../../haproxy/names')

const OPTIONS = {
  haproxySocket: {
    flag: 'haproxy-socket',
    kind: 'string',
    group: 'HAProxy',
    defaultText: 'required',
    describe: 'HAProxy\'s runtime API at level admin: a unix socket path or host:port (`pool config haproxy --socket`)'
  },
  haproxyBackend: {
    flag: 'haproxy-backend',
    kind: 'string',
    default: DEFAULT_BACKEND,
    group: 'HAProxy',
    describe: 'The backend whose servers worker1..N are the slots (`pool config haproxy --backend`)'
  },
  haproxyCheckInterval: {
    flag: 'haproxy-check-interval',
    kind: 'duration',
    default: 2000,
    group: 'HAProxy',
    describe: 'How often HAProxy\'s server states are compared with the wanted ones (and re-asserted after a reload ' +
      'or restart)'
  },
  haproxyTimeout: {
    flag: 'haproxy-timeout',
    kind: 'duration',
    default: 2000,
    group: 'HAProxy',
    describe: 'A runtime API command unanswered after this counts as HAProxy unreachable'
  },
  stopAnnounce: {
    flag: 'stop-announce',
    kind: 'duration',
    default: 2000,
    group: 'HAProxy',
    describe: 'On stop, when an edge asks the pool\'s agent: how long the servers stay READY, serving what the edge ' +
      'still sends, while the agent says drain, before they are drained'
  },
  haproxyStateFile: {
    flag: 'haproxy-state-file',
    kind: 'string',
    group: 'HAProxy',
    defaultText: 'none',
    describe: 'Keep HAProxy\'s server states in this file, rewritten at every change, for its ' +
      '`load-server-state-from-file` (`pool config haproxy --state-file`): a HAProxy reload then keeps ready workers ' +
      'in service'
  }
}

function bad (message) { return poolError(codes.BAD_OPTION, message) }

function resolveHaproxyFrontOptions (input = {}) {
  const o = resolveOptions(input, OPTIONS)
  if (o.haproxySocket === undefined) {
    throw bad('the HAProxy front needs haproxySocket (--haproxy-socket): the path (or host:port) of HAProxy\'s ' +
      '"stats socket ... level admin"')
  }
  parseAddress(o.haproxySocket) // throws a PoolError naming the bad value
  if (!/^[A-Za-z0-9_.:-]+$/.test(o.haproxyBackend)) {
    throw bad('haproxyBackend (--haproxy-backend) must be a HAProxy name: letters, digits, \'-\', \'_\', \'.\', ' +
      `':' (got '${o.haproxyBackend}')`)
  }
  if (o.haproxyCheckInterval < 100) {
    throw bad(`haproxyCheckInterval (--haproxy-check-interval) must be at least 100ms (got ${o.haproxyCheckInterval} ` +
      'ms)')
  }
  if (o.haproxyTimeout < 10) {
    throw bad(`haproxyTimeout (--haproxy-timeout) must be at least 10ms (got ${o.haproxyTimeout} ms)`)
  }
  return o
}

module.exports = { OPTIONS, DEFAULT_BACKEND, resolveHaproxyFrontOptions }
