'use strict'

// A Prometheus histogram for the request path: observe() adds to an array of counts, and the
// series are made only when scraped. prom-client's own Histogram builds, validates and hashes a
// label set at every observation, which costs the balancer more per request than the rest of its
// metrics together; this one takes its label's value once (labels(value) → a child kept in a
// Map) and registers in a prom-client Registry like any metric (name, help, type, get()), so a
// scrape shows it as prom-client would show its own.

class Series {
  constructor (buckets) {
    this.counts = new Float64Array(buckets.length + 1) // the last one: above every bucket (+Inf)
    this.sum = 0
    this.count = 0
    this.buckets = buckets
  }

  observe (value) {
    const buckets = this.buckets
    let i = 0
    while (i < buckets.length && value > buckets[i]) i++
    this.counts[i]++
    this.sum += value
    this.count++
  }
}

class FastHistogram {
  // buckets: upper bounds, ascending. labelName: the one label, or none. registers: registries.
  constructor ({ name, help, buckets, labelName = null, registers = [] }) {
    this.name = name
    this.help = help
    this.type = 'histogram'
    this.aggregator = 'sum'
    this.buckets = buckets
    this.labelName = labelName
    this.series = new Map() // label value → Series ('' without a label)
    for (const registry of registers) registry.registerMetric(this)
  }

  // The series of one label value, created at 0 on first use.
  labels (value) {
    const key = String(value)
    let series = this.series.get(key)
    if (!series) {
      series = new Series(this.buckets)
      this.series.set(key, series)
    }
    return series
  }

  observe (value) { this.labels('').observe(value) }

  reset () { this.series.clear() }

  // What prom-client's Registry reads for its text output: each series' cumulative buckets
  // (`le` first, then the series' label), then its sum and count.
  async getForPromString () {
    const values = []
    for (const [key, s] of this.series) {
      const labels = this.labelName ? { [this.labelName]: key } : {}
      let cumulative = 0
      for (let i = 0; i <= this.buckets.length; i++) {
        cumulative += s.counts[i]
        values.push({
          metricName: `${this.name}_bucket`,
          labels: { le: i < this.buckets.length ? this.buckets[i] : '+Inf' },
          sharedLabels: labels,
          value: cumulative
        })
      }
      values.push({ metricName: `${this.name}_sum`, labels: {}, sharedLabels: labels, value: s.sum })
      values.push({ metricName: `${this.name}_count`, labels: {}, sharedLabels: labels, value: s.count })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  // The same with each value's labels whole, as prom-client's get() gives them.
  async get () {
    const data = await this.getForPromString()
    data.values = data.values.map(({ metricName, labels, sharedLabels, value }) => ({
      metricName,
      labels: { ...labels, ...sharedLabels },
      value
    }))
    return data
  }
}

module.exports = { FastHistogram }
