'use strict'

// The supervisor's event-loop delay, as the gauges prom-client's default metrics name
// (<prefix>nodejs_eventloop_lag_seconds, and its _min_, _max_, _mean_, _stddev_, _p50_, _p90_ and
// _p99_ companions), measured so that an idle pool sleeps. prom-client's own monitor samples
// every 10 ms from the moment the registry is made: a hundred wakes a second, most of what an
// idle supervisor spent. This one starts at the first scrape (unscraped, nothing runs) and
// samples every SAMPLE_MS:
//
//   nodejs_eventloop_lag_seconds   at each scrape, how late a callback queued then ran
//   the others                     over the samples since the last scrape: how late a timer due
//                                  every SAMPLE_MS ran (the sampling period taken off, as the
//                                  metric's name says lag, not period). A loop held up across a
//                                  sample shows; a stall shorter than the gap between two samples
//                                  may not. Left as they were when no sample was taken since.

const { monitorEventLoopDelay } = require('node:perf_hooks')
const client = require('prom-client')

const SAMPLE_MS = 1000
const NAME = 'nodejs_eventloop_lag_seconds'
const SUMMARIES = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99']

class LoopDelay {
  constructor ({ registry, prefix }) {
    this.histogram = null // from the first scrape on
    const registers = [registry]
    const period = SAMPLE_MS * 1e6 // ns
    const seconds = (ns, { lag = true } = {}) => Math.max(0, lag ? ns - period : ns) / 1e9
    const summary = {}
    const monitor = this
    // First in the registry: a scrape collects in order, and this sets the others.
    new client.Gauge({ // eslint-disable-line no-new
      name: `${prefix}${NAME}`,
      help: 'Lag of event loop in seconds, at the scrape',
      registers,
      aggregator: 'average',
      // One collect sets them all, as prom-client's does. The scrape's own lag is known a moment
      // later: a scrape shows the previous one's.
      collect () {
        const queued = process.hrtime.bigint()
        setImmediate(() => this.set(Number(process.hrtime.bigint() - queued) / 1e9))
        const h = monitor.sampling()
        if (h.count === 0) return
        summary.min.set(seconds(h.min))
        summary.max.set(seconds(h.max))
        summary.mean.set(seconds(h.mean))
        summary.stddev.set(seconds(h.stddev, { lag: false }))
        summary.p50.set(seconds(h.percentile(50)))
        summary.p90.set(seconds(h.percentile(90)))
        summary.p99.set(seconds(h.percentile(99)))
        h.reset()
      }
    })
    for (const name of SUMMARIES) {
      summary[name] = new client.Gauge({
        name: `${prefix}nodejs_eventloop_lag_${name}_seconds`,
        help: `The ${name} of the event-loop delay, sampled every ${SAMPLE_MS} ms since the last scrape`,
        registers
      })
    }
  }

  // The histogram, sampling from its first call on.
  sampling () {
    if (this.histogram === null) {
      this.histogram = monitorEventLoopDelay({ resolution: SAMPLE_MS })
      this.histogram.enable()
    }
    return this.histogram
  }

  close () {
    this.histogram?.disable()
    this.histogram = null
  }
}

module.exports = { LoopDelay, SAMPLE_MS, NAME, SUMMARIES }
