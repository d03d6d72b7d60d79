'use strict'

// How a worker leaves: the app's processes go first, and the worker's output is written out
// before the process exits.

// The app's processes (app-processes.js, and the /proc reading under it) are looked for only on
// the way out: loaded then, not by every idle worker. A worker out of file descriptors can load
// it no more than it can read /proc: it then finds nothing to end, as it would have anyway.
const NOTHING_TO_END = { signalAppProcesses: () => [], endAppProcesses: async () => ({ terminated: [], killed: [] }) }

function appProcesses () {
  try { return require('./app-processes') } catch { return NOTHING_TO_END }
}

// stdout and stderr are pipes to the supervisor, and a write the pipe cannot take at once waits
// in this process: process.exit() would drop it. Leave once both have written out what they
// hold, or after OUTPUT_WAIT ms if the supervisor is not reading (the pool is stopping anyway).
const OUTPUT_WAIT = 1000

function afterOutput (fn) {
  let left = 2
  const timer = setTimeout(fn, OUTPUT_WAIT)
  const once = () => { if (--left === 0) { clearTimeout(timer); fn() } }
  for (const stream of [process.stdout, process.stderr]) {
    if (stream.writableLength === 0 || stream.destroyed || !stream.writable) once()
    else stream.write('', once)
  }
}

function exitAfterOutput (code) {
  afterOutput(() => process.exit(code))
}

// Leaving in a hurry (a crash, the app's own process.exit()): the app's processes get SIGTERM on
// the way out, and the supervisor SIGKILLs what ignores it; with the supervisor gone
// (`supervisorGone()`), SIGKILL at once.
// stdout and stderr are pipes the supervisor reads: a write failing there (EPIPE) means it is
// gone. Thrown, that error would end this worker on the spot, in the middle of ending the app's
// processes, and leave one that ignores SIGTERM running.
function prepareForExit ({ supervisorGone }) {
  process.on('exit', () => appProcesses().signalAppProcesses(supervisorGone() ? 'SIGKILL' : 'SIGTERM'))
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})
}

// The end of a drain: the app's processes go first, and the worker exits once they are gone
// (left to the supervisor, they would outlive it if it died meanwhile).
async function leave ({ grace, logger }) {
  const {
    terminated,
    killed
  } = await appProcesses().endAppProcesses({ grace }).catch(() => ({ terminated: [], killed: [] }))
  if (terminated.length > 0) {
    logger().info({ event: 'leftovers', processes: terminated },
      `${processes(terminated.length)} the app started still ran as the worker left; SIGTERM`)
  }
  if (killed.length > 0) {
    logger().warn({ event: 'leftovers-killed', processes: killed },
      `${processes(killed.length)} the app started still ran ${grace} ms after SIGTERM; SIGKILL`)
  }
  exitAfterOutput(0)
}

// The process that forked this worker is no longer its parent (when a pool forked it).
function parentGone (supervisorPid) {
  return supervisorPid !== null && process.ppid !== supervisorPid
}

function processes (n) { return n === 1 ? '1 process' : `${n} processes` }

module.exports = { OUTPUT_WAIT, exitAfterOutput, prepareForExit, leave, parentGone }
