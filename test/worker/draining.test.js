'use strict'
// `require('pool').draining` outside a pool (plain `node app.js`), as documented: loading the
// pool listens for no signal; reading `draining` listens for SIGTERM and SIGINT, which abort it
// (reason: a PoolError WORKER_DRAINING naming the signal) and, with no listener of the app's
// for that signal, still end the process by it; one with its own listener lives on. Under a
// pool it aborts on the drain (test/worker/tunnels.test.js). On main, `draining` did not exist.
const t = require('tap')
const path = require('node:path')
const { spawn } = require('node:child_process')
const WebSocket = require('ws')
const { ROOT, FIXTURES, freePort, waitFor } = require('../helpers')

// `node ARGS` with `env` and without tap's NODE_OPTIONS (its hooks listen for signals): its
// output as it comes, and how it exited.
function run (args, env = {}) {
  const options = { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }
  const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, ...args], options)
  child.out = ''
  child.stdout.on('data', (d) => { child.out += d })
  child.stderr.on('data', (d) => { child.out += d })
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  return child
}

const lines = (child) => child.out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))

t.test('loading the pool listens for no signal; reading `draining` listens for SIGTERM and SIGINT', async (t) => {
  const child = run(['-e', `
    const pool = require('./index.js')
    const before = [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')]
    const signal = pool.draining
    console.log(JSON.stringify({ before, after: [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')],
      same: signal === pool.draining, aborted: signal.aborted, isSignal: signal instanceof AbortSignal }))
  `])
  t.same(await child.exited, { code: 0, signal: null }, child.out)
  t.same(lines(child), [{ before: [0, 0], after: [1, 1], same: true, aborted: false, isSignal: true }])
})

for (const name of ['SIGTERM', 'SIGINT']) {
  t.test(`${name}: the app closes its WebSockets with 1001, and the process still ends by ${name}`, async (t) => {
    const port = await freePort()
    const env = { PORT: String(port), WS_ON_DRAIN: 'close', WS_SAY_LISTENING: '1' }
    const app = run([path.join(FIXTURES, 'ws-app.js')], env)
    t.teardown(() => app.kill('SIGKILL'))
    await waitFor(() => app.out.includes('app-listening'), { what: 'the app listening' })
    const clients = await Promise.all(Array.from({ length: 5 }, () => new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/`)
      const closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve(`${code} ${reason}`)))
      ws.on('error', () => {})
      ws.once('open', () => resolve({ closed }))
      ws.once('unexpected-response', () => reject(new Error('refused')))
    })))
    app.kill(name)
    t.same(await app.exited, { code: null, signal: name }, `ended by ${name}, as without the pool`)
    const closes = await Promise.all(clients.map((c) => c.closed))
    t.same(closes, Array(5).fill('1001 server draining'), 'every client got the app\'s 1001')
    const heard = { code: 'POOL_E_WORKER_DRAINING', reason: name, clients: 5 }
    t.match(lines(app).find((l) => l.event === 'app-draining'), heard)
  })
}

t.test('an app with its own SIGTERM listener: `draining` aborts, the app decides, the process lives on', async (t) => {
  const child = run(['-e', `
    const { draining, codes } = require('./index.js')
    process.on('SIGTERM', () => {
      const r = draining.reason
      const ours = r.code === codes.WORKER_DRAINING
      const reason = r.details.reason
      console.log(JSON.stringify({ aborted: draining.aborted, code: r.code, ours, reason, name: r.name }))
      setTimeout(() => { console.log(JSON.stringify({ alive: true })); process.exit(7) }, 300)
    })
    console.log(JSON.stringify({ ready: true }))
    setInterval(() => {}, 1000)
  `])
  t.teardown(() => child.kill('SIGKILL'))
  await waitFor(() => child.out.includes('ready'), { what: 'the script ready' })
  child.kill('SIGTERM')
  t.same(await child.exited, { code: 7, signal: null }, 'not ended by the signal: the app chose its exit')
  const heard = { aborted: true, code: 'POOL_E_WORKER_DRAINING', ours: true, reason: 'SIGTERM', name: 'PoolError' }
  t.same(lines(child).slice(1), [heard, { alive: true }])
})

// signal-exit (tap's own, here) re-raises a signal only when its listeners are alone: the pool's
// is not the app's, so the process still ends by the signal, signal-exit's hook run first.
const signalExit = (() => { try { return require.resolve('signal-exit') } catch { return null } })()
const skip = signalExit ? false : 'signal-exit is not installed'
t.test('with signal-exit loaded too, SIGTERM still ends the process, its exit hook run', { skip }, async (t) => {
  const child = run(['-e', `
    const { onExit } = require(${JSON.stringify(signalExit)})
    onExit((code, signal) => console.log(JSON.stringify({ hook: signal })))
    const { draining } = require('./index.js')
    draining.addEventListener('abort', () => console.log(JSON.stringify({ aborted: draining.reason.details.reason })))
    console.log(JSON.stringify({ ready: true }))
    setInterval(() => {}, 1000)
  `])
  t.teardown(() => child.kill('SIGKILL'))
  await waitFor(() => child.out.includes('ready'), { what: 'the script ready' })
  child.kill('SIGTERM')
  t.same(await child.exited, { code: null, signal: 'SIGTERM' }, child.out)
  t.same(lines(child).slice(1), [{ aborted: 'SIGTERM' }, { hook: 'SIGTERM' }])
})
