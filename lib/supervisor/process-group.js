'use strict'

// Workers and the processes the app starts. Every worker is forked detached, so it leads its own
// session and process group (both numbered by its pid), and whatever the app spawns without
// `detached: true` joins that group. Signalling the group (kill(-pgid)) reaches those children
// too. A child may make a group of its own inside the worker's session (coreutils `timeout`
// does, and a shell with job control puts each job in one): the group signal misses it, so it
// is signalled by its pid, found in /proc as a member of the worker's session (a "stray").
// Children the app spawns with `detached: true` start a session of their own: out of reach.
//
// The danger is pid reuse. Once a group or session is empty, the kernel may give its number to a
// new process, which may lead a group of its own, and kill(-pgid) would then hit a stranger. The
// kernel frees a number only when no process uses it as its pid, group or session id, hence:
// - Until Node has reaped the worker, its pid, so its group's and session's number, cannot be
//   reused: signalling them is safe (signalWorker).
// - Once the worker is reaped, what is left of its session is a Remnant: the processes found in
//   it right at the reap. The number stays taken while one of them lives on in the session, so
//   every signal is sent only after checking that one does, in the same synchronous step: the
//   window left is the few microseconds between that check and kill(2).

const { readStat, sessionMembers } = require('../shared/proc')

const KILL_GRACE = 1000 // ms a SIGKILLed remnant has to be gone before we stop waiting for it
const SWEEP_EVERY = 50 // ms between looks at the remnants still pending: nothing tells us they went

// kill(-0) and kill(-1) would signal our own group and every process we may signal.
function isGroupId (pgid) { return Number.isInteger(pgid) && pgid > 1 }

function signalGroup (pgid, sig) {
  if (!isGroupId(pgid)) return false
  try { process.kill(-pgid, sig); return true } catch { return false }
}

// `child` is a worker's ChildProcess. Its whole session while it is not reaped, else nothing: its
// exit is being handled, and its session, if anything is left of it, is a Remnant's business.
function signalWorker (child, sig) {
  if (child.exitCode !== null || child.signalCode !== null) return false
  const sent = signalGroup(child.pid, sig)
  signalStrays(child.pid, sig) // the worker is not reaped before this step ends: still its session
  if (sent) return true
  try { return child.kill(sig) } catch { return false }
}

// The processes of session `sid` outside its leader's group, each by its pid, checked just
// before (same start time, still in the session). The caller knows the number is still the
// session's (its leader is unreaped, or a Remnant is pinned).
function signalStrays (sid, sig) {
  for (const [pid, startTime] of sessionMembers(sid) ?? []) {
    const stat = readStat(pid)
    if (!stat || stat.startTime !== startTime || stat.session !== sid || stat.pgrp === sid || stat.state === 'Z') {
      continue
    }
    try { process.kill(pid, sig) } catch {}
  }
}

// What is left of a worker's session after the worker itself exited.
class Remnant {
  constructor (pgid, members) {
    this.pgid = pgid
    this.members = members // pid → start time, as seen at the worker's reap
    this.killAt = Infinity
    this.killSent = false
    this.giveUpAt = Infinity
  }

  // One process seen at the reap (same pid, same start time) still lives in the worker's session,
  // so the number of the worker's group and session is still taken by the worker's processes.
  get pinned () {
    for (const [pid, startTime] of this.members) {
      const stat = readStat(pid)
      if (stat && stat.startTime === startTime && stat.state !== 'Z' && stat.session === this.pgid) return true
    }
    return false
  }

  signal (sig) {
    if (!this.pinned) return false
    signalStrays(this.pgid, sig)
    signalGroup(this.pgid, sig)
    return true
  }

  // Zombies wait for their new parent (init) to reap them; they run nothing and count as gone.
  // A session no longer pinned may be a stranger's by now: gone, as far as we may know.
  get gone () { return !this.pinned }
}

// Called from the worker's 'exit' listener, in the same step as Node's reap of it, so that the
// processes found in its session are its leftovers. They are sent SIGTERM at once; the Remnant
// returned (null when nothing is left) lets the supervisor SIGKILL them later. Without /proc
// (not Linux) the SIGTERM to the group is all we can safely do.
function captureRemnant (pgid) {
  try {
    if (!isGroupId(pgid)) return null
    const members = sessionMembers(pgid)
    if (members === null) { signalGroup(pgid, 'SIGTERM'); return null }
    if (members.size === 0) return null
    const remnant = new Remnant(pgid, members)
    remnant.signal('SIGTERM')
    return remnant
  } catch {
    return null
  }
}

// The remnants the pool still waits for: SIGKILL at --kill-timeout after their SIGTERM, and
// forgotten once gone, or KILL_GRACE after the SIGKILL if something survives even that (a
// process stuck in the kernel), so that nothing here can keep a stop from finishing.
class Remnants {
  constructor ({ logger, killTimeout }) {
    this.logger = logger
    this.killTimeout = killTimeout
    this.pending = new Set()
  }

  get size () { return this.pending.size }

  // `who` names the worker in log lines ('worker 3'); `slot` and `pid` are its log fields.
  add (remnant, { who, slot, pid }, now) {
    remnant.who = who
    remnant.fields = { slot, pid }
    remnant.killAt = now + this.killTimeout
    this.pending.add(remnant)
    const count = remnant.members.size
    this.logger.info({ event: 'leftovers', ...remnant.fields, processes: [...remnant.members.keys()] },
      `${who} (pid ${pid}) left ${count} process${count === 1 ? '' : 'es'} of its session running; SIGTERM`)
  }

  sweep (now) {
    for (const remnant of this.pending) {
      if (remnant.gone) { this.pending.delete(remnant); continue }
      if (!remnant.killSent && now >= remnant.killAt) {
        this.kill(remnant, now, `still running ${this.killTimeout} ms after SIGTERM`)
      } else if (now >= remnant.giveUpAt) {
        this.pending.delete(remnant)
        this.logger.error({ event: 'leftovers-stuck', ...remnant.fields },
          `processes left by ${remnant.who} survive SIGKILL; no longer waiting for them`)
      }
    }
  }

  // When the tick should sweep next: remnants are not our children, so only a look tells that
  // they are gone.
  nextSweep (now) { return this.pending.size > 0 ? now + SWEEP_EVERY : Infinity }

  killAll (now) {
    for (const remnant of this.pending) if (!remnant.killSent) this.kill(remnant, now, 'the pool is killed')
  }

  kill (remnant, now, why) {
    remnant.killSent = true
    remnant.giveUpAt = now + KILL_GRACE
    remnant.signal('SIGKILL')
    this.logger.warn({ event: 'leftovers-killed', ...remnant.fields },
      `processes left by ${remnant.who}: ${why}; SIGKILL`)
  }
}

module.exports = { signalWorker, captureRemnant, Remnants }
