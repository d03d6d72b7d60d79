'use strict'

// A "front" decides how requests reach the workers: the embedded balancer, HAProxy driven over
// its runtime API, or none. The supervisor owns the workers' lifecycle and tells every front
// about it through this small interface, so reloads, scaling and crash handling are written once
// and behave the same whatever sits in front.
//
// The `worker` passed to each hook is a plain snapshot: { slot, pid, host, port, name, state }.
// `name` is the HAProxy server name, `worker<slot>`.
//
//   start(pool)        async. Called once by pool.start() before any worker is forked. Bind
//                      listeners, connect, verify configuration. Throw a PoolError to abort.
//                      `pool.metrics` (lib/observe/metrics.js) is the pool's Prometheus registry
//                      (`registry`) and its `failures` counter: a front adds its series there
//                      rather than listening to the pool's events around this interface.
//   workerReady(w)     sync. w listens and may be given requests now.
//   workerIdle(w)      optional, sync. w reported the end of a request (it finished its response,
//                      or its handler's work after the client's connection closed).
//   workerGone(w)      sync, must be fast. w's process exited or is being killed: take it out of
//                      rotation at once (HAProxy: MAINT). Called before any respawn.
//   drain(w)           returns a Promise. Stop giving w new requests; resolve once the front
//                      holds no request in flight to w. The pool waits for every front's drain
//                      and for the worker to report idle before it stops w, and gives up waiting
//                      at the graceful timeout.
//   stopping()         optional, sync. The whole pool is about to drain: stop accepting new
//                      clients, but keep dispatching what is already queued.
//   stop()             async. Every worker is gone: release listeners and sockets.
//   status()           a JSON-able object describing the front, for `pool status`: at least
//                      { type }, and { queue } (requests waiting for a worker) if it queues.

class NoFront {
  constructor () { this.name = 'none' }
  async start () {}
  workerReady () {}
  workerIdle () {}
  workerGone () {}
  async drain () {}
  stopping () {}
  async stop () {}
  status () { return { type: 'none' } }
}

module.exports = { NoFront }
