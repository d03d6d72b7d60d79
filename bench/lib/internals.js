'use strict'

// What the benches need of the library beyond its package entry (index.js: Pool) and its CLI
// (`pool config ...`, `pool reload`): the HAProxy runtime client and the bare balancer. One file
// to change when lib/ moves; each is loaded only by the bench that asks for it.

const path = require('node:path')
const { execFileSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..', '..')
const BIN = path.join(ROOT, 'bin', 'pool.js')

// The text `pool config TARGET ...flags` prints, as an operator would generate it.
function poolConfig (target, flags) {
  return execFileSync(process.execPath, [BIN, 'config', target, ...flags.map(String)], { cwd: ROOT, encoding: 'utf8' })
}

module.exports = {
  poolConfig,
  get HaproxyClient () { return require('../../lib/haproxy/client').HaproxyClient },
  get createBalancer () { return require('../../lib/fronts/balancer').createBalancer }
}
