'use strict'

// Things the pool starts one after the other and stops once each: its fronts, its own listeners.
// A failure to start stops what had started and rejects; `stillWanted()` false (a stop came)
// starts no more; a stop during the start first waits for the one being started, or that one
// would open after its stop and stay open (bounded: a start that never settles must not keep the
// pool from stopping).

class StartedInOrder {
  // startOne(item): the item's start; startBound: ms a stop waits for a start in progress.
  constructor (items, { startOne = (item) => item.start(), startBound = Infinity } = {}) {
    this.items = items
    this.startOne = startOne
    this.startBound = startBound
    this.started = [] // the items whose start resolved: the ones stop() must stop
    this.starting = null
  }

  async start (stillWanted = () => true) {
    this.starting = (async () => {
      for (const item of this.items) {
        if (!stillWanted()) return
        await this.startOne(item)
        this.started.push(item)
      }
    })()
    try {
      await this.starting
    } catch (err) {
      await this.stop()
      throw err
    }
  }

  async stop () {
    if (this.starting) await settledWithin(this.starting, this.startBound)
    const items = this.started.splice(0)
    await Promise.allSettled(items.map(async (item) => item.stop()))
  }
}

function settledWithin (promise, ms) {
  let timer
  const bound = new Promise((resolve) => { if (ms !== Infinity) timer = setTimeout(resolve, ms) })
  return Promise.race([promise.then(() => {}, () => {}), bound]).finally(() => clearTimeout(timer))
}

module.exports = { StartedInOrder }
