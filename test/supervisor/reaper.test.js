'use strict'
// The pool's reaper (lib/supervisor/reaper.js) beside a running pool: it shares the supervisor's
// stdout and must leave it as the supervisor set it. (What it does when the supervisor dies:
// test/supervisor/orphans.test.js.)
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { FIXTURES, freePorts, startPool, waitFor, isAlive } = require('../helpers')

const O_NONBLOCK = 0o4000

// The file status flags of `pid`'s descriptor `fd`, as /proc shows them (octal).
function fdFlags (pid, fd) {
  return parseInt(/flags:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'latin1'))[1], 8)
}

t.test('the reaper leaves the supervisor\'s stdout blocking, ' +
  'as the pool\'s logger needs it', { skip: !fs.existsSync('/proc/self/fdinfo') && 'no /proc here' }, async (t) => {
  const [port] = await freePorts(1)
  const pool = startPool(['start', path.join(FIXTURES, 'handler.js'), '-n', '1', '--worker-port', String(port),
    '--balancer', 'none', '--log-format', 'json'])
  t.teardown(() => pool.stop('SIGKILL'))
  const { reaperPid } = await pool.waitLog((l) => l.event === 'starting')
  await pool.waitLog((l) => l.event === 'started')
  t.ok(isAlive(reaperPid), `the reaper runs (pid ${reaperPid})`)
  // Its fd 1 is the supervisor's: one open pipe, one set of flags. A full pipe then blocks the
  // supervisor's write instead of failing with EAGAIN (pino's destination sleeps 100 ms on that).
  t.equal(fs.readlinkSync(`/proc/${reaperPid}/fd/1`), fs.readlinkSync(`/proc/${pool.pid}/fd/1`), 'the same pipe')
  await waitFor(() => fs.existsSync(`/proc/${reaperPid}/fdinfo/1`), { what: 'the reaper\'s fd 1' })
  await new Promise((resolve) => setTimeout(resolve, 500)) // the reaper has long finished starting
  t.equal(fdFlags(pool.pid, 1) & O_NONBLOCK, 0, 'the supervisor\'s stdout is still blocking')
})
