'use strict'

// The processes the app started, seen from inside the worker: every process of the worker's
// session but the worker itself. The worker leads its session (the supervisor forks it
// detached); whatever the app starts without `detached: true` stays in it, even one
// that makes a process group of its own (coreutils `timeout`, a shell's job control). While the
// worker lives, the session's number is its pid and cannot be anybody else's, so whatever is
// found in it is the app's.
//
// A worker ends them itself before it leaves: when its drain is over, and when its supervisor is
// gone and its loop still runs. It cannot leave that to the supervisor, which may itself be
// gone by then: a supervisor SIGKILLed during a reload left behind the app's processes of every
// worker that had finished its drain and exited, trusting the supervisor with them.

const { sessionMembers, readStat } = require('../shared/proc')

const POLL = 50 // ms between looks at what is left
const KILL_WAIT = 1000 // ms the SIGKILLed have to be gone before we stop waiting for them

// pid → start time. null without /proc (not Linux).
function appProcesses () {
  const members = sessionMembers(process.pid)
  if (members !== null) members.delete(process.pid)
  return members
}

// Signals `pid` only if it is still the process seen (same start time, still in our session):
// a pid freed meanwhile may already be a stranger's.
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

// `sig` to each at once; synchronous, for a worker leaving in a hurry (process 'exit': a crash,
// the app's own process.exit()).
function signalAppProcesses (sig) {
  const members = appProcesses()
  return members ? signalAll(members, sig) : []
}

// SIGTERM to every process of the app (and to any it starts meanwhile); SIGKILL to whatever is
// left `grace` ms later. Resolves as soon as none is left: { terminated: [pids], killed: [pids] },
// both empty when there was nothing to end.
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
  // What got SIGKILL goes within moments; waiting for it keeps "the worker exited" meaning "the
  // app's processes are gone", and a process stuck in the kernel cannot hold us for long.
  const until = performance.now() + KILL_WAIT
  while (killed.length > 0 && appProcesses().size > 0 && performance.now() < until) await sleep(POLL)
  return { terminated, killed }
}

function sleep (ms) { return new Promise((resolve) => setTimeout(resolve, ms)) }

module.exports = { endAppProcesses, signalAppProcesses }
