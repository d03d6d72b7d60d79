'use strict'

// Signalling a worker and what its app started. Workers are forked detached: each leads a session and group
// numbered by its pid, so kill(-pgid) reaches the app's children; those in a group of their own inside the
// session (`timeout`, shell jobs) are "strays", signalled by pid via /proc. `detached: true` ones are out of reach.
// Pid reuse: the kernel frees a number only once no process uses it as pid, group or session id. Before the
// reap the worker pins it (signalWorker); after, a Remnant signals only after checking, in the same step, that
// a process seen at the reap still lives in the session.

const { readStat, sessionMembers } = require('../shared/proc')

const KILL_GRACE = 1000 // ms a SIGKILLed remnant has to be gone before we stop waiting for it
const SWEEP_EVERY = 50 // ms between looks at the remnants still pending: nothing tells us they went

// kill(-0) and kill(-1) would signal our own group and every process we may signal.
function isGroupId (pgid) { return Number.isInteger(pgid) && pgid > 1 }

function signalGroup (pgid, sig) {
  if (!isGroupId(pgid)) return false
  try { process.kill(-pgid, sig); return true } catch { return false }
}

// Signals a worker's (ChildProcess) whole session while it is unreaped; after that, a Remnant's business.
function signalWorker (child, sig) {
  if (child.exitCode !== null || child.signalCode !== null) return false
  const sent = signalGroup(child.pid, sig)
  signalStrays(child.pid, sig) // the worker is not reaped before this step ends: still its session
  if (sent) return true
  try { return child.kill(sig) } catch { return false }
}

// Session `sid`'s processes outside its leader's group, each rechecked first. The caller knows `sid` is pinned.
function signalStrays (sid, sig) {
  for (const [pid, startTime] of sessionMembers(sid) ?? []) {
    const stat = readStat(pid)
    if (!stat || stat.startTime !== startTime || stat.session !== sid || stat.pgrp === sid || stat.state === 'Z') {
      continue
    }
    try { process.kill(pid, sig) } catch {}
  }
}

class Remnant {
  constructor (pgid, members) {
    this.pgid = pgid
    this.members = members // pid → start time, as seen at the worker's reap
    this.killAt = Infinity
    this.killSent = false
    this.giveUpAt = Infinity
  }

  // A process seen at the reap (same pid and start time) still lives in the session: the number is still ours.
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

  // Zombies count as gone; an unpinned session may be a stranger's by now.
  get gone () { return !this.pinned }
}

// Call from the worker's 'exit' listener (same step as the reap): SIGTERMs the session's leftovers and returns
// their Remnant, or null. Without /proc only the group's SIGTERM is safe.
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

// Remnants awaited: SIGKILL --kill-timeout after SIGTERM, forgotten once gone or KILL_GRACE after the SIGKILL
// (a process stuck in the kernel must not hold up a stop).
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

  // Remnants are not our children: only a look tells they are gone.
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
