'use strict'

// No worker outlives its supervisor, even one whose event loop never comes back (a render in an
// endless loop, a synchronous wait): such a worker can notice nothing, and with its supervisor
// gone nobody would ever kill it or free its port. So every worker runs this watchdog in a
// thread of its own, with an event loop of its own, which every POLL ms checks that the worker's
// parent is still the supervisor that forked it. A process whose parent dies is handed to a new
// parent (init, or a subreaper) at once, before the dead parent's pid can be reused: a changed
// parent pid always means the supervisor is gone.
//
// Then, from this thread: the main thread is told (if its loop runs, it closes its server and
// the port is free at once), the app's processes get SIGTERM, those left `grace` ms
// (--kill-timeout) later get SIGKILL, and as soon as none is left the worker's group, the
// worker included, gets SIGKILL (./app-processes.js). The main thread must not exit by itself
// meanwhile: this thread would die with it, and an app process ignoring SIGTERM would live on.
//
// The main thread can tell the watchdog sooner (`supervisorGone()`: its channel to the
// supervisor closed). The thread costs about 9 MB of memory per worker (a bare worker: 59 MB
// instead of 50) and a getppid(2) every POLL ms.

const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads')
const { endAppProcesses } = require('./app-processes')

const POLL = 200 // ms between checks of the parent: how late a SIGKILLed supervisor is noticed
const GONE = 'pool-supervisor-gone' // main thread → watchdog
const ORPHANED = 'pool-orphaned' // watchdog → main thread
const WATCHING = 'pool-watching' // watchdog → main thread: it runs and checks the parent

// In the worker's main thread. `onOrphaned` runs there if its loop still runs; `onFailed(err)`
// if the thread fails to start or dies. Returns null when no thread could be created. Either
// way the worker goes on without a watchdog, and its main thread ends it when its channel to the
// supervisor closes, if its loop still runs. A thread fails to start when the process's working
// directory has been removed: Node's thread bootstrap reads it (uv_cwd, ENOENT).
function startWatchdog ({ supervisorPid, grace, onOrphaned = () => {}, onFailed = () => {} }) {
  let thread
  try {
    // execArgv []: not the app's node flags (a -r preload of an APM agent has no business here).
    thread = new Worker(__filename, { workerData: { poolWatchdog: { supervisorPid, grace } }, execArgv: [], stdout: true, stderr: true })
  } catch (err) {
    onFailed(err)
    return null
  }
  // Only a thread that said it watches is counted on: one still starting (or that never will)
  // must not keep the main thread from taking the worker down itself.
  let running = false
  thread.on('message', (m) => {
    if (m === WATCHING) running = true
    else if (m === ORPHANED) onOrphaned()
  })
  // A watchdog that fails leaves the worker as it was without one.
  thread.on('error', (err) => {
    running = false
    onFailed(err)
  })
  thread.on('exit', () => { running = false })
  // Never what keeps a worker alive; after the listeners, since a 'message' listener refs.
  thread.unref()
  return {
    // Returns false when no watchdog runs (yet, or any more) to take the worker down.
    supervisorGone () {
      if (running) thread.postMessage(GONE)
      return running
    }
  }
}

// In the watchdog's thread.
function watch ({ supervisorPid, grace }) {
  let orphaned = false
  const gone = async () => {
    if (orphaned) return
    orphaned = true
    clearInterval(timer)
    parentPort.postMessage(ORPHANED)
    try {
      await endAppProcesses({ grace })
    } finally {
      process.kill(-process.pid, 'SIGKILL') // the group is ours while we run: never a stranger's
    }
  }
  const check = () => { if (process.ppid !== supervisorPid) gone() }
  const timer = setInterval(check, POLL)
  parentPort.on('message', (m) => { if (m === GONE) gone() })
  parentPort.postMessage(WATCHING)
  check() // the supervisor may be gone before this thread started
}

if (!isMainThread && workerData?.poolWatchdog) watch(workerData.poolWatchdog)

module.exports = { startWatchdog }
