'use strict'

// Run by tap after the last test file (package.json, tap.after): fails the suite when any
// process forked by a pool whose supervisor is gone still runs. Workers end themselves when
// their supervisor dies (lib/worker/watchdog.js); a test that SIGKILLs its pool cannot see a
// worker that outlives it, since the leak shows only after that test has ended. Those found are
// listed, then killed, so that one failed run leaves nothing on the machine.

const fs = require('node:fs')
const { orphansOfDeadSupervisors } = require('../lib/supervisor/leftovers')

const GRACE_MS = 5000 // a worker whose supervisor just died takes up to ~1 s to notice and exit

function commandOf (pid) {
  try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim() } catch { return '?' }
}

async function main () {
  if (!fs.existsSync('/proc/self/environ')) {
    console.log('# no-leftovers: skipped, no /proc to look in')
    return
  }
  const deadline = Date.now() + GRACE_MS
  let left = orphansOfDeadSupervisors()
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    left = orphansOfDeadSupervisors()
  }
  if (left.length === 0) {
    console.log('# no-leftovers: no process of a dead pool is left running')
    return
  }
  console.error(`no-leftovers: ${left.length} process(es) of a dead pool still run ${GRACE_MS} ms after the suite ended:`)
  for (const p of left) {
    console.error(`  pid ${p.pid} (supervisor ${p.supervisor.split(':')[0]}, PORT=${p.port}): ${commandOf(p.pid)}`)
    try { process.kill(p.pid, 'SIGKILL') } catch {}
  }
  process.exitCode = 1
}

main()
