'use strict'

// The ports the pool itself listens on, whatever the front: the stats listener (/metrics,
// /status) and the HAProxy agent-check responder of a fleet's edge (lib/observe/agent.js). They
// open before the fronts, so that a scrape or an edge sees the pool start, and close after them, so
// that they see it stop.

const { StatsListener } = require('./stats-listener')
const { StartedInOrder } = require('../supervisor/in-order')

class PoolListeners {
  constructor (pool) {
    const { statsPort, statsHost, agentPort } = pool.options
    const onRefused = () => pool.metrics.failed('out_of_descriptors')
    this.stats = statsPort ? new StatsListener({ host: statsHost, port: statsPort, registry: () => pool.metrics.registry, status: () => pool.status(), logger: pool.logger, onRefused }) : null
    this.agent = agentPort ? new (require('./agent').AgentResponder)({ host: agentHostOf(pool), port: agentPort, pool, logger: pool.logger, onRefused }) : null
    this.order = new StartedInOrder([this.stats, this.agent].filter(Boolean))
  }

  // One after the other; a failure closes what was opened and rejects (lib/supervisor/in-order.js).
  start () { return this.order.start() }
  stop () { return this.order.stop() }

  // For `pool status` and the start-up log line.
  urls () {
    return { stats: this.stats?.url ?? null, agent: this.agent?.address ?? null }
  }
}

// The agent answers the edge, which reaches this host where its front listens: by default the
// front's address (the embedded balancer's --host), else the workers'.
function agentHostOf (pool) {
  return pool.options.agentHost ?? pool.fronts.list.find((f) => f.options?.host)?.options.host ?? pool.options.workerHost
}

module.exports = { PoolListeners }
