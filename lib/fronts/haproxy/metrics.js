'use strict'

// The HAProxy front's series in the pool's registry, read at scrape time from what its
// reconciler (./servers.js) knows as of its last check: whether HAProxy answers, its backend queue,
// and each worker<k> server's wanted state (what the pool asked for) and seen state (what
// HAProxy reported). A server whose seen state differs from its wanted one is being re-asserted.

const client = require('prom-client')

const ADMIN_STATES = ['ready', 'drain', 'maint']

// `states`: the front's ServerStates.
function addHaproxyMetrics (states, registry) {
  const registers = [registry]
  new client.Gauge({ // eslint-disable-line no-new
    name: 'pool_haproxy_up',
    help: 'Whether HAProxy\'s runtime API answered the last check (1) or not (0)',
    registers,
    collect () { this.set(states.reachable ? 1 : 0) }
  })
  new client.Gauge({ // eslint-disable-line no-new
    name: 'pool_haproxy_queue_length',
    help: 'Requests waiting in HAProxy\'s backend queue, as of the last check',
    registers,
    collect () { this.set(Number(states.queue) || 0) }
  })
  new client.Gauge({ // eslint-disable-line no-new
    name: 'pool_haproxy_server_state',
    help: `Each worker server's admin state, 1 for the current one of ${ADMIN_STATES.join(', ')}: kind="wanted" as ` +
      'the pool asked, kind="seen" as HAProxy reported it last',
    labelNames: ['server', 'kind', 'state'],
    registers,
    collect () {
      this.reset()
      for (const [server, rec] of states.servers) {
        for (const kind of ['wanted', 'seen']) {
          if (!rec[kind]) continue
          for (const state of ADMIN_STATES) this.set({ server, kind, state }, rec[kind] === state ? 1 : 0)
        }
      }
    }
  })
}

module.exports = { addHaproxyMetrics }
