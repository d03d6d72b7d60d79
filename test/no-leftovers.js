'use strict'

// Run by tap after the last test file (package.json, tap.after): fails the suite when any
// process of this run (./helpers/test-run.js) that a pool forked, or that inherited a worker's
// environment, still runs while its supervisor is gone. A pool's reaper ends them when their
// supervisor dies (lib/supervisor/reaper.js); a test that SIGKILLs its pool cannot see a worker
// that outlives it, since the leak shows only after that test has ended. Those found are
// listed, then killed, so that one failed run leaves nothing behind.

const fs = require('node:fs')
const { orphansOfDeadSupervisors } = require('../lib/supervisor/leftovers')
const { readStat } = require('../lib/shared/proc')
const { RUN_ENV, testRunMark } = require('./helpers/test-run')

// A dead pool's reaper acts at once, and an app process ignoring SIGTERM gets SIGKILL
// --kill-timeout (5 s by default) later.
const GRACE_MS = 8000

const run = `${RUN_ENV}=${testRunMark()}`

function ofThisRun (pid) {
  try { return fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(run) } catch { return false }
}

function leftovers () {
  return orphansOfDeadSupervisors().filter((p) => ofThisRun(p.pid))
}

function commandOf (pid) {
  try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim() } catch { return '?' }
}

// Only the process found: its pid may have been freed and reused since.
function killFound (p) {
  if (readStat(p.pid)?.startTime !== p.startTime) return
  try { process.kill(p.pid, 'SIGKILL') } catch {}
}

async function main () {
  if (!fs.existsSync('/proc/self/environ')) {
    console.log('# no-leftovers: skipped, no /proc to look in')
    return
  }
  const deadline = Date.now() + GRACE_MS
  let left = leftovers()
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    left = leftovers()
  }
  if (left.length === 0) {
    console.log('# no-leftovers: no process of a dead pool is left running')
    return
  }
  console.error(`no-leftovers: ${left.length} process(es) of a dead pool still run ${GRACE_MS} ms after the suite ` +
    'ended:')
  for (const p of left) {
    console.error(`  pid ${p.pid} (supervisor ${p.supervisor.split(':')[0]}, PORT=${p.port}): ${commandOf(p.pid)}`)
    killFound(p)
  }
  process.exitCode = 1
}

main()
