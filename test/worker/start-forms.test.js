'use strict'
// `pool start` runs all three app forms unchanged, one worker per slot on its own port.
const t = require('tap')
const path = require('node:path')
const { FIXTURES, freePorts, request, startPool } = require('../helpers')

const FORMS = {
  handler: 'handler.js', // (a) exports (req, res) => {}
  server: 'server-export.js', // (b) exports an http.Server
  listen: 'calls-listen.js' // (c) calls require('pool').listen() itself
}

for (const [form, file] of Object.entries(FORMS)) {
  t.test(`form ${form}: N workers answer on their own ports`, async (t) => {
    const ports = await freePorts(3)
    const pool = startPool(['start', path.join(FIXTURES, file), '-n', '3', '--worker-port', String(ports[0]),
      '--balancer', 'none'])
    t.teardown(() => pool.stop('SIGKILL'))
    await pool.waitLog((l) => l.event === 'started')
    const seen = new Set()
    for (const [i, port] of ports.entries()) {
      const res = await request(`http://127.0.0.1:${port}/`)
      t.equal(res.status, 200, `slot ${i + 1} answers`)
      const body = JSON.parse(res.body)
      t.equal(body.form, form)
      t.equal(body.slot, String(i + 1), `port ${port} is slot ${i + 1}`)
      seen.add(body.pid)
    }
    t.equal(seen.size, 3, 'three distinct processes')
    const spawns = pool.logs.filter((l) => l.event === 'spawn')
    t.same(spawns.map((l) => l.port).sort(), ports, 'spawn lines name each port')
  })
}

t.test('workers get PORT, POOL_WORKER_ID and POOL_WORKERS', async (t) => {
  const ports = await freePorts(2)
  const pool = startPool(['start', path.join(FIXTURES, 'handler.js'), '-n', '2', '--worker-port', String(ports[0]),
    '--balancer', 'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const body = JSON.parse((await request(`http://127.0.0.1:${ports[1]}/`)).body)
  t.same({ slot: body.slot, workers: body.workers, port: body.port },
    { slot: '2', workers: '2', port: String(ports[1]) })
})

t.test('-n defaults to WEB_CONCURRENCY', async (t) => {
  const ports = await freePorts(2)
  const pool = startPool(['start', path.join(FIXTURES, 'handler.js'), '--worker-port', String(ports[0]), '--balancer',
    'none'], { env: { WEB_CONCURRENCY: '2' } })
  t.teardown(() => pool.stop('SIGKILL'))
  const started = await pool.waitLog((l) => l.event === 'started')
  t.equal(started.workers, 2)
})

t.test('the same app file serves on PORT under plain node', async (t) => {
  const { spawn } = require('node:child_process')
  const [port] = await freePorts(1)
  const child = spawn(process.execPath, [path.join(FIXTURES, 'handler.js')],
    { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' })
  t.teardown(() => child.kill('SIGKILL'))
  const { waitFor } = require('../helpers')
  const res = await waitFor(() => request(`http://127.0.0.1:${port}/`), { what: 'plain node server' })
  t.equal(JSON.parse(res.body).form, 'handler')
})
