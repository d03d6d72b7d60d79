'use strict'

// How the CLI reports a failure: one line `pool: <message>` on stderr and the error's exit code
// (./exit-codes.js). A failed boot also shows the app's own error, once. And a
// terminal screen redrawn in place, for `pool status --watch`.
const { exitCodeOf } = require('./exit-codes')

const STACK_FRAME = /\n\s+at /

function printError (err) {
  const appStack = err.details?.appError?.stack
  // The app's own error is printed once, as the app threw it, rather than inside our message;
  // one without a stack trace (the pool's verdict on what the app exported, say) is already
  // whole in the message.
  if (appStack &&
    STACK_FRAME.test(appStack)) process.stderr.write(`pool: ${err.details.headline}; the app's error:\n${appStack}\n`)
  else process.stderr.write(`pool: ${err.message}\n`)
  if (!err.code || !String(err.code).startsWith('POOL_E')) process.stderr.write(`${err.stack}\n`)
  process.exit(exitCodeOf(err))
}

// Redraw in place without flicker: cursor home, each line followed by "clear to end of line",
// then "clear to end of screen"; never a full clear. Lines are cut to the terminal's size so
// that none wraps and pushes the frame down.
class Screen {
  constructor (out) {
    this.out = out
    this.left = false
    out.write('\x1b[?1049h\x1b[?25l') // alternate screen, cursor hidden
  }

  draw (text) {
    const rows = Math.max(1, (this.out.rows || 24) - 1)
    const columns = this.out.columns || 80
    const lines = text.replace(/\n$/, '').split('\n').slice(0, rows).map((line) => line.slice(0, columns))
    this.out.write('\x1b[H' + lines.map((line) => `${line}\x1b[K`).join('\n') + '\x1b[J')
  }

  leave () {
    if (this.left) return
    this.left = true
    this.out.write('\x1b[?25h\x1b[?1049l') // cursor back, the user's screen back
  }
}

module.exports = { printError, Screen }
