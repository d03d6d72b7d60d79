'use strict'

// A WebSocket once its worker said 101: the client's socket and the worker's, joined both ways
// with back-pressure (a side that cannot take more pauses the other's reads, so a tunnel holds
// at most a read and a socket's buffer each way). It ends when both sides have closed: an end
// (FIN) is passed on as an end, a reset as a reset. Like HAProxy's `timeout tunnel`, a tunnel
// that carried no byte either way for `idleMs` is closed. The owner hears onEnd(tunnel) once.

// After its close, a side that has not finished within this is cut.
const CLOSE_GRACE_MS = 1000
// After one side's end (FIN), the other has this long to close its own.
const HALF_CLOSED_MS = 10000

class Tunnel {
  // client, worker: connected sockets. idleMs: 0 for no idle limit. carried: bytes already
  // passed each way (those that came with the handshake and its 101).
  constructor (client, worker, { idleMs, carried = { toWorker: 0, toClient: 0 }, onEnd }) {
    this.client = client
    this.worker = worker
    this.idleMs = idleMs
    this.onEnd = onEnd
    this.openedAt = performance.now()
    this.activeAt = this.openedAt
    this.toWorker = carried.toWorker // bytes from the client to the worker
    this.toClient = carried.toClient // bytes from the worker to the client
    this.closedBy = null // client, worker, idle, stop: who ended it first
    this.open = 2 // sides not closed yet
    this.idleTimer = null
    this.graceTimer = null
    this.finTimer = null
    worker.setNoDelay(true)
    client.setNoDelay(true)
    this.join(client, worker, 'toWorker', 'client')
    this.join(worker, client, 'toClient', 'worker')
    if (idleMs > 0) this.idleTimer = setTimeout(() => this.checkIdle(), idleMs)
  }

  join (from, to, count, side) {
    from.on('data', (chunk) => {
      this[count] += chunk.length
      this.activeAt = performance.now()
      if (!to.write(chunk)) from.pause()
    })
    to.on('drain', () => from.resume())
    from.on('end', () => {
      this.closedBy ??= side
      to.end()
      // A side that said it is done (FIN) while the other never closes: bounded, as HAProxy's
      // timeout client-fin is.
      this.finTimer ??= setTimeout(() => { cut(this.client); cut(this.worker) }, HALF_CLOSED_MS)
    })
    from.on('error', () => {})
    from.on('close', (hadError) => {
      this.closedBy ??= side
      if (hadError) cut(to)
      else if (!to.writableEnded) to.end()
      if (--this.open === 0) this.finish()
      else this.graceTimer ??= setTimeout(() => { cut(this.client); cut(this.worker) }, CLOSE_GRACE_MS)
    })
  }

  // Re-armed for what is left of the limit since the last byte, so that a busy tunnel costs no
  // timer operation per read.
  checkIdle () {
    const quiet = performance.now() - this.activeAt
    if (quiet < this.idleMs) {
      this.idleTimer = setTimeout(() => this.checkIdle(), this.idleMs - quiet)
      return
    }
    this.idleTimer = null
    this.close('idle')
  }

  // Both sides are ended (`why` says who decided); what does not finish is cut after a grace.
  close (why) {
    this.closedBy ??= why
    this.client.end()
    this.worker.end()
    this.graceTimer ??= setTimeout(() => { cut(this.client); cut(this.worker) }, CLOSE_GRACE_MS)
  }

  get ms () { return performance.now() - this.openedAt }

  finish () {
    clearTimeout(this.idleTimer)
    clearTimeout(this.graceTimer)
    clearTimeout(this.finTimer)
    this.onEnd(this)
  }
}

function cut (socket) {
  if (socket.destroyed) return
  if (typeof socket.resetAndDestroy === 'function' && socket.writable) socket.resetAndDestroy()
  else socket.destroy()
}

module.exports = { Tunnel }
