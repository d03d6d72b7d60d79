'use strict'

// A "front" decides how requests reach the workers: the embedded balancer, HAProxy driven over
// its runtime API, or none. The supervisor owns the workers' lifecycle and tells every front
// about it through this small interface, so reloads, scaling and crash handling are written once
// and behave the same whatever sits in front.
//
// The `worker` passed to each hook is a plain snapshot: { slot, pid, host, port, name, state }.
// `name` is the HAProxy server name, `worker<slot>`.
//
//   start(context)     async. Called once by pool.start() before any worker is forked, with the
//                      FrontContext below: everything a front may know of the pool. Bind
//                      listeners, connect, verify configuration. Throw a PoolError to abort.
//                      A front used alone (tests, benches) may be started without a context.
//   workerReady(w)     sync. w listens and may be given requests now.
//   workerAwaiting(w, { open, last })
//                      optional, sync. With --worker-concurrency above 1: every request w holds
//                      (`open` of them) awaits I/O, its event loop idle; `last` is the exchange (X-Pool-Request)
//                      of the request it started last (a word older than the front's latest
//                      request to w names another). Told as it comes.
//   workerRequestEnded(w, id)
//                      optional, sync. The request of exchange `id` (X-Pool-Request), which the front asked
//                      about (FrontContext watchRequest), has ended in w (its handler settled),
//                      or was never there.
//   workerGone(w)      sync, must be fast. w's process exited or is being killed: take it out of
//                      rotation at once (HAProxy: MAINT). Called before any respawn: from the
//                      worker's exit event itself (watchChild), or before the pool
//                      signals it; once per process. Also for a process that retired (w.retired:
//                      drained, it left its slot's port while still holding requests, and its
//                      slot has a new process): it exited, and what the front still held on it
//                      is over.
//   drain(w)           returns a Promise. Stop giving w new requests; resolve once nothing the
//                      front sent w still renders: what is left is long-lived (responses under
//                      way, streams), and w may finish it without its port. The pool then asks w
//                      to leave its port (it finishes what it holds, then exits) and may start
//                      the slot's next process at once; at the graceful timeout, SIGTERM.
//   stopping()         optional, sync. The whole pool is about to drain: announce it to whatever
//                      balances in front, stop accepting new clients once it has heard, and
//                      keep dispatching what is already queued. The drains of the stop follow
//                      at once; a front may hold them until its announcement is over.
//   stop()             async. Every worker is gone: release listeners and sockets.
//   status()           a FrontStatus (below): what `pool status`, /status and the status page
//                      show of the front, in a shape they read the same whatever the front.
//   checkScale(n)      optional, async. Called by pool.scale(n) before anything changes (no slot
//                      added or drained yet), growing or shrinking: throw a PoolError
//                      (POOL_E_BAD_OPTION) when the front cannot serve slots 1..n, and the scale
//                      is refused with it. Must change nothing itself: the scale may still be
//                      refused after it (a port taken, a stop), and no hook says so. (HAProxy: a
//                      worker<k> server for every new slot, sending to that slot's port.)
//   host               optional property: the address the front listens for clients on. The
//                      HAProxy agent (--agent-port) listens there too unless --agent-host says.

/**
 * Everything a front is given of the pool, built once by the Pool and
 * passed to start(): a front reads the pool through this and nothing else.
 *
 * @typedef {object} FrontContext
 * @property {object} logger the pool's logger (pino's interface: info, warn, error, debug, child)
 * @property {import('../observe/metrics').PoolMetrics} metrics the pool's metrics: a front adds
 *   its series to `metrics.registry` and counts its failures in `metrics.failures` (label
 *   `reason`), rather than listening to the pool's events around this interface
 * @property {() => object[]} workers a fresh snapshot of every slot, as `pool.workers()` returns:
 *   the supervisor's word on a worker (its pid, its `state`: 'busy' while it holds requests)
 * @property {(slot: number) => number} portOf the port slot `slot`'s worker listens on
 * @property {() => number} target the number of slots the pool wants now
 * @property {(worker: { slot: number, pid: number }, detail?: { refusals?: number, front?: string }) => void} workerRefusing
 *   the other way: tell the pool that `worker` (a snapshot the front was given) refused
 *   `refusals` connections in a row while the pool counts it ready (its app closed its listener
 *   without a word, say): the pool replaces it. A report about a process that no longer holds
 *   the slot is ignored.
 * @property {() => boolean} agentAsked whether an edge has asked the pool's agent about it
 *   (`--agent-port`): something in front watches the pool, and a stop is announced to it
 *   (`drain`) before the front stops taking requests
 * @property {(worker: { slot: number, pid: number }, id: string) => boolean} watchRequest
 *   the front closed its connection to `worker` for the request of this exchange (its X-Pool-Request; its client
 *   left, a limit ended it, its answer was malformed) while the app may still be working on it:
 *   the worker is asked to say when that request has ended, which the front then hears as
 *   workerRequestEnded(w, id). False when the worker cannot be asked (it is gone)
 */

/**
 * What a front says of itself (status()): the fields below, which the pool's status, `pool
 * status`, `pool ls` and the status page read alike for every front, and any of its own beside
 * them (the embedded balancer's budgets, HAProxy's servers), for `--json` and /status.
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

// The context for a pool; the functions are the pool's own, bound. A front started without a
// pool (tests, benches) gets none.
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
