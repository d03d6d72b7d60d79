'use strict'
// Bad input: one clear line on stderr and a non-zero exit.
const t = require('tap')
const net = require('node:net')
const path = require('node:path')
const { FIXTURES, freePorts, runPool } = require('./helpers')

const app = path.join(FIXTURES, 'handler.js')

t.test('missing app', async (t) => {
  const r = await runPool(['start', 'no/such/app.js', '--balancer', 'none'])
  t.equal(r.code, 2)
  t.match(r.stderr, /^pool: cannot find app 'no\/such\/app\.js' \(looked for .*no\/such\/app\.js\)\n$/)
})

t.test('a worker port already taken names the port and the slot', async (t) => {
  const ports = await freePorts(3)
  const blocker = net.createServer().listen(ports[1], '127.0.0.1')
  await new Promise((resolve) => blocker.once('listening', resolve))
  t.teardown(() => blocker.close())
  const r = await runPool(['start', app, '-n', '3', '--worker-port', String(ports[0]), '--balancer', 'none'])
  t.equal(r.code, 2)
  t.equal(r.stderr, `pool: port ${ports[1]} (slot 2) is already in use on 127.0.0.1\n`)
})

for (const bad of ['0', '-1', 'abc', '2.5']) {
  t.test(`-n ${bad}`, async (t) => {
    const r = await runPool(['start', app, '-n', bad, '--balancer', 'none'])
    t.equal(r.code, 2)
    t.match(r.stderr, /pool: .*(workers|-n|--workers).* must be a positive integer|pool: --workers must be a positive integer/)
  })
}

t.test('unknown option: help text and the offending flag', async (t) => {
  const r = await runPool(['start', app, '--bogus-flag', '1'])
  t.equal(r.code, 2)
  t.match(r.stderr, /Options:/, 'shows the help')
  t.match(r.stderr, /pool: Unknown arguments?: .*bogus-flag/)
})

t.test('a bad duration', async (t) => {
  const r = await runPool(['start', app, '--timeout', 'soon', '--balancer', 'none'])
  t.equal(r.code, 2)
  t.equal(r.stderr, "pool: --timeout must be a duration like 30, 2.5s or 500ms (got 'soon')\n")
})

t.test('no command', async (t) => {
  const r = await runPool([])
  t.equal(r.code, 2)
  t.match(r.stderr, /pool: give a command/)
})
