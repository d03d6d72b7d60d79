'use strict'

// Prometheus metrics of one balancer: in the pool's registry, beside the pool's own series, when
// it runs in front of a pool (through its FrontContext); in a registry of its own otherwise (never
// the global one: several pools, or tests, may live in one process). Per-worker series are
// filled when scraped, from the balancer's live view and its per-slot counts, and the request
// path's histograms are FastHistograms, so that a request costs a few array increments.

const client = require('prom-client')
const { PoolMetrics } = require('../../observe/metrics')
const { FastHistogram } = require('../../observe/histogram')

const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60]
const WORKER_STATES = ['ready', 'busy', 'draining', 'benched', 'dead']

class BalancerMetrics {
  // view(): { queued, workers: [{ name, slot, state, inFlight, requests }], bodyBytes,
  // bodyBudget, responseBytes, responseBudget, tunnels, tunnelBytes: { toWorker, toClient } },
  // read at scrape time.
  // pool: the pool's PoolMetrics, whose registry and failures counter this joins.
  constructor (view, pool = null) {
    // Standalone, a PoolMetrics of its own: pool_failures_total is defined in one place.
    const shared = pool || new PoolMetrics(() => [], { supervisor: false })
    const registry = shared.registry
    const registers = [registry]
    this.registry = registry

    new client.Gauge({ // eslint-disable-line no-new
      name: 'pool_queue_length',
      help: 'Requests waiting in the balancer queue for a free worker',
      registers,
      collect () { this.set(view().queued) }
    })
    // Bytes held against the budgets (budget.js), read from the balancer's view at scrape time.
    const held = (name, help, field) => new client.Gauge({
      name,
      help,
      registers,
      collect () { this.set(view()[field]) }
    })
    held('pool_request_body_bytes',
      'Request-body bytes the balancer holds now (being read, queued, on a worker), counted against --body-budget',
      'bodyBytes')
    held('pool_request_body_budget_bytes', 'The body budget (--body-budget; 0: no limit)', 'bodyBudget')
    held('pool_response_bytes',
      'Response bytes the balancer holds now (read from workers, not yet taken by their clients), counted against ' +
        '--response-budget', 'responseBytes')
    held('pool_response_budget_bytes', 'The response budget (--response-budget; 0: no limit)', 'responseBudget')
    held('pool_tunnels', 'WebSockets open through the balancer (upgraded connections, tunnelled both ways)', 'tunnels')
    this.tunnelsClosed = new client.Counter({
      name: 'pool_tunnels_closed_total',
      help: 'WebSockets the balancer tunnelled that have closed, by who closed first (client, worker, idle: ' +
        '--tunnel-timeout, stop)',
      labelNames: ['closed_by'],
      registers
    })
    new client.Counter({ // eslint-disable-line no-new
      name: 'pool_tunnel_bytes_total',
      help: 'Bytes the balancer\'s tunnels carried, by direction (to_worker, to_client)',
      labelNames: ['direction'],
      registers,
      collect () {
        const { toWorker, toClient } = view().tunnelBytes
        this.reset()
        this.inc({ direction: 'to_worker' }, toWorker)
        this.inc({ direction: 'to_client' }, toClient)
      }
    })
    this.queueWait = new FastHistogram({
      name: 'pool_queue_wait_seconds',
      help: 'Time a request waited in the queue before a worker took it',
      buckets: SECONDS_BUCKETS,
      registers
    })
    this.duration = new FastHistogram({
      name: 'pool_request_duration_seconds',
      help: 'Time from a request\'s arrival at the balancer to the end of its response, by status code',
      labelName: 'code',
      buckets: SECONDS_BUCKETS,
      registers
    })
    this.workerBusy = new FastHistogram({
      name: 'pool_worker_busy_seconds',
      help: 'Time a worker was held by one request (the client\'s upload excluded, and its download within ' +
        '--max-response-buffer)',
      buckets: SECONDS_BUCKETS,
      registers
    })
    this.failures = shared.failures
    this.redispatches = new client.Counter({
      name: 'pool_redispatches_total',
      help: 'Requests sent to another worker after a failure, by reason (refused: not written; died: idempotent retry)',
      labelNames: ['reason'],
      registers
    })
    new client.Counter({ // eslint-disable-line no-new
      name: 'pool_worker_requests_total',
      help: 'Requests given to each worker slot',
      labelNames: ['worker'],
      registers,
      collect () {
        this.reset()
        for (const w of view().workers) this.inc({ worker: w.name }, w.requests)
      }
    })
    new client.Gauge({ // eslint-disable-line no-new
      name: 'pool_worker_in_flight',
      help: 'Requests each worker is serving now',
      labelNames: ['worker'],
      registers,
      collect () {
        this.reset()
        for (const w of view().workers) this.set({ worker: w.name }, w.inFlight)
      }
    })
    this.durationFor = (code) => this.duration.labels(code)
    new client.Gauge({ // eslint-disable-line no-new
      name: 'pool_worker_state',
      help: `Each worker slot's state as the balancer sees it: 1 for the current one of ${WORKER_STATES.join(', ')}`,
      labelNames: ['worker', 'slot', 'state'],
      registers,
      collect () {
        this.reset()
        for (const w of view().workers) {
          for (const state of WORKER_STATES) {
            this.set({ worker: w.name, slot: String(w.slot), state }, w.state === state ? 1 : 0)
          }
        }
      }
    })
  }
}

module.exports = { BalancerMetrics, WORKER_STATES }
