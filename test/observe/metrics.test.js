'use strict'

// pool_failures_total's help text names every reason the pool and each front count, from the
// lists they keep (the balancer's: its failure table), not from a copy of them.

const t = require('tap')
const { PoolMetrics, POOL_FAILURES } = require('../../lib/observe/metrics')
const { frontFailures } = require('../../lib/fronts/registry')
const { ATTEMPT_FAILURES, FAILURE_REASONS } = require('../../lib/fronts/balancer/failures')

t.test('the failures\' help names every reason counted', async (t) => {
  const metrics = new PoolMetrics(() => [], { supervisor: false, frontFailures: frontFailures() })
  const help = (await metrics.registry.metrics()).split('\n').find((l) => l.startsWith('# HELP pool_failures_total'))
  for (const [reason] of POOL_FAILURES) t.match(help, new RegExp(`\\b${reason}\\b`), `the pool's ${reason}`)
  for (const reason of FAILURE_REASONS) {
    t.match(help, new RegExp(`--balancer embedded: .*\\b${reason}\\b`), `the balancer's ${reason}`)
  }
  const poolReasons = POOL_FAILURES.map(([reason]) => reason)
  for (const { metric } of Object.values(ATTEMPT_FAILURES)) {
    t.ok(FAILURE_REASONS.includes(metric) || poolReasons.includes(metric),
      `the failed attempt ${metric} is counted under a named reason`)
  }
  metrics.close()
})
