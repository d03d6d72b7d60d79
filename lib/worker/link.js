'use strict'

// The worker's link to its supervisor: the pool channel's worker end. Over it the worker reports
// (ready, its check-ins, a listener that closed, the end of a request it was asked to watch) and
// hears two things: stop, and which request to watch. Its close is how the worker knows its
// supervisor is gone, however it died.
//
// A check-in says the event loop came round: the supervisor takes a worker that stops checking
// in for hung, however long its requests last (a loop stuck on one render stops them all). Idle,
// the worker checks in every --heartbeat-interval; while it is active (it holds requests, or held
// one within that interval) every `activeInterval`, so that a stuck loop is seen within --timeout
// plus that; a request that finds it holding nothing makes it check in at once.

const msg = require('../protocol/messages')
const channel = require('../protocol/channel')

class SupervisorLink {
  // `logger()`: the worker's logger, made when first asked for.
  constructor ({ heartbeatInterval, activeInterval, logger }) {
    this.heartbeatInterval = heartbeatInterval
    this.activeInterval = Math.min(activeInterval, heartbeatInterval)
    this.logger = logger
    this.channel = null // null when this process was not forked by a pool
    this.counts = () => ({ open: 0, answered: 0, tunnels: 0, tunnelsOpened: 0 })
    this.beforeCheckIn = () => {}
    this.timer = null
    this.active = false // checking in every activeInterval
    this.saidOpen = 0 // requests its last check-in said it held
    this.lastRequestAt = -Infinity
  }

  // onStop(reason): the supervisor asks the worker to finish and leave (reason: the drain's, or
  // null). onWatch(id): to say when the request of that exchange (X-Pool-Request) has ended.
  // onGone(): the channel closed. beforeCheckIn(): a look at the worker's own state before each
  // check-in goes. counts(): { open, answered, oldest, tunnels, tunnelsOpened }.
  open ({ onStop, onWatch, onGone, beforeCheckIn, counts }) {
    this.channel = channel.workerEnd()
    if (!this.channel) return
    channel.readFrames(this.channel, {
      onMessage: (m) => {
        if (!msg.isPoolMessage(m)) return
        if (m.type === msg.STOP) onStop(msg.drainReason(m.reason))
        else if (m.type === msg.WATCH_REQUEST && typeof m.id === 'string') onWatch(m.id)
      },
      onError: () => {} // the supervisor frames what it sends: nothing to do but ignore it
    })
    // A worker whose loop is stuck for good cannot hear the close: the pool's reaper ends it.
    this.channel.on('close', onGone)
    this.counts = counts
    this.beforeCheckIn = beforeCheckIn
    this.schedule()
  }

  // A request came in: an idle worker checks in at once, so that the supervisor times its loop
  // as a busy one's from now on.
  // A request came in: one that finds the worker holding nothing, as it last said, makes it check
  // in at once, so that the supervisor times its loop as a busy one's (and knows the request)
  // from now on. At most one more check-in per interval: the next says it holds one.
  requestArrived (req) {
    this.lastRequestAt = performance.now()
    if (this.saidOpen > 0 || !this.channel) return
    this.checkIn(req)
  }

  // `arriving`: a request that came in and is not counted yet (it starts right after). With the
  // counts goes the request open longest (the one it is likeliest stuck on), for people to read.
  checkIn (arriving = null) {
    this.beforeCheckIn()
    const counts = this.counts()
    const open = counts.open + (arriving ? 1 : 0)
    const oldest = counts.oldest ?? (arriving && { method: arriving.method, url: arriving.url, age: 0 })
    this.active = open > 0 || performance.now() - this.lastRequestAt < this.heartbeatInterval
    this.saidOpen = open
    const request = oldest
      ? { method: oldest.method, url: oldest.url.slice(0, msg.MAX_URL), age: Math.round(oldest.age) }
      : null
    const { tunnels, tunnelsOpened, answered } = counts
    const rss = process.memoryUsage.rss()
    this.send(msg.CHECK_IN, { rss, open, tunnels, tunnelsOpened, answered, active: this.active, request })
    this.schedule()
  }

  // Each check-in wakes this process, and only under a supervisor.
  schedule () {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.checkIn(), this.active ? this.activeInterval : this.heartbeatInterval)
    this.timer.unref()
  }

  // Returns whether the message went out; `done` is called once it has (or could not).
  send (type, fields, done) {
    try {
      return channel.sendFrame(this.channel, msg.message(type, fields), done)
    } catch (err) { // a message too large for a frame: a bug of ours, not a reason to crash
      this.logger().error({ event: 'channel-send-failed', err }, err.message)
      return false
    }
  }

  // Whether the channel keeps the process alive: not while the worker waits to see whether the
  // app still has work in progress (an empty event loop means no listen() can come).
  hold () { this.channel?.ref() }
  letGo () { this.channel?.unref() }
}

module.exports = { SupervisorLink }
