'use strict'

// A warning said once per distinct message, and again only after REPEAT_AFTER; in between, at
// debug level: HAProxy down for an hour must not flood the log with the same line.

const REPEAT_AFTER = 30000 // ms

class OnceEach {
  constructor (logger, { now = () => performance.now() } = {}) {
    this.logger = logger
    this.now = now
    this.last = { message: null, at: 0 }
  }

  warn (event, message, fields) {
    const now = this.now()
    if (this.last.message === message && now - this.last.at < REPEAT_AFTER) {
      return this.logger.debug({ event, ...fields }, message)
    }
    this.last = { message, at: now }
    this.logger.warn({ event, ...fields }, message)
  }

  // Whatever comes next is new (an outage that ended: the next one deserves its warning).
  forget () {
    this.last = { message: null, at: 0 }
  }
}

module.exports = { OnceEach, REPEAT_AFTER }
