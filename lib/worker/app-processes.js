'use strict'

// The app's processes: every member of the worker's session (it leads one, forked detached) but itself,
// process groups included. The worker ends them itself: its supervisor may be gone (SIGKILLed in a reload).

const { sessionMembers, readStat } = require('../shared/proc')

const POLL = 50 // ms between looks at what is left
const KILL_WAIT = 1000 // ms the SIGKILLed have to be gone before we stop waiting for them

// pid → start time; null without /proc.
function appProcesses () {
  const members = sessionMembers(process.pid)
  if (members !== null) members.delete(process.pid)
  return members
}

// Only if still the process seen: a pid freed meanwhile may be a stranger's.
function signalMember (pid, startTime, sig) {
  const stat = readStat(pid)
  if (!stat || stat.startTime !== startTime || stat.session !== process.pid || stat.state === 'Z') return false
  try { process.kill(pid, sig); return true } catch { return false }
}

function signalAll (members, sig) {
  const signalled = []
  for (const [pid, startTime] of members) if (signalMember(pid, startTime, sig)) signalled.push(pid)
  return signalled
}

// Synchronous, for process 'exit'.
function signalAppProcesses (sig) {
  const members = appProcesses()
  return members ? signalAll(members, sig) : []
}

// SIGTERM to each (and to any started meanwhile), SIGKILL to what is left after `grace` ms.
// Resolves once none is left: { terminated: [pids], killed: [pids] }.
async function endAppProcesses ({ grace }) {
  const termed = new Map() // pid → start time
  const terminated = []
  const deadline = performance.now() + grace
  let left = appProcesses()
  while (left !== null && left.size > 0 && performance.now() < deadline) {
    for (const [pid, startTime] of left) {
      if (termed.get(pid) === startTime) continue
      termed.set(pid, startTime)
      if (signalMember(pid, startTime, 'SIGTERM')) terminated.push(pid)
    }
    await sleep(POLL)
    left = appProcesses()
  }
  const killed = left ? signalAll(left, 'SIGKILL') : []
  // So that "the worker exited" means "the app's processes are gone"; bounded for one stuck in the kernel.
  const until = performance.now() + KILL_WAIT
  while (killed.length > 0 && appProcesses().size > 0 && performance.now() < until) await sleep(POLL)
  return { terminated, killed }
}

function sleep (ms) { return new Promise((resolve) => setTimeout(resolve, ms)) }

module.exports = { endAppProcesses, signalAppProcesses }
