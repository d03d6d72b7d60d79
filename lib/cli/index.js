'use strict'

// `pool` command line: yargs in strict mode; each command lives in its own module.
const yargs = require('yargs/yargs')
const { EXIT } = require('../errors')
const { printError } = require('./output')

const COMMANDS = ['./start', './config', './control']

function loadCommands () {
  const out = []
  for (const file of COMMANDS) {
    try {
      const mod = require(file)
      out.push(...(Array.isArray(mod) ? mod : [mod]))
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND' || !String(err.message).includes(file.slice(2))) throw err
    }
  }
  return out
}

function run (argv) {
  const cli = yargs(argv)
    .scriptName('pool')
    .usage('$0 <command> [options]')
    .strict()
    .demandCommand(1, 'give a command, e.g. pool start app.js -n 4')
    .recommendCommands()
    .help()
    .alias('h', 'help')
    .version()
    .wrap(Math.min(110, process.stdout.columns || 100))
    .fail((message, err, y) => {
      if (err) return printError(err)
      process.stderr.write(y.help ? '' : '')
      y.showHelp((s) => process.stderr.write(s + '\n\n'))
      process.stderr.write(`pool: ${message}\n`)
      process.exit(EXIT.USAGE)
    })
  for (const command of loadCommands()) cli.command(command)
  cli.parse()
}

module.exports = { run }
