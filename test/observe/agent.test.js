'use strict'

// The HAProxy agent-check responder (lib/observe/agent.js): the line it gives for each state of the
// pool, what a raw connection sees, that a broken connection or a failing status cannot take it
// down, and, against a real HAProxy 2.6 and a real pool, that the edge's limit for the host
// follows the pool's ready workers, that a stop drains the host, and that a restarted pool
// brings it back.

const t = require('tap')
const net = require('node:net')
const fs = require('node:fs')
const path = require('node:path')
const pino = require('pino')
const { FIXTURES, freePorts, canBind, sleep, waitFor, request, tempDir } = require('../helpers')
const { startHaproxy, onPlatforms } = require('../helpers/haproxy')
const { HaproxyClient } = require('../../lib/haproxy/client')
const { AgentResponder, agentReply } = require('../../lib/observe/agent')
const { Pool } = require('../../lib/supervisor/pool')

const silent = pino({ level: 'silent' })
const workers = (...states) => states.map((state, i) => ({ slot: i + 1, state }))

t.test('agentReply: one rule per state of the pool', async (t) => {
  const running = { phase: 'running', target: 3, reload: null }
  t.equal(agentReply({ ...running, workers: workers('ready', 'busy', 'ready') }), 'up ready maxconn:3',
    'serving: up, ready (undoes an earlier drain), maxconn = ready and busy workers')
  t.equal(agentReply({ ...running, workers: workers('ready', 'dead', 'booting') }), 'up ready maxconn:1',
    'dead and booting workers are not counted')
  t.equal(agentReply({ ...running, workers: workers('busy', 'draining', 'given-up') }), 'up ready maxconn:1',
    'nor draining or given-up ones')
  t.equal(agentReply({ ...running, workers: workers('dead', 'booting', 'given-up') }), 'down #no worker ready',
    'running without a ready worker: down (maxconn:0 would mean no limit)')
  t.equal(agentReply({ phase: 'starting', target: 2, reload: null, workers: workers('booting', 'booting') }),
    'down #no worker ready',
    'starting, nothing ready yet: down')
  t.equal(agentReply({ phase: 'starting', target: 2, reload: null, workers: workers('ready', 'booting') }),
    'up ready maxconn:1',
    'starting with one ready: that one serves')
  t.equal(agentReply({ phase: 'idle', target: 2, reload: null, workers: [] }), 'down #no worker ready',
    'not started: down')
  t.equal(agentReply({ phase: 'stopping', target: 2, reload: null, workers: workers('busy', 'ready') }),
    'drain #stopping',
    'stopping: drain, even with workers still ready')
  t.equal(agentReply({ phase: 'stopped', target: 2, reload: null, workers: [] }), 'drain #stopped', 'stopped: drain')
  const reload = { stage: 'replacing', pending: 2, active: [], replaced: 1 }
  const fewReady = {
    phase: 'running', target: 4, reload, workers: workers('ready', 'draining', 'draining', 'booting')
  }
  t.equal(agentReply(fewReady),
    'up ready maxconn:1 #reloading: 1 of 4 ready',
    'reloading with fewer than half ready: still up, the limit follows, the reason says why')
  t.equal(agentReply({ phase: 'running', target: 4, reload, workers: workers('ready', 'busy', 'ready', 'draining') }),
    'up ready maxconn:3 #reloading: 3 of 4 ready', 'reloading with most ready')
  t.equal(agentReply({ phase: 'running', target: 2, reload, workers: workers('draining', 'booting') }),
    'down #no worker ready',
    'reloading with none ready: down')
  t.equal(agentReply({ phase: 'stopping', target: 2, reload, workers: workers('ready', 'ready') }), 'drain #stopping',
    'a stop wins over a reload')
})

// Connect as HAProxy does, write what `agent-send` would, and collect until the agent ends.
// allowHalfOpen: 'end' then means the agent closed its side, not us.
function exchange (port, { send = 'hello\n' } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true })
    let data = ''
    let endedByAgent = false
    let error = null
    socket.setEncoding('utf8')
    socket.on('connect', () => socket.write(send))
    socket.on('data', (d) => { data += d })
    socket.on('end', () => { endedByAgent = true; socket.end() })
    socket.on('error', (err) => { error = err })
    socket.on('close', () => resolve({ data, endedByAgent, error }))
    socket.setTimeout(5000, () => socket.destroy(new Error('the agent kept the connection open')))
  })
}

async function startAgent (t, pool, options = {}) {
  const [port] = await freePorts(1)
  const agent = new AgentResponder({ host: '127.0.0.1', port, status: () => pool.status(), logger: silent, ...options })
  await agent.start()
  t.teardown(() => agent.stop())
  return agent
}

function capturingLogger () {
  const lines = []
  const log = (level) => (obj, msg) => lines.push({ level, ...obj, msg })
  return { lines, debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') }
}

t.test('a raw connection: exactly one line, then the agent closes', async (t) => {
  const pool = { status: () => ({ phase: 'running', target: 2, reload: null, workers: workers('ready', 'busy') }) }
  const agent = await startAgent(t, pool)
  t.equal(agent.address, `127.0.0.1:${agent.port}`)
  t.equal(agent.url, `tcp://127.0.0.1:${agent.port}`)
  const r = await exchange(agent.port)
  t.equal(r.data, 'up ready maxconn:2\n', 'one line, ending in a newline')
  t.ok(r.endedByAgent, 'the agent ended the connection')
  t.equal(r.error, null)
  const silentClient = await exchange(agent.port, { send: '' })
  t.equal(silentClient.data, 'up ready maxconn:2\n', 'the line comes at once, whether the edge sends anything or not')
})

t.test('nothing a connection or the pool does takes the agent down', async (t) => {
  let broken = true
  const pool = {
    status: () => {
      if (broken) throw new Error('status exploded')
      return { phase: 'running', target: 1, reload: null, workers: workers('ready') }
    }
  }
  const logger = capturingLogger()
  const agent = await startAgent(t, pool, { logger })

  const first = await exchange(agent.port)
  t.equal(first.data, '',
    'a failing status(): the connection is closed without a line (the edge keeps the server as it was)')
  await exchange(agent.port)
  t.same(logger.lines.filter((l) => l.event === 'agent-status-failed').map((l) => l.level), ['warn', 'debug'],
    'said once at warn, then at debug')

  // A reset right after connecting, and one after sending a lot: as HAProxy closes its checks.
  for (const payload of ['', 'x'.repeat(256 * 1024)]) {
    await new Promise((resolve) => {
      const s = net.connect({ port: agent.port, host: '127.0.0.1' },
        () => { if (payload) s.write(payload); s.resetAndDestroy() })
      s.on('error', () => {})
      s.on('close', resolve)
    })
  }
  broken = false
  const after = await exchange(agent.port)
  t.equal(after.data, 'up ready maxconn:1\n', 'the agent still answers, and status() is read per connection')
})

t.test('each connection has a bounded life, and stop() cuts those still open', async (t) => {
  const pool = { status: () => ({ phase: 'running', target: 1, reload: null, workers: workers('ready') }) }
  const short = await startAgent(t, pool, { socketLife: 200 })
  const lingering = net.connect({ port: short.port, host: '127.0.0.1', allowHalfOpen: true }) // never ends its side
  lingering.on('error', () => {}).resume()
  t.teardown(() => lingering.destroy())
  await new Promise((resolve) => lingering.once('end', resolve))
  t.equal(short.sockets.size, 1, 'a connection whose edge never closes is still held after the line')
  await waitFor(() => short.sockets.size === 0, { timeout: 3000, what: 'the connection to be cut' })
  t.pass('and cut once its life is over')

  const long = await startAgent(t, pool, { socketLife: 60000 })
  const held = net.connect({ port: long.port, host: '127.0.0.1', allowHalfOpen: true })
  held.on('error', () => {}).resume()
  t.teardown(() => held.destroy())
  await new Promise((resolve) => held.once('end', resolve))
  const stopped = await Promise.race([long.stop().then(() => true), sleep(5000).then(() => false)])
  t.ok(stopped, 'stop() resolves without waiting for the open connection\'s life to end')
  t.equal(long.sockets.size, 0)
  t.ok(await canBind(long.port), 'the port is free again')
  await long.stop() // a second stop is harmless
})

t.test('an address it cannot listen on: one line naming the flags and the address', async (t) => {
  const pool = { status: () => ({ phase: 'idle', workers: [] }) }
  const first = await startAgent(t, pool)
  const again = new AgentResponder({ host: '127.0.0.1', port: first.port, status: () => pool.status(), logger: silent })
  await t.rejects(again.start(),
    {
      name: 'PoolError',
      code: 'POOL_E_PORT_IN_USE',
      message: `agent address 127.0.0.1:${first.port} is already in use (--agent-port, --agent-host)`
    })
  // 192.0.2.1 (TEST-NET-1) is on no interface here: nothing is sent, the bind fails at once.
  const [port] = await freePorts(1)
  const foreign = new AgentResponder({ host: '192.0.2.1', port, status: () => pool.status(), logger: silent })
  const err = await foreign.start().then(() => null, (e) => e)
  if (err === null) { // a host set to bind any address (net.ipv4.ip_nonlocal_bind = 1)
    await foreign.stop()
    return t.skip('this host lets a process listen on an address it does not have')
  }
  t.match(err,
    {
      name: 'PoolError',
      code: 'POOL_E_BAD_OPTION',
      message: /^cannot listen for the HAProxy agent on 192\.0\.2\.1:\d+ \(--agent-host, --agent-port\): address not available on this host$/
    })
  t.notOk(err.message.includes('\n'), 'one line')
  await foreign.stop() // never listened: stop() is a no-op
})

// The edge's view of the one server standing for this host.
async function edgeServer (client) {
  return (await client.servers('edge')).host1
}

// Wait until the edge's server matches `want` ({ state, slim }); resolves with its row.
function edgeShows (client, want, what) {
  return waitFor(async () => {
    const s = await edgeServer(client)
    return Object.entries(want).every(([k, v]) => s[k] === v) && s
  }, { timeout: 5000, interval: 50, what: `the edge to show ${what}` })
}

onPlatforms(t, 'a real HAProxy follows a real pool: maxconn = ready workers, drain on stop, ' +
  'back on restart', async (t, platform) => {
  const dir = tempDir(t, 'pool-agent-', { openToOthers: true })
  const [workerPort, , , agentPort] = await freePorts(4)
  const renders = path.join(dir, 'renders.log')
  fs.writeFileSync(renders, '')
  const newPool = (n) => {
    const pool = new Pool({
      app: path.join(FIXTURES, 'chaos-app.js'),
      workers: n,
      workerPort,
      logger: silent,
      env: { CHAOS_LOG: renders },
      gracefulTimeout: 10000
    })
    t.teardown(() => pool.kill())
    return pool
  }
  // The agent outlives the pools, as if each were a `pool start` on the same host in turn.
  let pool = newPool(2)
  const agent = new AgentResponder({ host: '127.0.0.1', port: agentPort, status: () => pool.status(), logger: silent })
  await agent.start()
  t.teardown(() => agent.stop())

  const socket = path.join(dir, 'admin.sock')
  await startHaproxy({
    platform,
    t,
    dir,
    cfg: `global
  stats socket ${socket} mode 600 level admin
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
backend edge
  balance leastconn
  server host1 127.0.0.1:${workerPort} agent-check agent-port ${agentPort} agent-inter 200ms
`
  })
  const client = new HaproxyClient({ socket })

  let s = await edgeShows(client, { state: 'down' }, 'the host DOWN before the pool started (no worker ready)')
  t.match(s.last_agt, /no worker ready/, 'before the pool starts: down, and the edge shows the reason')
  await pool.start()
  s = await edgeShows(client, { state: 'ready', slim: 2 }, 'the host UP with slim 2')
  t.equal(s.slim, 2, 'a later `up` undoes `down`, and maxconn sets slim to the ready workers (2)')
  t.match(s.agent_status, /^L7OK/)

  await pool.scale(3)
  s = await edgeShows(client, { slim: 3 }, 'slim 3 after scale(3)')
  t.equal(s.slim, 3, 'the limit follows a scale within a few agent intervals')

  // An operator's maint is undone by the agent's `ready`; with the agent disabled it stays.
  // (setServerState resolves once HAProxy applied it; reading it back could race the agent.)
  await client.setServerState('edge', 'host1', 'maint')
  await edgeShows(client, { state: 'ready' }, 'the agent to undo the CLI maint')
  t.pass('the agent\'s `ready` undoes a CLI maint')
  await client.command('disable agent edge/host1')
  await client.setServerState('edge', 'host1', 'maint')
  await sleep(800) // four agent intervals
  t.equal((await edgeServer(client)).state, 'maint', 'after `disable agent`, a CLI maint stays')
  await client.setServerState('edge', 'host1', 'ready')
  await client.command('enable agent edge/host1')
  await edgeShows(client, { state: 'ready', slim: 3 }, 'the host back under the agent')

  // A stop with a render running: the edge drains the host while it finishes.
  const render = request(`http://127.0.0.1:${workerPort}/?ms=3000`)
  await waitFor(() => pool.workers().some((w) => w.state === 'busy'), { timeout: 3000, what: 'a busy worker' })
  const stopping = pool.stop()
  await edgeShows(client, { state: 'drain' }, 'the host DRAIN while the pool stops')
  t.equal(pool.phase, 'stopping', 'DRAIN while the pool is still stopping')
  t.match((await edgeServer(client)).status, /^DRAIN/)
  t.equal((await render).status, 200, 'the running render finished')
  t.same(await stopping, { clean: true })

  // The next pool on this host: `down` while it boots, then `up ready` clears the drain.
  pool = newPool(1)
  await pool.start()
  s = await edgeShows(client, { state: 'ready', slim: 1 }, 'the host UP with slim 1 under the new pool')
  t.equal(s.slim, 1, 'a later `ready` undoes the stop\'s drain')
  await pool.stop()
})
