'use strict'

// How a worker leaves: the app's processes go first, its output is written out, then it exits.

// app-processes.js is loaded only on the way out; a worker out of fds finds nothing to end.
const NOTHING_TO_END = { signalAppProcesses: () => [], endAppProcesses: async () => ({ terminated: [], killed: [] }) }

function appProcesses () {
  try { return require('./app-processes') } catch { return NOTHING_TO_END }
}

// process.exit() would drop what stdout/stderr (pipes) still hold: wait for it, at most OUTPUT_WAIT ms.
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

// On 'exit' the app's processes get SIGTERM (SIGKILL with the supervisor gone). EPIPE on stdout/stderr is
// ignored: thrown, it would end the worker midway and leave a process that ignores SIGTERM running.
function prepareForExit ({ supervisorGone }) {
  process.on('exit', () => appProcesses().signalAppProcesses(supervisorGone() ? 'SIGKILL' : 'SIGTERM'))
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})
}

// The end of a drain: exits once the app's processes are gone.
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

function parentGone (supervisorPid) {
  return supervisorPid !== null && process.ppid !== supervisorPid
}

function processes (n) { return n === 1 ? '1 process' : `${n} processes` }

module.exports = { OUTPUT_WAIT, exitAfterOutput, prepareForExit, leave, parentGone }
