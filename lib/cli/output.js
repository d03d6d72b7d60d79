'use strict'

// How the CLI reports a failure: one line `pool: <message>` on stderr and the error's exit code
// (lib/errors.js exitCodeOf). A failed boot also shows the app's own error, once.
const { exitCodeOf } = require('../errors')

function printError (err) {
  const appStack = err.details?.appError?.stack
  // The app's own error is printed once, as the app threw it, rather than inside our message.
  if (appStack) process.stderr.write(`pool: ${err.details.headline}; the app's error:\n${appStack}\n`)
  else process.stderr.write(`pool: ${err.message}\n`)
  if (!err.code || !String(err.code).startsWith('POOL_E')) process.stderr.write(`${err.stack}\n`)
  process.exit(exitCodeOf(err))
}

module.exports = { printError }
