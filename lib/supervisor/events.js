'use strict'

// The events of the supervisor's loop. Each source records what happened as one of these and
// wakes the loop; the tick handles them in order (Pool#handleEvent, one handler per kind of
// subject). An event about a slot's process carries its `handle` and `child`; about a reload's
// canary, its `canary` and `child`; the pool's own commands carry neither.

const EVENT = Object.freeze({
  // The pool's commands.
  STOP: 'stop', //                     { timeout }: drain everything, then stop
  KILL: 'kill', //                     SIGKILL everything now
  // A child's, a slot's worker or a canary (watchChild).
  MESSAGE: 'message', //               { message }: what it sent, checked at the door
  CHANNEL_BROKEN: 'channel-broken', // { problem, pid }: what it wrote is no frame
  EXIT: 'exit', //                     { code, signal, remnant, who, slot, pid }, once its output is read
  SPAWN_ERROR: 'spawn-error', //       { error }: the fork failed, no process ran
  // About a slot's worker, from the pool's own work or a front.
  WARMED: 'warmed', //                 its warm-up requests were answered
  WARMUP_FAILED: 'warmup-failed', //   { error }
  RELEASED: 'released', //             the fronts hold no request of it any more (its drain)
  RECYCLE: 'recycle', //               pool.recycle(slot)
  REFUSING: 'refusing' //              { refusals, front }: a front found its port refusing
})

// What a child can tell the loop, a slot's worker and a canary alike.
const CHILD_EVENTS = Object.freeze([EVENT.MESSAGE, EVENT.CHANNEL_BROKEN, EVENT.EXIT, EVENT.SPAWN_ERROR])

module.exports = { EVENT, CHILD_EVENTS }
