'use strict'

// The pool's own Prometheus metrics, in a registry of its own (several pools, or tests, may
// live in one process), in every mode: restarts per slot, the pool's failures (hung workers,
// failed boots, given-up slots), each slot's state, RSS and CPU time, and the supervisor's own
// process (CPU, memory: prom-client's default metrics, prefixed pool_supervisor_; the event-loop
// lag under prom-client's names, measured by LoopDelay). A front adds its series to the same
// registry when it starts (through its FrontContext), and counts its own failures in the
// same pool_failures_total, so that one scrape has everything.

const client = require('prom-client')
const { LoopDelay, NAME: LAG, SUMMARIES: LAG_SUMMARIES } = require('./loop-delay')

const PREFIX = 'pool_supervisor_'
// prom-client's own event-loop monitor, given a resolution it never reaches (a timer's longest
// delay): its lag gauges are taken out of the registry, LoopDelay's take their names.
const NEVER = 2 ** 31 - 1

const STATES = ['booting', 'warming', 'ready', 'busy', 'draining', 'dead', 'given-up']

// The reasons the pool itself counts in pool_failures_total, with a word on those that need it;
// each front's are its own (its registry entry), given to PoolMetrics by whoever makes it.
const POOL_FAILURES = [
  ['worker_hung'], ['worker_boot_failed'], ['worker_gave_up'], ['worker_listener_closed'], ['worker_channel_broken'],
  ['worker_spawn_failed', 'a fork failed: EMFILE, EAGAIN...'],
  ['out_of_descriptors', 'a connection refused to keep file descriptors for the workers']
]

// "Failures by reason: the pool's worker_hung, …; --balancer embedded: queue_timeout, …".
function failuresHelp (frontFailures) {
  const own = POOL_FAILURES.map(([reason, why]) => why ? `${reason} (${why})` : reason).join(', ')
  const fronts = Object.entries(frontFailures).filter(([, reasons]) => reasons.length > 0)
    .map(([name, reasons]) => `; --balancer ${name}: ${reasons.join(', ')}`).join('')
  return `Failures by reason: the pool's ${own}${fronts}`
}

class PoolMetrics {
  // workers(): the pool's worker snapshots, with `cpu` when known, read at scrape time.
  // supervisor: false leaves out the supervisor's process metrics (a balancer tested alone).
  // logOutput: the supervisor's log output (a LogOutput), whose dropped lines are counted.
  // frontFailures: { front name: [reasons] }, the failures the fronts count, for the help text.
  constructor (workers, { supervisor = true, logOutput = null, frontFailures = {} } = {}) {
    const registry = new client.Registry()
    const registers = [registry]
    this.registry = registry
    this.loopDelay = null
    if (supervisor) {
      client.collectDefaultMetrics({ register: registry, prefix: PREFIX, eventLoopMonitoringPrecision: NEVER })
      for (const name of [LAG, ...LAG_SUMMARIES.map((s) => `nodejs_eventloop_lag_${s}_seconds`)]) {
        registry.removeSingleMetric(PREFIX + name)
      }
      this.loopDelay = new LoopDelay({ registry, prefix: PREFIX })
    }
    this.failures = new client.Counter({
      name: 'pool_failures_total',
      help: failuresHelp(frontFailures),
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
          for (const state of STATES) {
            this.set({ worker: w.name, slot: String(w.slot), state }, w.state === state ? 1 : 0)
          }
        }
      }
    })
    const perWorker = (name, help, value) => new client.Gauge({
      name,
      help,
      labelNames: ['worker'],
      registers,
      collect () {
        this.reset()
        for (const w of workers()) {
          const v = value(w)
          if (v !== null && v !== undefined) this.set({ worker: w.name }, v)
        }
      }
    })
    new client.Counter({ // eslint-disable-line no-new
      name: 'pool_log_lines_dropped_total',
      help: 'Log lines the supervisor dropped because whatever reads its stdout did not keep up and --log-buffer was ' +
        'full (or the reader was gone)',
      registers,
      collect () {
        this.reset()
        this.inc(logOutput?.dropped ?? 0)
      }
    })
    perWorker('pool_worker_rss_bytes', 'Resident memory of each worker\'s process, as it last reported it',
      (w) => w.rss)
    // A gauge: the process's CPU time restarts at 0 with each new process; deriv() gives its use.
    perWorker('pool_worker_cpu_seconds',
      'CPU time used by each worker\'s current process (from /proc; 0 again after a restart)',
      (w) => w.cpu ? (w.cpu.user + w.cpu.system) / 1e6 : null)
  }

  // A process started in a slot; from the second on, a restart. The series exists from the first.
  spawned (w) { this.restarts.inc({ worker: w.name }, w.restarts > 0 ? 1 : 0) }

  failed (reason) { this.failures.inc({ reason }) }

  // The pool stopped: nothing samples for it any more.
  close () { this.loopDelay?.close() }
}

module.exports = { PoolMetrics, POOL_FAILURES }
