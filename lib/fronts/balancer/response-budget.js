'use strict'

// Response bytes read from workers and not yet taken by clients' sockets, over all responses
// (--response-budget). Past half the budget the relays holding at least an even share of that half
// stop reading their workers; past the whole budget, every relay holding more than one read. So
// clients that read nothing cost themselves, not the others. A read under way still lands: the
// budget may be passed by one READ_BYTES per response being read.

const { Budget, defaultBudget } = require('./budget')

// The most one socket read brings (Node reads 64 KiB at a time).
const READ_BYTES = 64 * 1024

function defaultResponseBudget (maxResponseBuffer, memory) {
  return defaultBudget(maxResponseBuffer, memory)
}

class ResponseBudget extends Budget {
  constructor (limit, options) {
    super(limit, options)
    this.waiting = new Set() // relays that stopped reading for want of room, oldest first
    this.holders = 0 // relays holding bytes now (relay.js tells: holding())
  }

  get full () { return this.limit > 0 && this.held >= this.limit }

  overShare (held) {
    if (this.limit === 0 || held === 0) return false
    if (this.held >= this.limit) return held >= READ_BYTES
    const half = this.limit / 2
    return this.held >= half && held >= half / Math.max(1, this.holders)
  }

  holding (yes) { this.holders += yes ? 1 : -1 }

  // Held-back relays wait until below half the budget, lest one re-read at each byte given back.
  giveBack (bytes) {
    super.giveBack(bytes)
    if (this.waiting.size > 0 && this.held < this.limit / 2) this.wake()
  }

  // `relay` stops reading until its roomAgain() is called.
  wait (relay) { this.waiting.add(relay) }

  cancel (relay) { this.waiting.delete(relay) }

  // Wake, oldest first, as many waiting relays as the room takes one read each of.
  wake () {
    let room = this.limit - this.held
    for (const relay of this.waiting) {
      if (room <= 0) break
      this.waiting.delete(relay)
      room -= READ_BYTES
      relay.roomAgain()
    }
  }
}

module.exports = { ResponseBudget, defaultResponseBudget, READ_BYTES }
