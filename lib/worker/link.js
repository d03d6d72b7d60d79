'use strict'

// The pool channel's worker end: it reports (ready, check-ins, a closed listener, a watched request's
// end) and hears stop and watch; its close means the supervisor is gone. A check-in says the loop came
// round: every heartbeatInterval idle, every activeInterval while it holds (or lately held) requests.

const msg = require('../protocol/messages')
const channel = require('../protocol/channel')

class SupervisorLink {
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

  // onStop(reason or null), onWatch(X-Pool-Request id), onGone() on close, beforeCheckIn(),
  // counts(): { open, answered, oldest, tunnels, tunnelsOpened }.
  open ({ onStop, onWatch, onGone, beforeCheckIn, counts }) {
    this.channel = channel.workerEnd()
    if (!this.channel) return
    channel.readFrames(this.channel, {
      onMessage: (m) => {
        if (!msg.isPoolMessage(m)) return
        if (m.type === msg.STOP) onStop(msg.drainReason(m.reason))
        else if (m.type === msg.WATCH_REQUEST && typeof m.id === 'string') onWatch(m.id)
      },
      onError: () => {}
    })
    // A worker whose loop is stuck for good cannot hear the close: the pool's reaper ends it.
    this.channel.on('close', onGone)
    this.counts = counts
    this.beforeCheckIn = beforeCheckIn
    this.schedule()
  }

  // One that finds the worker holding nothing, as it last said, checks in at once: the supervisor then
  // times its loop as a busy one's.
  requestArrived (req) {
    this.lastRequestAt = performance.now()
    if (this.saidOpen > 0 || !this.channel) return
    this.checkIn(req)
  }

  // `arriving`: a request not counted yet. The oldest open request goes along, for people to read.
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

  schedule () {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.checkIn(), this.active ? this.activeInterval : this.heartbeatInterval)
    this.timer.unref()
  }

  // Returns whether the message went out; `done` is called once it has (or could not).
  send (type, fields, done) {
    try {
      return channel.sendFrame(this.channel, msg.message(type, fields), done)
    } catch (err) { // a message too large for a frame: our bug, no reason to crash
      this.logger().error({ event: 'channel-send-failed', err }, err.message)
      return false
    }
  }

  // Unref'd while the worker waits to see whether the app still has work in progress.
  hold () { this.channel?.ref() }
  letGo () { this.channel?.unref() }
}

module.exports = { SupervisorLink }
