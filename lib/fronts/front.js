'use strict'

// A "front" decides how requests reach the workers (the embedded balancer, HAProxy, or none). The supervisor
// tells every front of the workers' lifecycle through these hooks, so reloads, scaling and crash handling are
// written once. Each hook's `w` is a snapshot { slot, pid, host, port, name, state }; `name` is `worker<slot>`.
//
//   start(context)     async. Once, by pool.start() before any worker is forked, with the FrontContext below.
//                      Bind, connect, verify; throw a PoolError to abort. Tests and benches may omit the context.
//   workerReady(w)     sync. w listens and may be given requests.
//   workerAwaiting(w, { open, last })
//                      optional, sync. With --worker-concurrency above 1: all `open` requests w holds await I/O;
//                      `last` is the exchange (X-Pool-Request) of the one it started last (one older than the
//                      front's latest request to w: the word predates that request). Told as it comes.
//   workerRequestEnded(w, id)
//                      optional, sync. The request of exchange `id` the front asked about (watchRequest) has
//                      ended in w (its handler settled), or was never there.
//   workerGone(w)      sync, must be fast. w exited or is being killed: out of rotation at once (HAProxy: MAINT).
//                      Once per process, before any respawn: from its exit event or before the pool signals it.
//                      Also for a retired process (w.retired: it left its port holding requests, its slot has a
//                      new process): what the front still held on it is over.
//   drain(w)           returns a Promise. Give w no new requests; resolve once nothing the front sent w still
//                      renders (long-lived responses and streams may go on without its port). The pool then asks
//                      w to leave its port and may start the slot's next process; SIGTERM at the graceful timeout.
//   stopping()         optional, sync. The pool is about to drain: announce it to whatever balances in front,
//                      stop accepting new clients once it has heard, keep dispatching what is queued. The stop's
//                      drains follow at once; a front may hold them until its announcement is over.
//   stop()             async. Every worker is gone: release listeners and sockets.
//   status()           a FrontStatus (below), read alike by `pool status`, /status and the status page.
//   checkScale(n)      optional, async. From pool.scale(n) before any change: throw a PoolError (POOL_E_BAD_OPTION)
//                      when the front cannot serve slots 1..n. Must change nothing: the scale may still be refused
//                      after it, untold. (HAProxy: a worker<k> server per new slot, on that slot's port.)
//   host               optional property: where the front listens for clients; the agent (--agent-port) too,
//                      unless --agent-host.

/**
 * All a front may know of the pool, passed to start().
 *
 * @typedef {object} FrontContext
 * @property {object} logger the pool's logger (pino's interface: info, warn, error, debug, child)
 * @property {import('../observe/metrics').PoolMetrics} metrics a front adds its series to
 *   `metrics.registry` and counts its failures in `metrics.failures` (label `reason`)
 * @property {() => object[]} workers a fresh snapshot of every slot, as
 *   `pool.workers()` (`state` 'busy' while it holds requests)
 * @property {(slot: number) => number} portOf the port slot `slot`'s worker listens on
 * @property {() => number} target the number of slots the pool wants now
 * @property {(worker: { slot: number, pid: number }, detail?: { refusals?: number, front?: string }) => void} workerRefusing
 *   `worker` refused `refusals` connections in a row while counted ready: the pool replaces it (ignored if that
 *   process no longer holds the slot).
 * @property {() => boolean} agentAsked an edge has asked the agent (`--agent-port`):
 *   a stop is announced to it (`drain`) before the front stops taking requests
 * @property {(worker: { slot: number, pid: number }, id: string) => boolean} watchRequest
 *   the front closed its connection to `worker` for exchange `id` (X-Pool-Request) while the app may still work on
 *   it: the front hears workerRequestEnded(w, id) when it ends. False when the worker cannot be asked (gone)
 */

/**
 * status(): the fields below, read alike for every front by `pool status`, `pool ls` and the status page, and any
 * of its own beside them (for `--json` and /status).
 *
 * @typedef {object} FrontStatus
 * @property {string} type the front's name ('embedded', 'haproxy', 'none')
 * @property {string} [url] where its clients reach it, when it listens for them itself
 * @property {string} [target] what it drives, in a few words, when it does not ('backend pool')
 * @property {string} [detail] more on where it is ('via /run/haproxy.sock (HAProxy pid 42)')
 * @property {string|null} [problem] what is wrong with it now ('unreachable: connect ENOENT')
 * @property {number} [queue] requests waiting for a worker, if it queues
 * @property {number} [inFlight] requests on workers
 * @property {boolean} [stopping] it no longer takes new clients
 * @property {{ title: string, right?: boolean, values: Object<number, string|number> }[]} [columns]
 *   columns of its own in `pool status`, each worker's value by slot
 * @property {Object<number, { badge?: string, text?: string }>} [notes] beside a worker's state
 *   on the status page, by slot
 * @property {{ caption: string, head: string[], rows: Array<Array<string|number|null|{ badge: string, tone: string }>> }} [table]
 *   a table of its own on the status page, each row named by its first cell
 */

// The functions are the pool's own, bound.
function createFrontContext ({
  logger, metrics, workers, portOf, target, workerRefusing, agentAsked = () => false,
  watchRequest = () => false
}) {
  return Object.freeze({ logger, metrics, workers, portOf, target, workerRefusing, agentAsked, watchRequest })
}

class NoFront {
  constructor () { this.name = 'none' }
  async start () {}
  workerReady () {}
  workerGone () {}
  async drain () {}
  stopping () {}
  async stop () {}
  status () { return { type: 'none' } }
}

module.exports = { NoFront, createFrontContext }
