'use strict'

// A GET's path through the embedded balancer, as bench/request-path.js counts it: a request is
// never written to a worker from inside another exchange's socket callback (the place a response
// frees is handed on after that callback returns), and the worker connection, not the request's
// handler, decides on the connection's reuse.

const t = require('tap')
const path = require('node:path')
const { execFile } = require('node:child_process')

const SCRIPT = path.join(__dirname, '..', '..', '..', 'bench', 'request-path.js')

t.test('no re-entrant write; the handler calls nothing back in its connection', async (t) => {
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, [SCRIPT, '--json'], { timeout: 60000 },
      (err, stdout) => err ? reject(err) : resolve(stdout))
  })
  const path = JSON.parse(out)
  t.ok(path.alone.called['Connection.onData'] > 0 && path.alone.called['Connection.send'] > 0,
    'the worker connection\'s reads and writes were traced')
  t.equal(path.handOff.sends, 2, 'both requests went to the worker')
  t.ok(path.handOff.queued >= 1, 'the second waited in the queue for the first one\'s place')
  t.equal(path.handOff.reentrantWrites, 0, 'the queued request is written outside the first response\'s read')
  t.same(path.alone.callBackKinds, [],
    'no step calls back up into its owner (a request taken at once is begun by the caller)')
  for (const kind of path.alone.callBackKinds) {
    t.notMatch(kind, /→ (Connection|ConnectionPool)\./, `no call back into the worker connection (${kind})`)
    t.notMatch(kind, /→ Attempt\./, `no call back into the attempt (${kind})`)
  }
})
