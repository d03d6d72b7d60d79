'use strict'

// How many response bytes the balancer holds at once, over all responses (--response-budget):
// read from workers and not yet taken by their clients' sockets (relay.js). Read-ahead frees a
// worker from a client slower than it, and costs the difference in memory; without a bound,
// many clients that read nothing would cost the supervisor every byte their workers can send.
//
// Past the budget, relays stop reading their workers (the workers wait, as they would behind a
// slow client without read-ahead) rather than hold more; as clients take bytes, the relays
// waiting for room are woken, in the order they began to wait. A read under way when the budget
// fills still lands: the budget may be passed by one read (READ_BYTES) per response being read.

const { Budget, defaultBudget } = require('./budget')

// The most one read from a socket brings (Node reads 64 KiB at a time): what a woken relay may
// add before it checks the budget again.
const READ_BYTES = 64 * 1024

// The default: the body budget's share (1/16 of RAM, at most 256 MiB), and never less than
// one response of --max-response-buffer.
function defaultResponseBudget (maxResponseBuffer, memory) {
  return defaultBudget(maxResponseBuffer, memory)
}

class ResponseBudget extends Budget {
  constructor (limit, options) {
    super(limit, options)
    this.waiting = new Set() // relays that stopped reading for want of room, oldest first
  }

  get full () { return this.limit > 0 && this.held >= this.limit }

  giveBack (bytes) {
    super.giveBack(bytes)
    if (this.waiting.size > 0 && !this.full) this.wake()
  }

  // `relay` stops reading until there is room: its roomAgain() is called then.
  wait (relay) { this.waiting.add(relay) }

  cancel (relay) { this.waiting.delete(relay) }

  // As many waiting relays as the room can take one read each of, oldest first. One that fills
  // it again waits again, at the end of the line.
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
