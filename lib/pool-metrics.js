'use strict'

// The pool's own Prometheus metrics, in a registry of its own (several pools, or tests, may
// live in one process), in every mode: restarts per slot, the pool's failures (hung workers,
// failed boots, given-up slots) and each slot's state. A front adds its series to the same
// registry when it starts (lib/front.js), and counts its own failures in the same
// pool_failures_total, so that one scrape has everything.

const client = require('prom-client')

const STATES = ['booting', 'warming', 'ready', 'busy', 'draining', 'dead', 'given-up']

class PoolMetrics {
  // workers(): the pool's worker snapshots, read at scrape time.
  constructor (workers) {
    const registry = new client.Registry()
    const registers = [registry]
    this.registry = registry
    this.failures = new client.Counter({
      name: 'pool_failures_total',
      help: 'Failures by reason: the pool\'s worker_hung, worker_boot_failed, worker_gave_up; the embedded balancer\'s queue_timeout, queue_full, queue_shed, body_too_large, worker_refused, worker_died, bad_response, worker_broken_response, worker_timeout, client_aborted, client_send_timeout, internal_error',
      labelNames: ['reason'],
      registers
    })
    this.restarts = new client.Counter({
      name: 'pool_worker_restarts_total',
      help: 'Times each worker slot was started again after its first start',
      labelNames: ['worker'],
      registers
    })
    new client.Gauge({ // eslint-disable-line no-new
      name: 'pool_worker_process_state',
      help: `Each worker slot's state as the supervisor sees it: 1 for the current one of ${STATES.join(', ')}`,
      labelNames: ['worker', 'slot', 'state'],
      registers,
      collect () {
        this.reset()
        for (const w of workers()) {
          for (const state of STATES) this.set({ worker: w.name, slot: String(w.slot), state }, w.state === state ? 1 : 0)
        }
      }
    })
  }

  // A process started in a slot; from the second on, a restart. The series exists from the first.
  spawned (w) { this.restarts.inc({ worker: w.name }, w.restarts > 0 ? 1 : 0) }

  failed (reason) { this.failures.inc({ reason }) }
}

module.exports = { PoolMetrics }
