'use strict'

// What a gone pool left running: ended by its reaper when its supervisor dies (findOrphans), and by the next
// pool on the same ports before it binds them (endLeftovers). Workers carry POOL_SUPERVISOR="<pid>:<start time>"
// and PORT, inherited by the app's processes: one whose supervisor no longer runs (pid and start time, so reuse
// does not count), on one of our ports, marks that supervisor gone. Its leftovers: every process it marked and
// every process in the session of one, but never a session led by an unmarked process, nor our own.
// SIGTERM, then SIGKILL `killTimeout` ms later (endProcesses); one log line.

const fs = require('node:fs')
const { readStat } = require('../shared/proc')

const MARK = 'POOL_SUPERVISOR'
const POLL = 50 // ms between looks at what is left
const KILL_WAIT = 1000 // ms the SIGKILLed have to be gone before the pool goes on regardless

let ownMark = null

function supervisorMark () {
  if (ownMark === null) ownMark = `${process.pid}:${readStat(process.pid)?.startTime ?? ''}`
  return ownMark
}

// A zombie does not run.
function supervisorRuns (mark) {
  const [pid, startTime] = mark.split(':')
  const stat = readStat(Number(pid))
  return stat !== null && stat.state !== 'Z' && stat.startTime === startTime
}

// → { supervisor, port }, or null: no mark, or not ours to read.
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

// → [{ pid, startTime, session }] but ours, or null without /proc.
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

// → { all, marked } outside our session, marked: those with another supervisor's mark; null without /proc.
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

// The reaper's sweep once supervisor `mark` is gone (its pipe closed; it may not be reaped yet).
function findOrphans ({ mark }) {
  const seen = scan()
  return seen === null ? NOTHING : leftoversOf(new Set([mark]), seen)
}

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

// Only if still the process found (same start time): its pid may have been reused.
function signalFound (p, sig) {
  const stat = readStat(p.pid)
  if (!stat || stat.state === 'Z' || stat.startTime !== p.startTime) return false
  try { process.kill(p.pid, sig); return true } catch { return false }
}

// Gone means its ports are free: a zombie whose other threads still exit may hold them.
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

// Resolves once gone (or KILL_WAIT after the SIGKILL): { ended: [pids], killed: [pids] }.
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

// Resolves { ended, killed, supervisors } (pids).
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

// Processes marked by a supervisor no longer running, for test/no-leftovers.js.
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
