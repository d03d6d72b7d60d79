'use strict'

// How many response bytes the balancer holds at once, over all responses (--response-budget):
// read from workers and not yet taken by their clients' sockets (relay.js). Read-ahead frees a
// worker from a client slower than it, and costs the difference in memory; without a bound,
// many clients that read nothing would cost the supervisor every byte their workers can send.
//
// Past half the budget, the relays that hold the most stop reading their workers (the workers
// wait, as they would behind a slow client without read-ahead) rather than hold more: those
// holding at least an even share of that half (over the relays holding bytes); past the whole
// budget, every relay holding more than one read. A client that reads holds less than a read or
// two, so it keeps its pace while clients that read nothing fill the budget: they cost
// themselves, not the others. As clients take bytes, the relays waiting for
// room are woken, in the order they began to wait. A read under way when the budget fills still
// lands: the budget may be passed by one read (READ_BYTES) per response being read.

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
    this.holders = 0 // relays holding bytes now (relay.js tells: holding())
  }

  get full () { return this.limit > 0 && this.held >= this.limit }

  // Whether a relay holding `held` bytes must stop reading (see the top).
  overShare (held) {
    if (this.limit === 0 || held === 0) return false
    if (this.held >= this.limit) return held >= READ_BYTES
    const half = this.limit / 2
    return this.held >= half && held >= half / Math.max(1, this.holders)
  }

  // A relay began (true) or ceased (false) to hold bytes.
  holding (yes) { this.holders += yes ? 1 : -1 }

  // Relays held back for their share wait until what is held falls below half the budget: one
  // that reads again at each byte given back would keep its worker writing for a client that
  // takes nothing.
  giveBack (bytes) {
    super.giveBack(bytes)
    if (this.waiting.size > 0 && this.held < this.limit / 2) this.wake()
  }

  // `relay` stops reading until there is room: its roomAgain() is called then.
  wait (relay) { this.waiting.add(relay) }

  cancel (relay) { this.waiting.delete(relay) }

  // As many waiting relays as the room can take one read each of, oldest first. One that fills
  // it again waits again, at the end of the line. (One under its share is woken by its own
  // client taking bytes: relay.js regulate.)
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
