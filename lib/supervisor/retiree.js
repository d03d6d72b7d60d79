'use strict'

// A drained worker that left its slot's port while requests were still open on it (streams of
// tokens, server-sent events): it finishes them outside the slot, whose next process is already
// booting, within the deadlines its drain had: SIGTERM at the graceful timeout, SIGKILL
// --kill-timeout later. The pool routes its events here (and what it says of its requests to the
// fronts), asks what is due each tick, and forgets it when it exits.

class Retiree {
  // from: what WorkerHandle#retired hands over. signal(child, sig): the pool's.
  constructor ({ child, pid, slot, reason, termAt, killAt, termSent }, { signal }) {
    this.child = child
    this.pid = pid
    this.slot = slot
    this.reason = reason
    this.termAt = termAt
    this.killAt = killAt
    this.termSent = termSent
    this.killed = false
    this.signalChild = signal
  }

  // The snapshot the fronts know it by.
  worker () { return { slot: this.slot, pid: this.pid, name: `worker${this.slot}`, retired: true } }

  status (now) {
    return { slot: this.slot, pid: this.pid, reason: this.reason, termIn: Math.max(0, Math.round(this.termAt - now)) }
  }

  // A stop: its deadlines come no later than the stop's.
  hurry (termAt, killTimeout) {
    this.termAt = Math.min(this.termAt, termAt)
    this.killAt = Math.min(this.killAt, this.termAt + killTimeout)
  }

  nextDeadline () {
    if (this.killed) return Infinity
    return this.termSent ? this.killAt : this.termAt
  }

  // Signals what is due; returns whether it did.
  carryOut (now, report) {
    if (this.killed) return false
    if (now >= this.killAt) {
      report.retireeSignalled(this, 'SIGKILL')
      this.kill()
      return true
    }
    if (now < this.termAt || this.termSent) return false
    this.termSent = true
    report.retireeSignalled(this, 'SIGTERM')
    this.signalChild(this.child, 'SIGTERM')
    return true
  }

  kill () {
    if (this.killed) return
    this.killed = true
    this.signalChild(this.child, 'SIGKILL')
  }
}

module.exports = { Retiree }
