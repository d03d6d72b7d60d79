'use strict'

// Each worker<k> server must send to slot k's port, or HAProxy serves a port nobody listens on
// (or another pool's). Only ports are compared: addresses may legitimately differ (0.0.0.0 and
// 127.0.0.1, a hostname HAProxy resolved).

const { slotOfServer } = require('../../haproxy/names')
const { poolError, codes } = require('../../errors')

// `state`: HAProxy's `show servers state`, parsed; `names`: the servers to check; `portOf(slot)`:
// the pool's; `workers`: for the command the error suggests; `stateFile`: the front's, if any.
// Throws a PoolError (BAD_OPTION) naming what to change.
function checkServerPorts (state, names, { backend, portOf, workers, stateFile = null }) {
  const wrong = []
  for (const name of names) {
    const slot = slotOfServer(name)
    const s = state[name]
    if (s && s.port !== portOf(slot)) wrong.push({ name, slot, port: s.port, expected: portOf(slot) })
  }
  if (wrong.length === 0) return
  const first = wrong[0]
  const workerPort = first.port - first.slot + 1
  throw poolError(codes.BAD_OPTION,
    `HAProxy backend '${backend}' sends ${wrong.map((w) => `${w.name} to ` +
      `port ${w.port}`).slice(0, 3).join(', ')}${wrong.length > 3 ? ` (and ${wrong.length - 3} more)` : ''}, ` +
      `but the pool's slot ${first.slot} listens on ${first.expected}: start the pool with ` +
      `--worker-port ${workerPort}, ` +
      `or regenerate the config with \`pool config haproxy -n ${workers} --worker-port ${portOf(1)} ` +
      `--backend ${backend}\`` +
    (stateFile
      ? ` (a HAProxy reload takes ports from ${stateFile.file} while it exists: reload HAProxy after the ` +
        'old pool stopped, which removes it)'
      : ''),
    { details: { backend, wrong } })
}

module.exports = { checkServerPorts }
