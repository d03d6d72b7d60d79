'use strict'

// The HAProxy front's parts on their own: the warnings said once each, MAINT's latency, the
// ports check, and status() in the shape every front's has.

const t = require('tap')
const { OnceEach, REPEAT_AFTER } = require('../../../lib/fronts/haproxy/warnings')
const { Latency } = require('../../../lib/fronts/haproxy/latency')
const { checkServerPorts } = require('../../../lib/fronts/haproxy/ports')
const { describeServers } = require('../../../lib/fronts/haproxy/status')

function recorder () {
  const lines = []
  const at = (level) => (fields, message) => lines.push({ level, message, ...fields })
  return { lines, logger: { warn: at('warn'), debug: at('debug') } }
}

t.test('a warning once per message, again after a while or once forgotten; debug in between', async (t) => {
  const { lines, logger } = recorder()
  let now = 0
  const warnings = new OnceEach(logger, { now: () => now })
  warnings.warn('haproxy-unreachable', 'down', {})
  warnings.warn('haproxy-unreachable', 'down', {})
  warnings.warn('haproxy-error', 'refused', {})
  now = REPEAT_AFTER
  warnings.warn('haproxy-error', 'refused', {})
  warnings.forget()
  warnings.warn('haproxy-error', 'refused', {})
  t.same(lines.map((l) => `${l.level} ${l.message}`),
    ['warn down', 'debug down', 'warn refused', 'warn refused', 'warn refused'])
})

t.test('MAINT\'s latency: count, last, most', async (t) => {
  const latency = new Latency()
  t.same(latency.toJSON(), { count: 0, lastMs: null, maxMs: null })
  latency.record(3)
  latency.record(1)
  t.same(latency.toJSON(), { count: 2, lastMs: 1, maxMs: 3 })
})

t.test('each worker<k> server must send to slot k\'s port', async (t) => {
  const portOf = (slot) => 9001 + slot
  const state = { worker1: { port: 9002 }, worker2: { port: 8003 } }
  t.doesNotThrow(() => checkServerPorts(state, ['worker1'], { backend: 'pool', portOf, workers: 2 }))
  t.throws(() => checkServerPorts(state, ['worker1', 'worker2'], { backend: 'pool', portOf, workers: 2 }), {
    code: 'POOL_E_BAD_OPTION',
    message: /sends worker2 to port 8003, but the pool's slot 2 listens on 9003: start the pool with --worker-port 8002/
  })
})

t.test('status() as every front says it: where, what is wrong, each server by slot', async (t) => {
  const servers = {
    worker1: { wanted: 'ready', seen: 'ready', up: true, sessions: 1 },
    worker2: { wanted: 'maint', seen: 'drain', up: false, sessions: 0 }
  }
  const s = describeServers(servers,
    {
      backend: 'pool',
      socket: '/run/h.sock',
      reachable: false,
      lastError: { message: 'connect ENOENT' },
      haproxyPid: 7,
      queue: 2
    })
  t.same([s.target, s.detail, s.problem],
    ['backend pool', 'via /run/h.sock (HAProxy pid 7)', 'unreachable: connect ENOENT'])
  t.same(s.columns.map((c) => [c.title, c.values[1], c.values[2]]),
    [['WANTED', 'ready', 'maint'], ['HAPROXY', 'ready', 'drain (down)'], ['SESS', 1, 0]])
  t.same(s.table.rows[1], ['worker2', 'maint', 'drain', { badge: 'DOWN', tone: 'bad' }, 0])
})
