'use strict'

// `pool ls`: every pool of this user, one line each, found by its control socket in the default
// directories and asked for its status. A socket nobody answers on (a pool
// that was SIGKILLed) is listed as stale. A pool started with `--control PATH` elsewhere cannot be
// found this way: `pool status --control PATH` asks it.

const { EXIT } = require('./exit-codes')
const { printError } = require('./output')
const { sendCommand } = require('../control/client')
const { otherControlSockets } = require('../control/path')
const { formatPools } = require('../control/format')

const ANSWER_WAIT = 2000 // ms a pool has to answer before it is listed as not answering

// [{ control, port, status }] for the pools that answered, [{ control, port, error, reason }]
// for the sockets that did not, by front port.
async function listPools () {
  const sockets = otherControlSockets().sort((a, b) => a.port - b.port)
  return Promise.all(sockets.map(async ({ path, port }) => {
    try {
      return { control: path, port, status: await sendCommand(path, 'status', {}, { timeout: ANSWER_WAIT }) }
    } catch (err) {
      return { control: path, port, error: err.message, reason: err.details?.reason ?? null }
    }
  }))
}

module.exports = {
  command: 'ls',
  aliases: ['list'],
  describe: 'list your running pools: pid, state, workers ready, ports, app',
  builder: (y) => y.option('json', {
    type: 'boolean',
    describe: 'print the list as JSON: [{ control, port, status }] (or { control, port, error, reason } for a ' +
      'socket no pool answers on)'
  }),
  handler: async (argv) => {
    try {
      const pools = await listPools()
      process.stdout.write(argv.json ? JSON.stringify(pools, null, 2) + '\n' : formatPools(pools))
      process.exit(EXIT.OK)
    } catch (err) {
      printError(err)
    }
  }
}
