'use strict'

// Which test run a process belongs to. tap starts every test file, and its `after` script
// (test/no-leftovers.js), from one runner process: "<its pid>:<its start time>" names the run.
// test/helpers.js puts it in process.env as POOL_TEST_RUN, so the pools a test starts, their
// workers and the app's processes carry it, and the check after the suite looks only at this
// run's processes, never at those of another suite running on the same machine, or of a
// developer's own pool.

const { readStat } = require('../../lib/shared/proc')

const RUN_ENV = 'POOL_TEST_RUN'

function testRunMark (runnerPid = process.ppid) {
  return `${runnerPid}:${readStat(runnerPid)?.startTime ?? ''}`
}

module.exports = { RUN_ENV, testRunMark }
