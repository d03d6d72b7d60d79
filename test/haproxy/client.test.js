'use strict'

// The runtime API client against a real HAProxy started by each test from a generated config,
// on loopback and in a temp directory: Debian 12's 2.6 and Debian 13's 3.0 (onPlatforms).

const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const http = require('node:http')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { HaproxyClient, parseAddress } = require('../../lib/haproxy/client')
const { parseCsv, parseStat, serverState } = require('../../lib/haproxy/stat')
const { haproxyConfig } = require('../../lib/generate/haproxy')
const { freePorts, waitFor, ROOT, nodeAnyoneRuns, checkoutHiddenFromOthers, tempDir } = require('../helpers')
const { startHaproxy, onPlatforms, IS_ROOT } = require('../helpers/haproxy')

// Tiny HTTP servers on the worker ports, so that HAProxy's connect checks pass.
async function startWorkers (t, ports) {
  for (const port of ports) {
    const server = http.createServer((req, res) => res.end(`port ${port}\n`))
    await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve))
    t.teardown(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve) }))
  }
}

// haproxy from `pool config haproxy` for `workers` servers, plus extra `global` lines.
async function startLab (t, { workers = 2, extraGlobal = () => [], edit = (cfg) => cfg, platform } = {}) {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const ports = await freePorts(workers + 3)
  const [port, statsPort, apiPort] = ports
  const workerPorts = ports.slice(3)
  await startWorkers(t, workerPorts)
  let cfg = haproxyConfig({ workers, port, statsPort, workerPort: workerPorts[0], prefix: dir, log: 'none' })
  const extra = extraGlobal({ dir, apiPort }).map((line) => `    ${line}\n`).join('')
  cfg = edit(cfg.replace('global\n', 'global\n' + extra))
  const haproxy = await startHaproxy({ cfg, dir, t, platform })
  return { dir, haproxy, apiPort, workerPorts, client: new HaproxyClient({ socket: haproxy.socket }) }
}

async function rejection (promise) {
  try { await promise } catch (err) { return err }
  throw new Error('expected a rejection')
}

t.test('show stat CSV: quoted fields with commas, doubled quotes and newlines', async (t) => {
  const text = '# pxname,svname,scur,status,check_desc,addr,\n' +
    'pool,worker1,0,UP,"agent says: down, ""busy""\nsee log",127.0.0.1:9002,\n' +
    '\n' +
    'pool,BACKEND,3,UP,,,\n'
  t.same(parseCsv('a,"b,c"\n"d\ne",f\n'), [['a', 'b,c'], ['d\ne', 'f']])
  const rows = parseStat(text)
  t.equal(rows.length, 2)
  t.same(rows[0],
    {
      pxname: 'pool',
      svname: 'worker1',
      scur: 0,
      status: 'UP',
      check_desc: 'agent says: down, "busy"\nsee log',
      addr: '127.0.0.1:9002'
    })
  t.equal(rows[1].scur, 3, 'numbers are numbers')
  t.equal(rows[1].check_desc, null, 'empty fields are null')
  const states = ['no check', 'UP', 'UP 1/3', 'DRAIN', 'MAINT', 'MAINT (via pool/worker1)', 'DOWN', 'DOWN (agent)']
  t.same(states.map(serverState),
    ['ready', 'ready', 'ready', 'drain', 'maint', 'maint', 'down', 'down'])
})

t.test('socket addresses: unix paths and host:port', async (t) => {
  t.same(parseAddress('/run/pool/haproxy-admin.sock'),
    { path: '/run/pool/haproxy-admin.sock', label: '/run/pool/haproxy-admin.sock' })
  t.same(parseAddress('unix@/tmp/a.sock'), { path: '/tmp/a.sock', label: '/tmp/a.sock' })
  t.same(parseAddress('127.0.0.1:9999'), { host: '127.0.0.1', port: 9999, label: '127.0.0.1:9999' })
  t.same(parseAddress('[::1]:9999'), { host: '::1', port: 9999, label: '[::1]:9999' })
  t.throws(() => parseAddress(''), { code: 'POOL_E_BAD_OPTION' })
})

onPlatforms(t, 'set server state, read back through show stat', async (t, platform) => {
  const { client } = await startLab(t, { platform })
  const status = async (name) => (await client.servers('pool'))[name].status
  t.equal(await status('worker1'), 'MAINT', 'servers start disabled')
  t.equal(await status('worker2'), 'MAINT')

  await client.setServerState('pool', 'worker1', 'ready')
  t.equal(await status('worker1'), 'UP')
  await client.setServerState('pool', 'worker1', 'drain')
  t.equal(await status('worker1'), 'DRAIN')
  await client.setServerState('pool', 'worker1', 'maint')
  t.equal(await status('worker1'), 'MAINT')
  t.equal(await status('worker2'), 'MAINT', 'other servers untouched')

  const rows = await client.showStat('pool')
  const backend = rows.find((r) => r.svname === 'BACKEND')
  t.equal(backend.pxname, 'pool')
  t.equal(typeof backend.qcur, 'number')
  const worker1 = rows.find((r) => r.svname === 'worker1')
  t.equal(worker1.slim, 1, 'maxconn 1 per server')
  t.equal(worker1.scur, 0)
  const servers = await client.servers('pool')
  t.same(Object.keys(servers), ['worker1', 'worker2'], 'servers() lists servers only')
  t.equal(servers.worker1.state, 'maint')
})

onPlatforms(t, 'commands reach HAProxy in the order they were asked for', async (t, platform) => {
  const { client } = await startLab(t, { platform, workers: 1 })
  const states = []
  for (let i = 0; i < 30; i++) states.push(['ready', 'maint', 'drain'][i % 3])
  states.push('maint', 'ready')
  await Promise.all(states.map((s) => client.setServerState('pool', 'worker1', s))) // not awaited one by one
  t.equal((await client.servers('pool')).worker1.status, 'UP', 'the last command asked for wins')
})

onPlatforms(t, 'commands one after another on one client each take effect in turn', async (t, platform) => {
  const { client } = await startLab(t, { platform, workers: 1 })
  const seen = []
  const n = 50
  const started = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    await client.setServerState('pool', 'worker1', i % 2 ? 'ready' : 'maint')
    if (i % 10 === 0 || i % 10 === 1) seen.push((await client.servers('pool')).worker1.status)
  }
  // The cost against MAINT-on-exit's 10 ms budget is measured in bench/haproxy-kill.js.
  t.comment(`set server state: ${(Number(process.hrtime.bigint() - started) / 1e6 / n).toFixed(2)} ms per command, ` +
    'with the reads')
  t.same(seen, Array(5).fill(['MAINT', 'UP']).flat(), 'each command applied before the next one')
})

onPlatforms(t, 'runtime API over host:port', async (t, platform) => {
  const { client, apiPort } = await startLab(t, {
    platform,
    workers: 1,
    extraGlobal: ({ apiPort }) => [`stats socket ipv4@127.0.0.1:${apiPort} level admin`]
  })
  const tcp = new HaproxyClient({ socket: `127.0.0.1:${apiPort}` })
  t.equal(await tcp.level(), 'admin')
  await tcp.setServerState('pool', 'worker1', 'drain')
  t.equal((await client.servers('pool')).worker1.status, 'DRAIN', 'seen through the unix socket too')
})

onPlatforms(t, 'a real quoted field: an agent reply with a comma and quotes', async (t, platform) => {
  const [agentPort] = await freePorts(1)
  const agent = net.createServer((s) => { s.on('error', () => {}); s.end('up #hello, "world"\n') })
  await new Promise((resolve) => agent.listen(agentPort, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => agent.close(resolve)))
  const { client, workerPorts } = await startLab(t, {
    platform,
    workers: 1,
    edit: (cfg) => cfg.replace(/^(\s*server worker1 \S+)$/m, `$1 agent-check agent-port ${agentPort} agent-inter 100ms`)
  })
  await client.setServerState('pool', 'worker1', 'ready')
  const row = await waitFor(async () => {
    const r = (await client.servers('pool')).worker1
    return r.last_agt?.includes('hello') && r
  }, { timeout: 10000, what: 'the agent reply in show stat' })
  t.equal(row.last_agt, 'via agent : up (hello, "world")', 'comma and doubled quotes decoded')
  t.equal(row.addr, `127.0.0.1:${workerPorts[0]}`, 'columns after the quoted field stay aligned')
  t.equal(row.status, 'UP')
})

onPlatforms(t, 'verify: the backend and every server the pool needs', async (t, platform) => {
  const { client } = await startLab(t, { platform })
  const servers = await client.verify('pool', ['worker1', 'worker2'])
  t.same(Object.keys(servers), ['worker1', 'worker2'])

  const missing = await rejection(client.verify('pool', ['worker1', 'worker2', 'worker3', 'worker4']))
  t.equal(missing.code, 'POOL_E_HAPROXY_NO_SERVER')
  t.same(missing.details, { backend: 'pool', missing: ['worker3', 'worker4'] })
  t.match(missing.message, /backend 'pool'.*'worker3', 'worker4'/)

  const noBackend = await rejection(client.verify('ssr', ['worker1']))
  t.equal(noBackend.code, 'POOL_E_HAPROXY_NO_BACKEND')
  t.match(noBackend.message, /no backend 'ssr'/)

  const frontend = await rejection(client.verify('pool_http', ['worker1']))
  t.equal(frontend.code, 'POOL_E_HAPROXY_NO_BACKEND')
  t.match(frontend.message, /'pool_http' is a frontend/)
})

onPlatforms(t, 'errors from HAProxy name the backend or server the pool expected', async (t, platform) => {
  const { client } = await startLab(t, { platform })
  const noBackend = await rejection(client.setServerState('ssr', 'worker1', 'ready'))
  t.equal(noBackend.code, 'POOL_E_HAPROXY_NO_BACKEND')
  t.match(noBackend.message, /no backend 'ssr'/)
  t.equal((await rejection(client.showStat('ssr'))).code, 'POOL_E_HAPROXY_NO_BACKEND')

  const noServer = await rejection(client.setServerState('pool', 'worker9', 'ready'))
  t.equal(noServer.code, 'POOL_E_HAPROXY_NO_SERVER')
  t.match(noServer.message, /backend 'pool' has no server 'worker9'/)

  t.equal((await rejection(client.setServerState('pool', 'worker1;shutdown frontend pool_http', 'ready'))).code,
    'POOL_E_BAD_OPTION',
    'names that would smuggle a second command are refused')
  await t.rejects(client.setServerState('pool', 'worker1', 'up'), TypeError)
})

onPlatforms(t, 'a socket below level admin → POOL_E_HAPROXY_LEVEL', async (t, platform) => {
  const { client, dir } = await startLab(t, {
    platform,
    extraGlobal: ({ dir }) => [`stats socket ${path.join(dir, 'operator.sock')} mode 600 level operator`]
  })
  const operator = new HaproxyClient({ socket: path.join(dir, 'operator.sock') })
  t.equal(await operator.level(), 'operator')
  const refused = await rejection(operator.setServerState('pool', 'worker1', 'ready'))
  t.equal(refused.code, 'POOL_E_HAPROXY_LEVEL')
  t.match(refused.message, /operator\.sock is not at level admin/)
  t.equal((await client.servers('pool')).worker1.status, 'MAINT', 'nothing changed')
  const verify = await rejection(operator.verify('pool', ['worker1', 'worker2']))
  t.equal(verify.code, 'POOL_E_HAPROXY_LEVEL', 'verify checks the level before the pool relies on it')
  t.match(verify.message, /its level is 'operator'/)
})

onPlatforms(t, 'a missing socket, and HAProxy gone → POOL_E_HAPROXY_SOCKET naming the path', async (t, platform) => {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const missingPath = path.join(dir, 'nope.sock')
  const missing = await rejection(new HaproxyClient({ socket: missingPath }).level())
  t.equal(missing.code, 'POOL_E_HAPROXY_SOCKET')
  t.ok(missing.message.includes(missingPath), missing.message)
  t.equal(missing.details.reason, 'ENOENT')

  const { client, haproxy } = await startLab(t, { platform, workers: 1 })
  await haproxy.stop()
  const gone = await rejection(client.setServerState('pool', 'worker1', 'maint'))
  t.equal(gone.code, 'POOL_E_HAPROXY_SOCKET')
  t.ok(gone.message.includes(haproxy.socket), gone.message)

  const [closedPort] = await freePorts(1)
  const refused = await rejection(new HaproxyClient({ socket: `127.0.0.1:${closedPort}` }).level())
  t.equal(refused.code, 'POOL_E_HAPROXY_SOCKET')
  t.match(refused.message, new RegExp(`127\\.0\\.0\\.1:${closedPort}`))
})

t.test('a socket that never answers → a timeout, not a hang', async (t) => {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const socket = path.join(dir, 'silent.sock')
  const conns = new Set()
  const silent = net.createServer((s) => { conns.add(s); s.on('error', () => {}).resume() }) // reads, never replies
  await new Promise((resolve) => silent.listen(socket, resolve))
  t.teardown(() => new Promise((resolve) => { for (const c of conns) c.destroy(); silent.close(resolve) }))
  const client = new HaproxyClient({ socket, timeout: 200 })
  const started = Date.now()
  const err = await rejection(client.level())
  const elapsed = Date.now() - started
  t.equal(err.code, 'POOL_E_HAPROXY_SOCKET')
  t.equal(err.details.reason, 'timeout')
  t.match(err.message, /did not answer "show cli level".*within 200 ms/)
  t.ok(elapsed >= 190 && elapsed < 1000, `gave up after ${elapsed} ms`)
})

// The client's verdict when run in a child process as user `uid` (root is never refused a
// socket by its mode, so the permission case needs another user).
function clientAs (uid, socket) {
  const code = `
    const { HaproxyClient } = require(${JSON.stringify(path.join(ROOT, 'lib/haproxy/client'))})
    new HaproxyClient({ socket: ${JSON.stringify(socket)} }).level()
      .then((level) => console.log(JSON.stringify({ level })),
            (err) => console.log(JSON.stringify({ code: err.code, message: err.message })))`
  return new Promise((resolve, reject) => {
    // Without NODE_OPTIONS: tap's hooks (added to every spawn) would write tap's files as `uid`.
    const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', nodeAnyoneRuns(), '-e', code],
      { uid, gid: uid, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), 10000)
    child.on('exit',
      () => {
        clearTimeout(timer)
        try { resolve(JSON.parse(out)) } catch (err) { reject(new Error(`child said: ${out}`)) }
      })
  })
}

// As root, the refusal is seen by a child running as nobody, which loads the client from here.
t.test('permission denied on the socket file → ' +
  'POOL_E_HAPROXY_PERMISSION', { skip: IS_ROOT && checkoutHiddenFromOthers() }, async (t) => {
  const NOBODY = 65534
  const { dir } = await startLab(t, {
    workers: 1,
    // A second admin socket owned by `nobody`: proves that `nobody` can reach the directory
    // and that only the file's mode refuses the first one.
    extraGlobal: ({ dir }) => IS_ROOT
      ? [`stats socket ${path.join(dir, 'nobody.sock')} mode 600 level admin user nobody`]
      : []
  })
  const socket = path.join(dir, 'haproxy-admin.sock')
  if (IS_ROOT) {
    t.equal(fs.statSync(socket).mode & 0o777, 0o600, 'mode 600, owned by root')
    t.same(await clientAs(NOBODY, path.join(dir, 'nobody.sock')), { level: 'admin' }, 'nobody may use its own socket')
    const refused = await clientAs(NOBODY, socket)
    t.equal(refused.code, 'POOL_E_HAPROXY_PERMISSION')
    t.ok(refused.message.includes(socket), refused.message)
  } else {
    fs.chmodSync(socket, 0o000)
    const refused = await rejection(new HaproxyClient({ socket }).level())
    t.equal(refused.code, 'POOL_E_HAPROXY_PERMISSION')
    t.ok(refused.message.includes(socket), refused.message)
  }
})

onPlatforms(t, 'info() reads show info', async (t, platform) => {
  const { client, haproxy } = await startLab(t, { platform, workers: 1 })
  const info = await client.info()
  t.equal(info.Pid, haproxy.pid, 'the pid of the haproxy we started (-db: no master)')
  t.equal(typeof info.Uptime_sec, 'number')
})
