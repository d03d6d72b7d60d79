'use strict'

// The pool's fronts (./front.js) as one: a hook that throws is logged and the others still hear; fronts start
// one after the other, and each started one is stopped once.

const { NoFront } = require('./front')
const { StartedInOrder } = require('../shared/in-order')

const START_BOUND = 10000 // ms a stop waits for a front still starting before stopping it

class FrontSet {
  constructor (fronts, context) {
    this.list = fronts.length ? fronts : [new NoFront()]
    this.logger = context.logger
    this.order = new StartedInOrder(this.list, { startOne: (front) => front.start(context), startBound: START_BOUND })
  }

  // The sync hooks: every front is told, whatever one throws.
  workerReady (worker) { this.tellEach('workerReady', (front) => front.workerReady?.(worker)) }
  workerAwaiting (worker, held) { this.tellEach('workerAwaiting', (front) => front.workerAwaiting?.(worker, held)) }
  workerRequestEnded (worker, id) {
    this.tellEach('workerRequestEnded', (front) => front.workerRequestEnded?.(worker, id))
  }

  workerGone (worker) { this.tellEach('workerGone', (front) => front.workerGone?.(worker)) }
  stopping () { this.tellEach('stopping', (front) => front.stopping?.()) }

  tellEach (hook, tell) {
    for (const front of this.list) {
      try {
        tell(front)
      } catch (err) {
        this.logger.error({ event: 'front-error', front: front.name, hook, err },
          `front ${front.name} failed in ${hook}(): ${err.message}`)
      }
    }
  }

  // Resolves once no front has the worker render anything more (or gave up trying).
  drain (view) {
    return Promise.allSettled(this.list.map(async (f) => f.drain(view)))
  }

  // The first front that cannot serve n slots refuses the scale.
  async checkScale (n) {
    for (const front of this.list) await front.checkScale?.(n)
  }

  // The first front's `host` that has one.
  host () {
    return this.list.find((f) => typeof f.host === 'string')?.host
  }

  // A stop waits for a front still starting, up to START_BOUND.
  start (stillWanted) {
    return this.order.start(stillWanted)
  }

  stop () { return this.order.stop() }

  status () {
    const all = this.list.map((f) => f.status())
    return { front: all.length === 1 ? all[0] : all, queue: all.reduce((sum, f) => sum + (Number(f.queue) || 0), 0) }
  }
}

module.exports = { FrontSet }
