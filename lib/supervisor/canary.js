'use strict'

// A reload's first step: one process of the new code on an ephemeral port, outside every slot and front, so
// broken code costs no capacity. The supervisor forks it, routes its events here, asks `check`, then kills it.

class Canary {
  constructor ({ now, bootTimeout, signal }) {
    this.child = null // forked()
    this.spawnedAt = now
    this.bootTimeout = bootTimeout
    this.signalChild = signal
    this.readyAt = null
    this.error = null // the app's own boot error, if it sent one
    this.exit = null // { code, signal }
    this.killed = false
  }

  get alive () { return this.exit === null }
  get pid () { return this.child?.pid }

  forked (child) { this.child = child }

  onMessage (m, now) {
    if (m.type === 'ready' && this.readyAt === null) this.readyAt = now
    if (m.type === 'boot-error') this.error = m.error
  }

  onExit (code, signal) { this.exit = { code, signal } }

  // It cannot be supervised: failed.
  onChannelBroken (problem) {
    this.error = this.error || { message: `the new code broke the pool channel: ${problem}` }
    this.kill()
  }

  // Its fork failed (EMFILE, EAGAIN): no process ran.
  onSpawnError (err) {
    this.error = { message: `cannot start a process of the new code: ${err.message}`, code: err.code }
    this.exit = { code: null, signal: null }
  }

  // 'booting', 'ready', or { failed: { message, stack } }; a question only.
  check (now) {
    if (this.readyAt !== null) return 'ready'
    if (this.exit) {
      return {
        failed: this.error || { message: `the new code exited before becoming ready (${describeExit(this.exit)})` }
      }
    }
    if (now - this.spawnedAt > this.bootTimeout) {
      return { failed: { message: `the new code was not ready within ${this.bootTimeout} ms (boot timeout)` } }
    }
    return 'booting'
  }

  // When check() answers failed if nothing comes first: the first ms past the boot timeout.
  deadline () { return this.readyAt === null && !this.exit ? this.spawnedAt + this.bootTimeout + 1 : Infinity }

  // Once: a canary killed is not signalled again while its exit is on the way.
  kill () {
    if (!this.alive || this.killed) return
    this.killed = true
    this.signalChild(this.child, 'SIGKILL')
  }
}

function describeExit ({ code, signal }) {
  return signal ? `signal ${signal}` : `code ${code}`
}

module.exports = { Canary }
