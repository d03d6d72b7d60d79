'use strict'

// How long HAProxy took to take a worker that was gone out of rotation: from the front's call to
// HAProxy's reply to its MAINT, in ms (status() shows it; bench/death-notice.js measures the whole
// way from a SIGKILL).

class Latency {
  constructor () {
    this.count = 0
    this.lastMs = null
    this.maxMs = null
  }

  record (ms) {
    this.count++
    this.lastMs = ms
    this.maxMs = Math.max(this.maxMs ?? 0, ms)
  }

  toJSON () {
    return { count: this.count, lastMs: this.lastMs, maxMs: this.maxMs }
  }
}

module.exports = { Latency }
