'use strict'

// The worker's link to its supervisor: the pool channel's worker end. Over it the worker reports
// (ready, busy, idle, heartbeat, a listener that closed, the end of a request it was asked to
// watch) and hears two things: stop, and which request to watch. Its close is how the worker
// knows its supervisor is gone, however it died.

const msg = require('../protocol/messages')
const channel = require('../protocol/channel')

class SupervisorLink {
  // `logger()`: the worker's logger, made when first asked for.
  constructor ({ heartbeatInterval, logger }) {
    this.heartbeatInterval = heartbeatInterval
    this.logger = logger
    this.channel = null // null when this process was not forked by a pool
  }

  // onStop(): the supervisor asks the worker to finish and leave. onWatch(id): to say when the
  // request with that X-Request-Id has ended. onGone(): the channel closed. beforeHeartbeat():
  // a look at the worker's own state before each heartbeat goes.
  open ({ onStop, onWatch, onGone, beforeHeartbeat }) {
    this.channel = channel.workerEnd()
    if (!this.channel) return
    channel.readFrames(this.channel, {
      onMessage: (m) => {
        if (!msg.isPoolMessage(m)) return
        if (m.type === msg.STOP) onStop()
        else if (m.type === msg.WATCH_REQUEST && typeof m.id === 'string') onWatch(m.id)
      },
      onError: () => {} // the supervisor frames what it sends: nothing to do but ignore it
    })
    // A worker whose loop is stuck for good cannot hear the close: the pool's reaper ends it.
    this.channel.on('close', onGone)
    // Each heartbeat wakes this process: every --heartbeat-interval, and only for a supervisor.
    setInterval(() => {
      beforeHeartbeat()
      this.send(msg.HEARTBEAT, { rss: process.memoryUsage.rss() })
    }, this.heartbeatInterval).unref()
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
