'use strict'

// `pool config haproxy|nginx`: the configs are accepted by the real HAProxy and nginx, Debian 12's
// (2.6, 1.22) and Debian 13's (3.0, 1.26), behave as their comments say when run on each
// (onPlatforms), and conf/ holds exactly what the generator prints.

const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const http = require('node:http')
const path = require('node:path')
const { haproxyConfig } = require('../../lib/generate/haproxy')
const { nginxConfig } = require('../../lib/generate/nginx')
const { HaproxyClient } = require('../../lib/haproxy/client')
const { spawn, spawnSync } = require('node:child_process')
const {
  ROOT, BIN, cleanEnv, nodeAnyoneRuns, checkoutHiddenFromOthers, freePorts, request, runPool, waitFor, tempDir,
  stopChild
} = require('../helpers')
const {
  checkHaproxyConfig, checkNginxConfig, startHaproxy, startNginxInFront, onPlatforms, SYSTEM,
  NGINX_WORKER_USER, IS_ROOT
} = require('../helpers/haproxy')
const { startStreamingWorker, timedGet } = require('../helpers/streaming')

// nginx's default worker user when started as root, and the unprivileged user of the tests.
const NOBODY = { uid: 65534, gid: 65534 }

function writeFile (dir, name, text) {
  const file = path.join(dir, name)
  fs.writeFileSync(file, text)
  return file
}

// An HTTP "worker" on `port` that counts what it received; `render` ms per request.
async function startWorker (t, port, { render = 0, body = () => `worker on ${port}\n` } = {}) {
  const worker = { requests: [], inFlight: 0, maxInFlight: 0 }
  const server = http.createServer((req, res) => {
    worker.inFlight++
    worker.maxInFlight = Math.max(worker.maxInFlight, worker.inFlight)
    worker.requests.push({ url: req.url, headers: req.headers, at: Date.now() })
    setTimeout(() => { worker.inFlight--; res.end(body(req)) }, render)
  })
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve))
  worker.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  t.teardown(worker.close)
  return worker
}

onPlatforms(t, 'haproxy -c accepts the generated config', async (t, platform) => {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const variants = {
    defaults: { workers: 15 },
    'static-rr, spares, users': {
      workers: 4,
      maxWorkers: 8,
      balance: 'static-rr',
      socketUser: 'nobody',
      httpSocketUser: 'nobody',
      user: 'nobody',
      group: 'nogroup',
      log: 'stdout'
    },
    'one worker, no log': { workers: 1, log: 'none', prefix: dir },
    'state file (not there yet: a warning only)': {
      workers: 2,
      prefix: dir,
      stateFile: path.join(dir, 'haproxy.state')
    },
    'no queue cap': { workers: 2, maxQueue: 0 },
    'a queue cap that lets the high class in': {
      workers: 2,
      maxQueue: 5,
      priorityRoutes: '/health=high',
      priorityHeader: 'X-Priority'
    },
    'stream routes': { workers: 2, streamRoutes: '/api/chat,/events' }
  }
  for (const [name, options] of Object.entries(variants)) {
    const { ok, output } = checkHaproxyConfig(writeFile(dir, 'haproxy.cfg', haproxyConfig(options)), { platform })
    t.ok(ok, `${name}: ${output.trim().split('\n').pop()}`)
  }
  const spares = haproxyConfig({ workers: 4, maxWorkers: 8 })
  t.match(spares, /server worker8 127\.0\.0\.1:9009$/m, 'spare servers up to --max-workers')
  t.match(spares, /^ {4}nbthread 1$/m, 'one thread')
  t.notMatch(spares, /server worker9 /)
  const cfg = haproxyConfig({ workers: 2, streamRoutes: '/api/chat,/events' })
  t.match(cfg, /^defaults\n(?: {4}[^\n]*\n)* {4}option abortonclose$/m,
    'abortonclose in the defaults, for the long-lived requests')
  t.match(cfg, /^backend pool\n(?: {4}[^\n]*\n)* {4}no option abortonclose$/m,
    'and off in the render backend (see the test below)')
  t.match(cfg, /^backend pool_streams\n(?: {4}[^\n]*\n)* {4}default-server maxconn 8192 disabled check/m,
    'a streams backend over the same workers, 8192 each')
  t.match(cfg, /^ {4}server worker2 127\.0\.0\.1:9003$(?![\s\S]*^backend pool_streams)/m)
  t.match(cfg,
    /^ {4}http-request del-header X-Pool-Stream\n {4}acl pool_long_lived req\.hdr\(accept\) -m sub text\/event-stream\n {4}acl pool_long_lived path_beg \/api\/chat\n {4}acl pool_long_lived path_beg \/events\n {4}use_backend pool_streams if pool_long_lived$/m,
    'what goes there: server-sent events and --stream-routes; a client cannot say so itself')
  t.match(cfg, /^backend pool_streams\n(?: {4}[^\n]*\n)* {4}http-request set-header X-Pool-Stream 1$/m,
    'marked for the worker\'s guard there')
  t.match(haproxyConfig({ workers: 2 }),
    /^ {4}http-request return status 503 .* hdr Retry-After 1 if \{ queue\(pool\) ge 100 \}$/m,
    'the queue is capped at 100 by default')
  t.notMatch(haproxyConfig({ workers: 2, maxQueue: 0 }), /http-request return/, '--max-queue 0: no cap')
})

onPlatforms(t, 'nginx -t accepts the generated config, ' +
  'every path under the prefix', { nginx: true }, async (t, platform) => {
  const prefix = tempDir(t, 'pool-nginx-', { openToOthers: true })
  const cfg = nginxConfig({ prefix, port: 8080, haproxySocket: path.join(prefix, 'haproxy-http.sock') })
  writeFile(prefix, 'nginx.conf', cfg)
  const { ok, output } = checkNginxConfig(prefix, { platform })
  t.ok(ok, output.trim())
  const paths = [...cfg.matchAll(/^\s*(?:pid|error_log|access_log|\w+_temp_path)\s+(\/[^\s;]+)/gm)].map((m) => m[1])
  t.equal(paths.length, 8, 'pid, two logs, five temp paths')
  for (const p of paths) t.ok(p.startsWith(prefix + '/'), `${p} is under the prefix`)
  t.equal([...cfg.matchAll(/_temp_path /g)].length, 5, 'all five temp paths are set')
  t.ok(fs.existsSync(path.join(prefix, 'proxy_temp')), 'nginx created its temp directories there')
  // Debian has no group 'nobody', which `user nobody;` alone would ask for (nginx -t: getgrnam).
  writeFile(prefix, 'nginx.conf', nginxConfig({ prefix, user: 'nobody', group: 'nogroup' }))
  const withUser = checkNginxConfig(prefix, { platform })
  t.ok(withUser.ok, `--user nobody --group nogroup: ${withUser.output.trim().split('\n').pop()}`)
  t.match(nginxConfig({ prefix, timeout: 60000 }), /proxy_read_timeout 150s;/,
    'nginx outwaits a GET that HAProxy replays after the pool killed its worker: 2 x ' +
      '(queue 10 s + timeout 60 s) + 10 s')
  const upstream = nginxConfig({ prefix, upstream: '127.0.0.1:9001' })
  t.match(upstream, /server 127\.0\.0\.1:9001;/, '--upstream host:port instead of the socket')
  // A stream holds two connections of an nginx worker for as long as it lasts.
  t.match(cfg, /worker_connections 16384;[^]*/, 'by default room for 8,192 streams a worker, not 2,047')
  t.match(cfg, /worker_rlimit_nofile 33792;/, 'and the files they open: twice the connections, plus 1024')
  const small = nginxConfig({ prefix, workerConnections: 512 })
  t.match(small, /worker_connections 512;/)
  t.match(small, /worker_rlimit_nofile 2048;/)
  writeFile(prefix, 'nginx.conf', small)
  t.ok(checkNginxConfig(prefix, { platform }).ok, 'nginx -t accepts --worker-connections 512')
})

// Where the README's systemd unit keeps the state file: the pool's own RuntimeDirectory.
const PRODUCTION_STATE_FILE = '/run/ssr/haproxy.state'

t.test('conf/ holds the generator output for 15 workers', async (t) => {
  t.equal(fs.readFileSync(path.join(ROOT, 'conf/haproxy.cfg'),
    'utf8'), haproxyConfig({ workers: 15, stateFile: PRODUCTION_STATE_FILE }),
    `conf/haproxy.cfg is up to date (regenerate: pool config haproxy -n 15 --state-file ${PRODUCTION_STATE_FILE} > ` +
      'conf/haproxy.cfg)')
  t.equal(fs.readFileSync(path.join(ROOT, 'conf/nginx.conf'), 'utf8'), nginxConfig(),
    'conf/nginx.conf is up to date (regenerate: pool config nginx > conf/nginx.conf)')
})

t.test('pool config prints the configs; bad input is one line on stderr and exit 2', async (t) => {
  const haproxy = await runPool(['config', 'haproxy', '-n', '15', '--state-file', PRODUCTION_STATE_FILE])
  t.equal(haproxy.code, 0, haproxy.stderr)
  t.equal(haproxy.stdout, fs.readFileSync(path.join(ROOT, 'conf/haproxy.cfg'), 'utf8'))
  const nginx = await runPool(['config', 'nginx'])
  t.equal(nginx.code, 0, nginx.stderr)
  t.equal(nginx.stdout, fs.readFileSync(path.join(ROOT, 'conf/nginx.conf'), 'utf8'))

  const flags = await runPool(['config', 'haproxy', '-n', '2', '--balance', 'static-rr', '--backend', 'ssr',
    '--timeout', '45', '--socket', '/tmp/x/admin.sock'])
  t.equal(flags.code, 0, flags.stderr)
  t.match(flags.stdout, /^backend ssr\n\s+balance static-rr$/m)
  t.match(flags.stdout, /stats socket \/tmp\/x\/admin\.sock mode 600 level admin/)
  t.match(flags.stdout, /timeout server 90s/,
    'server timeout = the longer of the pool\'s --read-timeout (60 s) and --timeout (45 s), + 30 s')
  const reads = await runPool(['config', 'haproxy', '-n', '2', '--read-timeout', '2m'])
  t.match(reads.stdout, /timeout server 150s/, '--read-timeout 2m: 150 s')

  const bad = [
    [['config', 'haproxy', '-n', '0'], /workers/],
    [['config', 'haproxy', '-n', '4', '--max-workers', '2'], /--max-workers \(2\) must be at least --workers \(4\)/],
    [['config', 'haproxy', '--backend', 'a b'], /--backend must be a HAProxy name/],
    [['config', 'haproxy', '--stats-port', '9003', '-n', '4'], /--stats-port 9003 is one of the workers' ports/],
    [['config', 'haproxy', '--socket', '/' + 'x'.repeat(120)], /at most 107/],
    [['config', 'nginx', '--upstream', 'nowhere'], /--upstream must be host:port/],
    [['config', 'nginx', '--timeout', 'soon'], /--timeout must be a duration/],
    [['config', 'nginx', '--group', 'nogroup'], /--group needs --user/],
    [['config', 'nginx', '--worker-connections', '0'], /--worker-connections\) must be a positive integer/],
    [['config', 'apache'], /unknown config target 'apache'/]
  ]
  for (const [args, message] of bad) {
    const r = await runPool(args)
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(r.stdout, '', 'nothing on stdout')
    t.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr.trim()}`)
    t.match(r.stderr, message)
  }
})

// `platform`'s haproxy from the generated config with tiny workers, on free ports in a temp dir.
async function startGenerated (t, {
  workers = 2,
  maxWorkers,
  render = 0,
  body,
  edit = (cfg) => cfg,
  httpSocketUser,
  options = {},
  platform
} = {}) {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const ports = await freePorts(2 + (maxWorkers ?? workers))
  const [port, statsPort] = ports
  const workerPorts = ports.slice(2)
  const cfg = edit(haproxyConfig({
    workers,
    maxWorkers,
    port,
    statsPort,
    workerPort: workerPorts[0],
    prefix: dir,
    log: 'none',
    httpSocketUser,
    ...options
  }))
  const haproxy = await startHaproxy({ cfg, dir, t, platform })
  const client = new HaproxyClient({ socket: haproxy.socket })
  const servers = []
  for (const p of workerPorts.slice(0, workers)) servers.push(await startWorker(t, p, { render, body }))
  return { dir, port, statsPort, workerPorts, haproxy, client, servers }
}

onPlatforms(t, 'the generated haproxy: disabled until ready, both binds, stats and /metrics', async (t, platform) => {
  const { dir, port, statsPort, client, servers } = await startGenerated(t, { platform, workers: 2, maxWorkers: 3 })
  const before = await client.servers('pool')
  t.same(Object.keys(before), ['worker1', 'worker2', 'worker3'], 'worker1..N and the spare')
  t.same(Object.values(before).map((s) => s.status), ['MAINT', 'MAINT', 'MAINT'], 'every server starts disabled')
  t.same(Object.values(before).map((s) => s.slim), [1, 1, 1], 'maxconn 1 each')
  t.equal((await client.showStat('pool')).find((r) => r.svname === 'BACKEND').algo, 'first')

  const early = await request(`http://127.0.0.1:${port}/`)
  t.equal(early.status, 503, 'nothing is sent before the pool says ready')
  t.equal(servers[0].requests.length + servers[1].requests.length, 0)

  await client.setServerState('pool', 'worker1', 'ready')
  await client.setServerState('pool', 'worker2', 'ready')
  const viaTcp = await request(`http://127.0.0.1:${port}/a`)
  t.equal(viaTcp.status, 200)
  const viaUnix = await new Promise((resolve, reject) => {
    http.get({ socketPath: path.join(dir, 'haproxy-http.sock'), path: '/b' }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    }).on('error', reject)
  })
  t.equal(viaUnix, 200, 'the unix socket frontend (for nginx) serves too')
  t.equal(servers[0].requests.length, 2, 'balance first: worker1 takes what it can')

  const metrics = await request(`http://127.0.0.1:${statsPort}/metrics`)
  t.equal(metrics.status, 200)
  t.match(metrics.body, /haproxy_server_current_sessions\{proxy="pool",server="worker1"\}/,
    'Prometheus exporter on /metrics')
  const page = await request(`http://127.0.0.1:${statsPort}/`)
  t.match(page.body, /Statistics Report for HAProxy/, 'stats page')
})

onPlatforms(t, 'observe layer4 marks a dead worker DOWN on its first refused connect', async (t, platform) => {
  // No periodic check may run between the close and the requests: it would mark worker1 DOWN
  // first (L4CON), and this test is about what the observation does alone.
  const noPeriodicCheck = (cfg) => cfg.replace('check inter 2s', 'check inter 60s')
  const { port, client, servers } = await startGenerated(t, { platform, workers: 2, edit: noPeriodicCheck })
  await client.setServerState('pool', 'worker1', 'ready')
  await client.setServerState('pool', 'worker2', 'ready')
  await servers[0].close() // worker1's port now refuses connections; nobody set MAINT
  const statuses = []
  for (let i = 0; i < 5; i++) statuses.push((await request(`http://127.0.0.1:${port}/`)).status)
  t.same(statuses, [200, 200, 200, 200, 200], 'redispatched to worker2')
  const worker1 = (await client.servers('pool')).worker1
  t.equal(worker1.status, 'DOWN')
  t.equal(worker1.check_status, 'HANA', 'marked down by observation, not by a periodic check')
  t.equal(worker1.wredis, 1, 'only one request was tried on it')
})

// With several threads HAProxy 2.6 and 3.0 may pick one worker for two requests arriving together
// before either has taken its slot (a fifth to a third of the pairs with two threads). A render
// of 100 ms: the first is still running when the second is picked, however late.
onPlatforms(t, 'two requests that arrive together go to the two free workers, never both to one ' +
  '(nbthread 1)', async (t, platform) => {
  const { port, client, servers } = await startGenerated(t, { platform, workers: 2, render: 100 })
  await client.setServerState('pool', 'worker1', 'ready')
  await client.setServerState('pool', 'worker2', 'ready')
  const pairs = 40
  let oneWorker = 0
  const statuses = []
  for (let i = 0; i < pairs; i++) {
    const before = servers.map((s) => s.requests.length)
    const replies = await Promise.all(['a', 'b'].map((x) => request(`http://127.0.0.1:${port}/${x}${i}`)))
    statuses.push(...replies.map((r) => r.status))
    if (servers.some((s, j) => s.requests.length !== before[j] + 1)) oneWorker++
  }
  t.ok(statuses.every((s) => s === 200), `all ${pairs * 2} answered 200`)
  t.equal(oneWorker, 0, `each of ${pairs} pairs went to both workers`)
  t.same(servers.map((s) => s.maxInFlight), [1, 1], 'no worker ever held two')
})

// Request A runs (render 2 s), B waits in the queue, then A's client closes.
// Resolves with when B reached the worker and the most requests the worker ever held.
async function abortRunningRequest (t, edit, platform) {
  const { port, client, servers } = await startGenerated(t, { platform, workers: 1, render: 2000, edit })
  await client.setServerState('pool', 'worker1', 'ready')
  const send = (name) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(`GET /${name} HTTP/1.1\r\nHost: test\r\n\r\n`))
    s.on('error', () => {})
    t.teardown(() => s.destroy())
    return s
  }
  const started = Date.now()
  const a = send('A')
  await waitFor(() => servers[0].requests.length === 1, { what: 'A at the worker' })
  send('B')
  await waitFor(async () => (await client.showStat('pool')).some((row) => row.qcur > 0),
    { what: 'B in HAProxy\'s queue while A runs' })
  a.end() // the client goes away (FIN), as nginx does when its client leaves
  await waitFor(() => servers[0].requests.length === 2, { timeout: 5000, what: 'B at the worker' })
  return { bArrivedAfter: servers[0].requests[1].at - started, maxInFlight: servers[0].maxInFlight }
}

onPlatforms(t, 'no abortonclose: a client that leaves does not free its worker\'s slot', async (t, platform) => {
  const without = await abortRunningRequest(t, (cfg) => cfg, platform)
  t.equal(without.maxInFlight, 1, 'never two requests in one worker')
  t.ok(without.bArrivedAfter >= 1980, `B reached the worker once A was rendered (${without.bArrivedAfter} ms)`)

  // The measurement behind the choice: with the option, the same run breaks the guarantee.
  const withOption = await abortRunningRequest(t, (cfg) => cfg.replace('    no option abortonclose\n', ''), platform)
  t.equal(withOption.maxInFlight, 2, `with abortonclose B joins A in the busy worker (${withOption.bArrivedAfter} ms)`)
})

onPlatforms(t, 'nginx → HAProxy (unix socket) → worker', { nginx: true }, async (t, platform) => {
  const big = 'x'.repeat(600 * 1024)
  const body = (req) => (req.url === '/big' ? big : `served ${req.url}\n`)
  const { dir, client, servers } = await startGenerated(t,
    { platform, workers: 2, body, httpSocketUser: NGINX_WORKER_USER })
  const { url } = await startNginxInFront(t, dir, { platform })

  const ping = await request(`${url}/ping`)
  t.equal(ping.body, 'pong\n', '/ping is answered by nginx')
  t.equal((await request(`${url}/`)).status, 503, 'no worker ready yet: HAProxy answers 503')
  t.equal(servers[0].requests.length, 0)

  await client.setServerState('pool', 'worker1', 'ready')
  await client.setServerState('pool', 'worker2', 'ready')
  const page = await request(`${url}/page`, { headers: { host: 'shop.example' } })
  t.equal(page.status, 200)
  t.equal(page.body, 'served /page\n', 'the worker answered through nginx and HAProxy')
  const seen = servers[0].requests.at(-1).headers
  t.equal(seen.host, 'shop.example', 'Host is passed on')
  t.equal(seen['x-forwarded-for'], '127.0.0.1', 'X-Forwarded-For is set')

  const large = await request(`${url}/big`)
  t.equal(large.body.length, big.length, 'a 600 KB response arrives whole')

  // Keep-alive to HAProxy: many requests from one client, few connections into HAProxy.
  const before = (await client.showStat('pool_http')).find((r) => r.svname === 'FRONTEND')
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  for (let i = 0; i < 10; i++) t.equal((await request(`${url}/k${i}`, { agent })).status, 200)
  const after = (await client.showStat('pool_http')).find((r) => r.svname === 'FRONTEND')
  const requests = after.req_tot - before.req_tot
  const connections = after.conn_tot - before.conn_tot
  t.equal(requests, 10)
  t.ok(connections <= 1, `HAProxy saw ${requests} requests on ${connections} new connection(s)`)
})

// The commands a generated config's header gives (`#   cmd` lines, in order), with its
// placeholders filled in.
function headerCommands (cfg, fill) {
  const lines = []
  for (const line of cfg.split('\n')) {
    if (!line.startsWith('#')) break
    const m = /^# {3}([^(\s].*)$/.exec(line)
    if (m) lines.push(Object.entries(fill).reduce((cmd, [word, value]) => cmd.replaceAll(word, value), m[1]))
  }
  return lines
}

// One header command through sh, as an operator would type it; output to `log` for failures.
// `haproxy` and `nginx` in it are `platform`'s (its directory first in PATH).
function shell (command, { user, log, platform }) {
  const fd = fs.openSync(log, 'a')
  try {
    const env = { ...process.env, PATH: `${platform.dir}:${process.env.PATH}` }
    const r = spawnSync('sh', ['-c', command], { stdio: ['ignore', fd, fd], timeout: 10000, env, ...user })
    if (r.status !== 0) throw new Error(`\`${command}\` exited with ${r.status}: ${fs.readFileSync(log, 'utf8')}`)
  } finally {
    fs.closeSync(fd)
  }
}

function uidOf (pid) {
  return Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1])
}

function childrenOf (pid) {
  return spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).stdout.trim().split(/\s+/)
    .filter(Boolean).map(Number)
}

// `pool start ...` from a header, as `user` ({ uid, gid } or {}): resolves once it started.
async function startHeaderPool (t, command, { user, env }) {
  const node = user.uid !== undefined ? nodeAnyoneRuns() : process.execPath
  const child = spawn(node, [BIN, ...command.split(' ').slice(1)],
    { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'], ...user })
  let output = ''
  const started = new Promise((resolve, reject) => {
    const add = (d) => { output += d; if (/"event":"started"/.test(output)) resolve() }
    child.stdout.on('data', add)
    child.stderr.on('data', add)
    child.once('exit', (code) => reject(new Error(`pool exited with ${code}: ${output.slice(-2000)}`)))
  })
  t.teardown(() => stopChild(child, { grace: 15000 }))
  let timer
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`pool not started in 30 s: ${output.slice(-2000)}`)), 30000)
  })
  await Promise.race([started, late]).finally(() => clearTimeout(timer))
  return child
}

// Generate both configs with the CLI into a fresh prefix, start HAProxy, nginx and the pool
// exactly as the headers say (as `user`, or as whoever runs the test), and fetch the SSR demo
// through nginx → HAProxy → pool.
async function pairAsHeadersSay (t, { user = {}, platform }) {
  const dir = tempDir(t, 'pool-pair-', { openToOthers: true })
  // workerPort − 2, left free, is where the pool puts its own /status by default.
  const [port, statsPort, nginxPort, , , workerPort] = await freePorts(7)
  const haproxy = await runPool(['config', 'haproxy', '-n', '2', '--prefix', dir, '--port', String(port),
    '--stats-port', String(statsPort), '--worker-port', String(workerPort), '--log', 'none'])
  t.equal(haproxy.code, 0, haproxy.stderr)
  const haproxyFile = writeFile(dir, 'haproxy.cfg', haproxy.stdout)
  const nginxArgs = /^# nginx in front: `pool (config nginx [^`]+)`/m.exec(haproxy.stdout)[1].split(' ')
  const prefix = path.join(dir, 'nginx')
  fs.mkdirSync(prefix)
  const nginx = await runPool([...nginxArgs, '--prefix', prefix, '--host', '127.0.0.1', '--port', String(nginxPort)])
  t.equal(nginx.code, 0, nginx.stderr)
  writeFile(prefix, 'nginx.conf', nginx.stdout)
  if (user.uid !== undefined) spawnSync('chown', ['-R', `${user.uid}:${user.gid}`, dir])

  const log = path.join(dir, 'commands.log')
  const [startHaproxyCmd, stopHaproxyCmd, poolCmd] = headerCommands(haproxy.stdout,
    { FILE: haproxyFile, APP: path.join(ROOT, 'examples/ssr/server.js') })
  const [startNginxCmd, stopNginxCmd] = headerCommands(nginx.stdout, {})
  t.match(poolCmd,
    `--worker-port ${workerPort} --timeout 30s --read-timeout 60s --balancer haproxy --haproxy-socket ` +
      `${dir}/haproxy-admin.sock --haproxy-backend pool`, 'the run line names every setting that must match')

  shell(startHaproxyCmd, { user, log, platform })
  t.teardown(() => shell(stopHaproxyCmd, { user, log, platform }))
  shell(startNginxCmd, { user, log, platform })
  t.teardown(() => shell(stopNginxCmd, { user, log, platform }))
  const pool = await startHeaderPool(t, poolCmd, { user, env: user.uid !== undefined ? { XDG_RUNTIME_DIR: dir } : {} })
  const client = new HaproxyClient({ socket: path.join(dir, 'haproxy-admin.sock') })
  await waitFor(async () => Object.values(await client.servers('pool')).every((s) => s.status === 'UP'),
    { timeout: 10000, what: 'both servers UP' })

  const page = await request(`http://127.0.0.1:${nginxPort}/`)
  t.equal(page.status, 200, 'nginx → HAProxy → pool answers')
  t.match(page.body, /<main class="catalogue">/, 'the SSR demo page, rendered by a worker')
  const nginxMaster = Number(fs.readFileSync(path.join(prefix, 'nginx.pid'), 'utf8'))
  const haproxyPid = Number(fs.readFileSync(path.join(dir, 'haproxy.pid'), 'utf8'))
  return { nginxMaster, nginxWorkers: childrenOf(nginxMaster), haproxyPid, pool, dir }
}

onPlatforms(t, 'the generated pair, started as its headers say, ' +
  'serves through nginx → HAProxy → pool', { nginx: true }, async (t, platform) => {
  const { nginxMaster, nginxWorkers, dir } = await pairAsHeadersSay(t, { platform })
  t.equal((fs.statSync(path.join(dir, 'haproxy-http.sock')).mode & 0o777), 0o666,
    'HAProxy\'s HTTP socket admits nginx\'s workers, whoever they run as')
  if (IS_ROOT) {
    t.equal(uidOf(nginxMaster), 0, 'nginx started as root')
    t.ok(nginxWorkers.length > 0 && nginxWorkers.every((pid) => uidOf(pid) === NOBODY.uid),
      'its workers run as nobody, and still reach HAProxy')
  }
})

// On the system's HAProxy and nginx only: Debian 13's are in the cache under the home of whoever
// ran scripts/setup, which nobody may not enter, and the user they run as is not what changed.
const unprivilegedSkip = IS_ROOT
  ? checkoutHiddenFromOthers()
  : 'run by an unprivileged user: the test above is this one'
t.test('the same as an unprivileged user', { skip: unprivilegedSkip }, async (t) => {
  const { nginxMaster, nginxWorkers, haproxyPid, pool } = await pairAsHeadersSay(t, { user: NOBODY, platform: SYSTEM })
  t.same([haproxyPid, nginxMaster, ...nginxWorkers, pool.pid].map(uidOf),
    Array(3 + nginxWorkers.length).fill(NOBODY.uid), 'HAProxy, nginx and the pool all run as nobody')
})

onPlatforms(t, 'priority classes (--priority-routes, --priority-header): ' +
  'a higher class leaves HAProxy\'s queue first', async (t, platform) => {
  const { port, client, servers } = await startGenerated(t,
    {
      platform,
      workers: 1,
      render: 300,
      options: { priorityRoutes: '/health=high,/export/=low', priorityHeader: 'X-Priority' }
    })
  await client.setServerState('pool', 'worker1', 'ready')
  const url = (p) => `http://127.0.0.1:${port}${p}`
  const first = request(url('/first'))
  await waitFor(() => servers[0].requests.length === 1, { what: 'the first request on the worker' })
  // Queued in this order, one after the other, while the worker renders the first.
  const queued = []
  for (const [p, headers] of [['/export/report', {}], ['/plain', {}], ['/health', {}],
    ['/header', { 'x-priority': 'high' }]]) {
    queued.push(request(url(p), { headers }))
    await waitFor(async () => (await client.showStat('pool')).find((r) => r.svname === 'BACKEND')
      .qcur === queued.length, { what: `${p} queued` })
  }
  await Promise.all([first, ...queued])
  t.same(servers[0].requests.map((r) => r.url), ['/first', '/health', '/header', '/plain', '/export/report'],
    'high (a route, then the header from this host) before normal, normal before low; arrival order within a class')
})

onPlatforms(t, 'overload: a request that finds --max-queue waiting gets 503 at once, never reaching a worker; ' +
  'a high-class one is let in', async (t, platform) => {
  const { port, client, servers } = await startGenerated(t,
    { platform, workers: 1, render: 1000, options: { maxQueue: 3, priorityRoutes: '/health=high' } })
  await client.setServerState('pool', 'worker1', 'ready')
  const url = (p) => `http://127.0.0.1:${port}${p}`
  const qcur = async () => (await client.showStat('pool')).find((r) => r.svname === 'BACKEND').qcur
  const first = request(url('/first'))
  await waitFor(() => servers[0].requests.length === 1, { what: 'the first request on the worker' })
  // A burst of ten while the worker renders: three take the queue's places, the rest are
  // turned away at once (the queued ones wait two renders or more: /health goes first).
  const burst = Array.from({ length: 10 }, (_, i) => request(url(`/burst${i}`)))
  await waitFor(async () => (await qcur()) === 3, { what: 'three queued' })
  const health = request(url('/health'))
  await waitFor(async () => (await qcur()) === 4, { what: '/health queued beyond the cap' })
  const settled = await Promise.all(burst.map((p) => Promise.race([p,
    new Promise((resolve) => setTimeout(resolve, 300, 'waiting'))])))
  const turnedAway = settled.filter((r) => r !== 'waiting')
  t.equal(turnedAway.length, 7, 'seven answered at once, the three queued still waiting')
  for (const r of turnedAway) {
    t.equal(r.status, 503)
    t.equal(r.headers['retry-after'], '1', 'Retry-After')
    t.match(r.body, /the queue is full/)
  }
  const served = (await Promise.all([first, health, ...burst])).filter((r) => r.status === 200)
  t.equal(served.length, 5, 'the first, /health and the three queued are served')
  t.same(servers[0].requests.map((r) => r.url).slice(0, 2), ['/first', '/health'], 'the high class first')
  t.equal(servers[0].requests.length, 5, 'no turned-away request reached the worker')
})

// HAProxy from the generated config with one streaming worker, ready, and nginx from the
// generated config in front of its unix socket.
async function startStreamingStack (t, platform) {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const [port, statsPort, workerPort, nginxPort] = await freePorts(4)
  const cfg = haproxyConfig({
    workers: 1,
    port,
    statsPort,
    workerPort,
    prefix: dir,
    log: 'none',
    httpSocketUser: NGINX_WORKER_USER
  })
  const haproxy = await startHaproxy({ cfg, dir, t, platform })
  const writes = await startStreamingWorker(t, workerPort)
  await new HaproxyClient({ socket: haproxy.socket }).setServerState('pool', 'worker1', 'ready')
  await startNginxInFront(t, dir, { platform, port: nginxPort })
  return { writes, haproxyPort: port, nginxPort }
}

onPlatforms(t, 'a streamed page passes HAProxy (option http-no-delay) and nginx → HAProxy as the worker writes ' +
  'it', { nginx: true }, async (t, platform) => {
  const { writes, haproxyPort, nginxPort } = await startStreamingStack(t, platform)
  for (const [front, frontPort] of [['HAProxy', haproxyPort], ['nginx → HAProxy', nginxPort]]) {
    // The least of three, so that a moment the machine was busy elsewhere does not count; the
    // kernel's hold of a part sent with MSG_MORE (200 ms) is there every time.
    const delays = []
    for (let i = 0; i < 3; i++) {
      const pathname = `/page?front=${encodeURIComponent(front)}&i=${i}`
      const got = await timedGet(frontPort, pathname)
      const wrote = writes.get(pathname)
      t.match(got.head, /\r\ntransfer-encoding: chunked\b/i, `${front}: chunked, as the worker sent it`)
      t.ok(got.shellAt < wrote.lateAt, `${front}: the shell arrived before the rest was written`)
      t.ok(got.lateAt >= wrote.lateAt, `${front}: then the rest`)
      delays.push(got.shellAt - wrote.shellAt)
    }
    const least = Math.min(...delays)
    t.ok(least < 100,
      `${front}: the shell reached the client ${least.toFixed(1)} ms after the worker wrote it ` +
        `(the least of ${delays.map((d) => d.toFixed(1)).join(', ')})`)
  }
})

onPlatforms(t, 'nginx holds a response with a Content-Length until it is whole, ' +
  'unless the app says X-Accel-Buffering: no, which it never passes on', { nginx: true }, async (t, platform) => {
  const { writes, nginxPort } = await startStreamingStack(t, platform)
  const held = await timedGet(nginxPort, '/page?cl=1')
  t.ok(held.shellAt >= writes.get('/page?cl=1').lateAt, 'buffered: the shell came with the rest')
  const streamed = await timedGet(nginxPort, '/page?cl=1&xab=no')
  t.ok(streamed.shellAt < writes.get('/page?cl=1&xab=no').lateAt,
    'X-Accel-Buffering: no: the shell came before the rest was written')
  t.notMatch(streamed.head, /x-accel-buffering/i, 'and the header stayed with nginx')
})
