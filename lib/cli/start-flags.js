'use strict'

// `pool start`'s flags, as option tables: its own two, the
// supervisor's, and each available front's. The control commands accept them all too
// (./locate.js), so that the start command's flags can be pasted to them.

const { OPTIONS } = require('../options/table')
const { FRONTS, available, defaultFront } = require('../fronts/registry')

function defaultBalancer () {
  return defaultFront()
}

// `pool start`'s own flags.
function startTable () {
  return {
    balancer: {
      flag: 'balancer',
      kind: 'choice',
      choices: available(),
      group: 'Front',
      defaultText: defaultBalancer(),
      describe: 'What sits in front of the workers'
    },
    config: {
      flag: 'config',
      kind: 'string',
      group: 'Configuration',
      describe: 'Read options from this file: JSON, or a CommonJS module (.js) exporting an object; keys as in new ' +
        'Pool(), plus app and balancer. Flags and POOL_* variables override it'
    }
  }
}

// Each available front's table, by front name.
function frontTables () {
  const tables = {}
  for (const name of available()) tables[name] = FRONTS[name].options()
  return tables
}

// Every table of `pool start`'s flags, its own first.
function startTables () {
  return [startTable(), OPTIONS, ...Object.values(frontTables())]
}

module.exports = { defaultBalancer, startTable, frontTables, startTables }
