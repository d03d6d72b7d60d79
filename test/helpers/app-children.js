'use strict'

// The helper processes test/fixtures/spawns-child.js starts: a temp file the app appends
// "<worker pid> <helper pid>" lines to, read back, and every process named in it killed at the
// test's end, whatever happened to the test.

const fs = require('node:fs')
const path = require('node:path')
const { tempDir } = require('../helpers')

function pidFile (t) {
  const dir = tempDir(t, 'pool-helpers-')
  return path.join(dir, 'pids')
}

// Map worker pid → helper pid.
function helpersOf (file) {
  if (!fs.existsSync(file)) return new Map()
  const lines = fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean)
  return new Map(lines.map((l) => l.split(' ').map(Number)))
}

// Registered before the file is read (teardowns run last-registered first, so this one runs
// after the pool's own stop).
function reapHelpersAtTeardown (t, file) {
  t.teardown(() => {
    for (const [worker, helper] of helpersOf(file)) {
      for (const pid of [helper, worker]) { try { process.kill(pid, 'SIGKILL') } catch {} }
    }
  })
}

module.exports = { pidFile, helpersOf, reapHelpersAtTeardown }
