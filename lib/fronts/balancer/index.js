'use strict'

// The embedded balancer, the default front of `pool start` (`--balancer embedded`). OPTIONS is its
// part of the options table; createBalancer fills defaults and throws POOL_E_BAD_OPTION on bad input.

const { OPTIONS, resolveBalancerOptions } = require('./options')
const { EmbeddedBalancer } = require('./balancer')

function createBalancer (options = {}, { logger } = {}) {
  return new EmbeddedBalancer(resolveBalancerOptions(options), { logger })
}

module.exports = { createBalancer, OPTIONS, resolveBalancerOptions }
