'use strict'

// The embedded balancer, the default front of `pool start` (`--balancer embedded`).
//
//   const { createBalancer, OPTIONS } = require('./lib/fronts/balancer')
//   const front = createBalancer({ port: 9001 }, { logger })   // a Front
//
// OPTIONS is its part of the options table (in its format); createBalancer fills the
// defaults and validates, throwing a PoolError (POOL_E_BAD_OPTION) on bad input.

const { OPTIONS, resolveBalancerOptions } = require('./options')
const { EmbeddedBalancer } = require('./balancer')

function createBalancer (options = {}, { logger } = {}) {
  return new EmbeddedBalancer(resolveBalancerOptions(options), { logger })
}

module.exports = { createBalancer, OPTIONS, resolveBalancerOptions }
