#!/bin/sh
':' /*- Read by /bin/sh first: a few lines of POSIX shell, then the Node.js program.
if [ "$$" = 1 ] && [ "$1" = start ]; then
  node "$0" "$@" &
  pool=$!
  for signal in TERM INT HUP TTIN TTOU; do
    trap "kill -$signal $pool 2>/dev/null" "$signal"
  done
  while :; do
    wait "$pool"
    status=$?
    kill -0 "$pool" 2>/dev/null || exit "$status"
  done
fi
exec node "$0" "$@"
*/
'use strict'

// `pool start` as a container's first process (PID 1) must reap the processes orphaned under it,
// or they stay zombies for good; Node cannot (libuv waits only for the children it started, and
// Node 20 has no execve to hand PID 1 to something that can). So the shell lines above run first:
// as PID 1 for `start`, the shell stays PID 1, runs the pool as its only child, passes on the
// signals the pool acts on, and exits with the pool's exit status (128 + N when a signal N ended
// it); every orphan that ends meanwhile is reaped by its `wait`, which takes any child. Anywhere
// else the shell execs node at once: the same process as before, one exec later. To Node, the
// shell lines are a string and a comment.

// This process is pool's own, so it may have what `node --expose-gc` gives (globalThis.gc), set
// up here before anything else is loaded: the embedded balancer uses it to hand the memory of a
// burst of request bodies back to the system once the burst is over.
// The flag only adds `gc` to contexts created after it is set, so it is set for one new context
// and cleared again. Without it (a V8 that refuses) pool works the same; memory comes back when
// V8 next collects on its own.
if (typeof globalThis.gc !== 'function') {
  const v8 = require('node:v8')
  try {
    v8.setFlagsFromString('--expose-gc')
    globalThis.gc = require('node:vm').runInNewContext('gc')
  } catch {} finally {
    v8.setFlagsFromString('--no-expose-gc')
  }
}

require('../lib/cli').run(process.argv.slice(2))
