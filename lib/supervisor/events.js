'use strict'

// The loop's events, handled in order by the tick (Pool#handleEvent). A slot's event carries `handle` and
// `child`; a canary's, `canary` and `child`; the pool's commands neither.

const EVENT = Object.freeze({
  STOP: 'stop', //                     { timeout }: drain everything, then stop
  KILL: 'kill', //                     SIGKILL everything now
  // A child's, worker or canary (watchChild).
  MESSAGE: 'message', //               { message }: what it sent, checked at the door
  CHANNEL_BROKEN: 'channel-broken', // { problem, pid }: what it wrote is no frame
  EXIT: 'exit', //                     { code, signal, remnant, who, slot, pid }, once its output is read
  SPAWN_ERROR: 'spawn-error', //       { error }: the fork failed, no process ran
  // A slot's worker's, from the pool or a front.
  WARMED: 'warmed', //                 its warm-up requests were answered
  WARMUP_FAILED: 'warmup-failed', //   { error }
  RELEASED: 'released', //             the fronts hold no request of it any more (its drain)
  RECYCLE: 'recycle', //               pool.recycle(slot)
  REFUSING: 'refusing' //              { refusals, front }: a front found its port refusing
})

const CHILD_EVENTS = Object.freeze([EVENT.MESSAGE, EVENT.CHANNEL_BROKEN, EVENT.EXIT, EVENT.SPAWN_ERROR])

module.exports = { EVENT, CHILD_EVENTS }
