'use strict'

// What a pool that is gone left running: ended by its reaper the moment its supervisor dies
// (findOrphans), and by the next pool on the same ports before it binds
// them (endLeftovers), for what escaped the reaper: a reaper killed with its supervisor, a
// process started after its sweep.
//
// How they are found (Linux, /proc): every worker is forked with POOL_SUPERVISOR="<pid>:<start
// time>" of its supervisor and PORT=<its slot's port> in its environment, which the app's
// processes inherit unless the app gives them another environment. A process so marked whose
// supervisor no longer runs (no process has that pid with that start time, so a reused pid does
// not count), with a PORT among this pool's worker ports, belongs to a pool that is gone from
// these ports. Then every process marked by that same dead supervisor is a leftover, and so is
// every process in the session of one: a worker's session holds the app's processes even when
// they were given another environment, and a marked process still in it keeps the session's
// number from being reused. A session whose leader still runs unmarked (a terminal's shell
// that somehow got the mark) is never touched, nor is this process's own session.
//
// They get SIGTERM, and SIGKILL `killTimeout` ms later if still there (endProcesses). The pool
// says so in one log line, and starts.

const fs = require('node:fs')
const { readStat } = require('../shared/proc')

const MARK = 'POOL_SUPERVISOR'
const POLL = 50 // ms between looks at what is left
const KILL_WAIT = 1000 // ms the SIGKILLed have to be gone before the pool goes on regardless

let ownMark = null

// This process's mark, "<pid>:<start time>", for the workers it forks.
function supervisorMark () {
  if (ownMark === null) ownMark = `${process.pid}:${readStat(process.pid)?.startTime ?? ''}`
  return ownMark
}

// The supervisor a mark names still runs (a zombie, dead but not yet reaped, does not).
function supervisorRuns (mark) {
  const [pid, startTime] = mark.split(':')
  const stat = readStat(Number(pid))
  return stat !== null && stat.state !== 'Z' && stat.startTime === startTime
}

// { supervisor, port } from a process's environment, or null when it carries no mark (or is
// not ours to read: another user's).
function markOf (pid) {
  let text
  try { text = fs.readFileSync(`/proc/${pid}/environ`, 'latin1') } catch { return null }
  if (!text.includes(`${MARK}=`)) return null
  let supervisor = null
  let port = null
  for (const entry of text.split('\0')) {
    if (entry.startsWith(`${MARK}=`)) supervisor = entry.slice(MARK.length + 1)
    else if (entry.startsWith('PORT=')) port = Number(entry.slice(5))
  }
  return supervisor ? { supervisor, port } : null
}

// Every live process: { pid, startTime, session }, or null without /proc.
function processes () {
  let names
  try { names = fs.readdirSync('/proc') } catch { return null }
  const list = []
  for (const name of names) {
    const pid = Number(name)
    if (!Number.isInteger(pid) || pid === process.pid) continue
    const stat = readStat(pid)
    if (stat && stat.state !== 'Z') list.push({ pid, startTime: stat.startTime, session: stat.session })
  }
  return list
}

// Every live process but this one and its session's, and those of them carrying a mark not this
// process's own: { all, marked: [{ pid, startTime, session, supervisor, port }] }, or null
// without /proc.
function scan () {
  const all = processes()
  const own = readStat(process.pid)
  if (all === null || own === null) return null
  const marked = []
  for (const p of all) {
    if (p.session === own.session) continue
    const mark = markOf(p.pid)
    if (mark && mark.supervisor !== supervisorMark()) marked.push({ ...p, ...mark })
  }
  return { all: all.filter((p) => p.session !== own.session), marked }
}

const NOTHING = Object.freeze({ found: [], supervisors: [] })

// The leftovers of pools gone from `ports`: { found: [{ pid, startTime }], supervisors: [pid] }.
function findLeftovers ({ ports }) {
  const seen = scan()
  if (seen === null) return NOTHING
  const onOurPorts = new Set(ports)
  const gone = new Set(seen.marked.filter((p) => onOurPorts.has(p.port) &&
    !supervisorRuns(p.supervisor)).map((p) => p.supervisor))
  return leftoversOf(gone, seen)
}

// What the supervisor marked `mark` left: its reaper's sweep once that supervisor is gone (known
// by its end of a pipe closing: it need not be reaped yet). Same shape as findLeftovers.
function findOrphans ({ mark }) {
  const seen = scan()
  return seen === null ? NOTHING : leftoversOf(new Set([mark]), seen)
}

// Every process marked by a supervisor in `gone`, and every process in the session of one, but
// a session whose leader runs unmarked, or marked by another.
function leftoversOf (gone, { all, marked }) {
  if (gone.size === 0) return NOTHING
  const byPid = new Map(all.map((p) => [p.pid, p]))
  const markedBy = new Map(marked.map((p) => [p.pid, p.supervisor]))
  const sessions = new Set()
  for (const p of marked) {
    if (!gone.has(p.supervisor)) continue
    const leader = byPid.get(p.session)
    if (leader && !gone.has(markedBy.get(leader.pid))) continue // a session not of that pool
    sessions.add(p.session)
  }
  const found = all.filter((p) => sessions.has(p.session) || gone.has(markedBy.get(p.pid)))
  return { found, supervisors: [...gone].map((mark) => Number(mark.split(':')[0])) }
}

// Signals `p` only if it is still the process found (same start time): its pid may have been
// freed and reused meanwhile.
function signalFound (p, sig) {
  const stat = readStat(p.pid)
  if (!stat || stat.state === 'Z' || stat.startTime !== p.startTime) return false
  try { process.kill(p.pid, sig); return true } catch { return false }
}

// Gone means its files are closed, so its ports free: a zombie whose other threads are still
// exiting (a Node process has several) may still hold them.
function stillThere (found) {
  return found.filter((p) => {
    const stat = readStat(p.pid)
    if (!stat || stat.startTime !== p.startTime) return false
    return stat.state !== 'Z' || threadsLeft(p.pid)
  })
}

function threadsLeft (pid) {
  let tasks
  try { tasks = fs.readdirSync(`/proc/${pid}/task`) } catch { return false }
  return tasks.some((tid) => {
    try {
      return !/^[ZX]/.test(fs.readFileSync(`/proc/${pid}/task/${tid}/stat`,
        'latin1').split(') ')[1])
    } catch { return false }
  })
}

// SIGTERM to each process found, SIGKILL `killTimeout` ms later to what is still there; resolves
// once they are gone (or KILL_WAIT after the SIGKILL): { ended: [pids], killed: [pids] }.
async function endProcesses (found, { killTimeout }) {
  const ended = found.filter((p) => signalFound(p, 'SIGTERM'))
  let left = stillThere(ended)
  const deadline = performance.now() + killTimeout
  while (left.length > 0 && performance.now() < deadline) {
    await sleep(POLL)
    left = stillThere(left)
  }
  const killed = left.filter((p) => signalFound(p, 'SIGKILL'))
  const until = performance.now() + KILL_WAIT
  while (stillThere(killed).length > 0 && performance.now() < until) await sleep(POLL)
  return { ended: ended.map((p) => p.pid), killed: killed.map((p) => p.pid) }
}

// Finds and ends the leftovers on `ports`; logs one line when there were any. Resolves
// { ended: [pids], killed: [pids], supervisors: [pids] }.
async function endLeftovers ({ ports, killTimeout, logger }) {
  const { found, supervisors } = findLeftovers({ ports })
  if (found.length === 0) return { ended: [], killed: [], supervisors }
  const { ended, killed } = await endProcesses(found, { killTimeout })
  logger.warn({ event: 'leftovers-ended', processes: ended, killed, supervisors, ports: range(ports) },
    `ended ${processCount(ended.length)} left running on ports ${range(ports)} by a pool that is gone ` +
      `(supervisor pid ${supervisors.join(', ')}): ${ended.join(', ')}` +
      (killed.length > 0 ? `; ${killed.length} needed SIGKILL` : ''))
  return { ended, killed, supervisors }
}

function processCount (n) { return n === 1 ? '1 process' : `${n} processes` }

function range (ports) {
  return ports.length === 1 ? String(ports[0]) : `${ports[0]}-${ports[ports.length - 1]}`
}

function sleep (ms) { return new Promise((resolve) => setTimeout(resolve, ms)) }

// Every process still running that a supervisor no longer running forked, or that inherited
// its mark: [{ pid, startTime, supervisor, port }]. The suite checks with it, after its last
// test, that no pool left anything behind (test/no-leftovers.js).
function orphansOfDeadSupervisors () {
  const all = processes() ?? []
  return all.map((p) => ({ ...p, ...markOf(p.pid) })).filter((p) => p.supervisor && !supervisorRuns(p.supervisor))
}

module.exports = {
  MARK,
  supervisorMark,
  findLeftovers,
  findOrphans,
  endProcesses,
  endLeftovers,
  orphansOfDeadSupervisors,
  processCount
}
