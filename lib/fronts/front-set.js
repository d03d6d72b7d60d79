'use strict'

// The pool's fronts, seen as one (the interface each implements is ./front.js). Every call
// from the supervisor to a front goes through here: so a front that throws from a hook is
// logged and the others still hear (a worker announced gone but never signalled would be worse
// than a log line), fronts start one after the other, and each started front is stopped once.

const { NoFront } = require('./front')
const { StartedInOrder } = require('../shared/in-order')

const START_BOUND = 10000 // ms a stop waits for a front still starting before stopping it

class FrontSet {
  // context: the FrontContext every front is started with.
  constructor (fronts, context) {
    this.list = fronts.length ? fronts : [new NoFront()]
    this.logger = context.logger
    this.order = new StartedInOrder(this.list, { startOne: (front) => front.start(context), startBound: START_BOUND })
  }

  // The sync hooks (front.js says what each means): every front is told, whatever one throws.
  workerReady (worker) { this.tellEach('workerReady', (front) => front.workerReady?.(worker)) }
  workerAwaiting (worker, held) { this.tellEach('workerAwaiting', (front) => front.workerAwaiting?.(worker, held)) }
  workerRequestEnded (worker, id) {
    this.tellEach('workerRequestEnded', (front) => front.workerRequestEnded?.(worker, id))
  }

  workerGone (worker) { this.tellEach('workerGone', (front) => front.workerGone?.(worker)) }
  stopping () { this.tellEach('stopping', (front) => front.stopping?.()) }

  // `tell(front)` for each front in turn; what one throws is logged as its failure in `hook`.
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

  // Before a scale to n changes anything: the first front that cannot serve n slots refuses it.
  async checkScale (n) {
    for (const front of this.list) await front.checkScale?.(n)
  }

  // The address the first front that says so listens for clients on (its `host`).
  host () {
    return this.list.find((f) => typeof f.host === 'string')?.host
  }

  // One front after the other, each started one stopped once; a stop waits for a front still
  // starting, up to START_BOUND.
  start (stillWanted) {
    return this.order.start(stillWanted)
  }

  stop () { return this.order.stop() }

  // For `pool status`: one front's status (or the list of them), and the requests they queue.
  status () {
    const all = this.list.map((f) => f.status())
    return { front: all.length === 1 ? all[0] : all, queue: all.reduce((sum, f) => sum + (Number(f.queue) || 0), 0) }
  }
}

module.exports = { FrontSet }
