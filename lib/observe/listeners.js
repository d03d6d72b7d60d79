'use strict'

// The ports the pool itself listens on, whatever the front: the stats listener (/metrics,
// /status) and the HAProxy agent-check responder of a fleet's edge. They
// open before the fronts, so that a scrape or an edge sees the pool start, and close after them, so
// that they see it stop.

const { StatsListener } = require('./stats-listener')
const { StartedInOrder } = require('../shared/in-order')

class PoolListeners {
  // What the listeners are given of the pool: its resolved options, its metrics (PoolMetrics),
  // its logger, status() (what /status and the agent read),
  // and frontHost(), the address its front listens for clients on, if it says.
  constructor ({ options, metrics, logger, status, frontHost }) {
    const { statsPort, statsHost, agentPort } = options
    const onRefused = () => metrics.failed('out_of_descriptors')
    this.stats = statsPort
      ? new StatsListener({
        host: statsHost,
        port: statsPort,
        registry: () => metrics.registry,
        status,
        logger,
        onRefused
      })
      : null
    this.agent = agentPort
      ? new (require('./agent').AgentResponder)({
        host: agentHostOf(options, frontHost),
        port: agentPort,
        status,
        logger,
        onRefused
      })
      : null
    this.order = new StartedInOrder([this.stats, this.agent].filter(Boolean))
  }

  // One after the other; a failure closes what was opened and rejects.
  start () { return this.order.start() }
  stop () { return this.order.stop() }

  // For `pool status` and the start-up log line.
  urls () {
    return { stats: this.stats?.url ?? null, agent: this.agent?.address ?? null }
  }
}

// The agent answers the edge, which reaches this host where its front listens: by default the
// front's address (the embedded balancer's --host), else the workers'.
function agentHostOf (options, frontHost) {
  return options.agentHost ?? frontHost() ?? options.workerHost
}

module.exports = { PoolListeners }
