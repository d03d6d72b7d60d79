'use strict'

// examples/container/Dockerfile, which these machines cannot build: what it promises is checked
// from its text (a user that is not root, a stop signal the pool stops gracefully on, the `pool`
// command as the entrypoint so that PID 1 reaps, the HEALTHCHECK on the balancer's /ping), and
// its HEALTHCHECK command is run against a real pool: 0 while it serves, 1 once it stops.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { ROOT, FIXTURES, freePorts, startPool, waitFor } = require('../helpers')

const text = fs.readFileSync(path.join(ROOT, 'examples', 'container', 'Dockerfile'), 'utf8')
// Instructions, continuation lines joined, comments dropped: [{ op, args }].
const instructions = text.replace(/\\\n\s*/g, ' ').split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'))
  .map((l) => { const [op, ...rest] = l.trim().split(/\s+/); return { op: op.toUpperCase(), args: rest.join(' ') } })
const one = (op) => instructions.filter((i) => i.op === op).at(-1)?.args
const execForm = (args) => JSON.parse(args)

t.test('the Dockerfile: not root, a graceful stop signal, the pool command as PID 1', async (t) => {
  t.match(one('FROM'), /^node:(2\d)/, 'a Node.js 20+ base image')
  t.notMatch(one('USER'), /^(root|0)(:|$)/, `USER ${one('USER')}: not root`)
  t.match(one('USER'), /^\d+(:\d+)?$/, 'numeric, so that Kubernetes runAsNonRoot can check it')
  t.ok(['SIGTERM', 'SIGINT'].includes(one('STOPSIGNAL')),
    `STOPSIGNAL ${one('STOPSIGNAL')}: the pool stops gracefully on it`)
  const entrypoint = execForm(one('ENTRYPOINT'))
  t.same(entrypoint, ['pool', 'start'],
    'exec form, the `pool` command itself: no shell, npm or node in between as PID 1')
  t.match(one('ENV'), /node_modules\/\.bin/, 'where the pool command is found')
  const cmd = execForm(one('CMD'))
  t.equal(cmd[cmd.indexOf('--host') + 1], '0.0.0.0', 'the balancer reachable from outside the container')
})

t.test('its HEALTHCHECK asks /ping: 0 while the pool serves, 1 once it stops', async (t) => {
  const cmd = execForm(one('CMD'))
  const port = cmd[cmd.indexOf('--port') + 1]
  const health = execForm(one('HEALTHCHECK').replace(/^.*?CMD\s+/, ''))
  t.equal(health[0], 'node', 'the image has no curl; node asks')
  t.match(health.join(' '), new RegExp(`127\\.0\\.0\\.1:${port}/ping`), 'on the port CMD gives the balancer')
  const [free, workerPort] = await freePorts(3)
  const check = () => spawnSync(process.execPath, health.slice(1).map((a) => a.replace(`:${port}/`, `:${free}/`)),
    { timeout: 5000 }).status
  const pool = startPool(['start', path.join(FIXTURES, 'handler.js'), '-n', '1', '--port', String(free),
    '--worker-port', String(workerPort), '--stop-announce', '3s'])
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started')
  t.equal(check(), 0, 'healthy while it serves')
  pool.kill('SIGTERM')
  await pool.waitLog((l) => l.event === 'balancer-stopping')
  await waitFor(() => check() === 1, { timeout: 3000, what: 'the health check to fail' })
  t.pass('unhealthy once it stops (503, then a refused connection)')
})
