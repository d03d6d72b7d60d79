'use strict'

// `pool config edge`: the edge haproxy.cfg in front of a fleet. The real HAProxy (Debian 12's
// 2.6 and Debian 13's 3.0: onPlatforms) accepts it, the CLI refuses bad --hosts in one line, and,
// run for real in front of two fake hosts on 127.0.0.2 and 127.0.0.3 (Linux routes all of 127/8
// to lo), it behaves as its comments say: maxconn follows each host's agent, the edge holds the
// one queue, drain/down/up and the /ping check take hosts out and put them back, and a host that
// refuses connections costs no request.

const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const http = require('node:http')
const path = require('node:path')
const { edgeConfig } = require('../../lib/generate/edge')
const { HaproxyClient } = require('../../lib/haproxy/client')
const { freePorts, request, runPool, sleep, waitFor, tempDir } = require('../helpers')
const { checkHaproxyConfig, startHaproxy, onPlatforms } = require('../helpers/haproxy')
const { startStreamingWorker, timedGet } = require('../helpers/streaming')

const BACKEND = 'fleet'

onPlatforms(t, 'haproxy -c accepts the generated config', async (t, platform) => {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const variants = {
    'two IPv4 hosts, defaults': { hosts: '10.0.0.11:9001,10.0.0.12:9001', agentPort: 9100 },
    'IPv6, a host name, users, stdout log, own intervals': {
      hosts: '[2001:db8::5]:9001,localhost:9002,192.0.2.7:80',
      agentPort: 9100,
      workers: 8,
      agentInter: 250,
      checkInter: 1000,
      timeout: 45000,
      queueTimeout: 5000,
      retries: 2,
      user: 'nobody',
      group: 'nogroup',
      log: 'stdout'
    },
    'one host, no log, everything under a prefix': {
      hosts: '127.0.0.2:9001',
      agentPort: 9100,
      backend: 'ssr',
      port: 9080,
      statsPort: 9081,
      log: 'none',
      prefix: dir
    }
  }
  for (const [name, options] of Object.entries(variants)) {
    const file = path.join(dir, 'haproxy.cfg')
    fs.writeFileSync(file, edgeConfig(options))
    const { ok, output } = checkHaproxyConfig(file, { platform })
    t.ok(ok, `${name}: ${output.trim().split('\n').pop()}`)
  }
  const cfg = edgeConfig(variants['IPv6, a host name, users, stdout log, own intervals'])
  t.match(cfg,
    /^ {4}server host1 \[2001:db8::5\]:9001\n {4}server host2 localhost:9002\n {4}server host3 192\.0\.2\.7:80$/m,
    'one server per host, in --hosts order')
  t.match(cfg,
    /default-server maxconn 8 check inter 1s fall 2 rise 2 observe layer4 error-limit 1 on-error mark-down agent-check agent-port 9100 agent-inter 250ms$/m)
  t.match(cfg, /timeout server 90s/,
    'timeout server = the longer of the pools\' --read-timeout and --timeout, + 30 s, as in the host config')
  t.match(cfg, /timeout queue 5s/)
  t.match(cfg, /^ {4}nbthread 1$/m, 'one thread by default')
  // What it does across a reload is tested with the per-host config, whose line it shares.
  t.match(cfg, /^defaults\n(?: {4}[^\n]*\n)* {4}option idle-close-on-response$/m,
    'a reload keeps idle client connections for one more answer')
  const threads = edgeConfig({ ...variants['two IPv4 hosts, defaults'], threads: 4 })
  t.match(threads, /^ {4}# 4 threads \(--threads\)[^\n]*\n(?: {4}#[^\n]*\n)* {4}nbthread 4$/m,
    '--threads 4: nbthread 4, said why in a comment')
  const file = path.join(dir, 'haproxy.cfg')
  fs.writeFileSync(file, threads)
  t.ok(checkHaproxyConfig(file, { platform }).ok, 'haproxy -c accepts --threads 4')
  t.match(cfg, /^ {4}retries 2$/m)
  t.notMatch(cfg, /^\s*option abortonclose/m)
  t.notMatch(cfg, /retry-on[^\n]*response-timeout/, 'a request that timed out is not sent again')
})

onPlatforms(t, '--discover: hosts found by DNS (A or SRV records), which haproxy -c accepts', async (t, platform) => {
  const dir = tempDir(t, 'pool-haproxy-', { openToOthers: true })
  const variants = {
    'A records, own name servers': {
      discover: 'pool.default.svc.cluster.local:9001',
      agentPort: 9100,
      nameservers: '10.0.0.2,[2001:db8::53]:5353',
      maxHosts: 8,
      resolveInter: 2000,
      dnsHold: 600000
    },
    'SRV records, resolv.conf': { discover: '_http._tcp.pool.default.svc.cluster.local', agentPort: 9100 }
  }
  for (const [name, options] of Object.entries(variants)) {
    const file = path.join(dir, 'haproxy.cfg')
    fs.writeFileSync(file, edgeConfig(options))
    const { ok, output } = checkHaproxyConfig(file, { platform })
    t.ok(ok, `${name}: ${output.trim().split('\n').pop()}`)
  }
  const a = edgeConfig(variants['A records, own name servers'])
  t.match(a, /^ {4}nameserver ns1 10\.0\.0\.2:53\n {4}nameserver ns2 \[2001:db8::53\]:5353$/m,
    'each name server, port 53 by default')
  t.match(a,
    /^ {4}server-template host 1-8 pool\.default\.svc\.cluster\.local:9001 resolvers fleet_dns init-addr none/m,
    '--max-hosts servers from the A records, on the given port')
  t.match(a, /^ {4}timeout resolve 2s$/m)
  for (const status of ['timeout', 'refused', 'other', 'nx']) {
    t.match(a, new RegExp(`^ {4}hold ${status} 10m$`, 'm'), `hold ${status}: --dns-hold`)
  }
  t.match(a, /default-server maxconn 1 check .* agent-check agent-port 9100/,
    'each discovered host checked and agent-checked')
  t.notMatch(a, /^ {4}server host/m, 'no fixed server')
  const srv = edgeConfig(variants['SRV records, resolv.conf'])
  t.match(srv, /^ {4}parse-resolv-conf$/m)
  t.match(srv, /^ {4}server-template host 1-16 _http\._tcp\.pool\.default\.svc\.cluster\.local resolvers fleet_dns/m,
    'SRV: each record\'s port')

  const bad = [
    [['--discover', 'pool.example', '--agent-port', '9100'], /--discover 'pool\.example' has no port/],
    [['--discover', '_http.pool.example', '--agent-port', '9100'], /is not an SRV name/],
    [['--discover', '10.0.0.1:9001', '--agent-port', '9100'], /is not a DNS name/],
    [['--discover', 'pool.example:9001', '--hosts', '10.0.0.1:9001', '--agent-port', '9100'],
      /--hosts and --discover both name the hosts/],
    [['--hosts', '10.0.0.1:9001', '--nameservers', '10.0.0.2', '--agent-port', '9100'],
      /--nameservers goes with --discover/],
    [['--discover', 'pool.example:9001', '--nameservers', 'ns.example', '--agent-port', '9100'],
      /--nameservers entry 'ns\.example' is not ADDRESS\[:PORT\]/],
    [['--discover', 'pool.example:9001', '--dns-hold', '43200m', '--agent-port', '9100'],
      /--dns-hold must be at most 24 days/]
  ]
  for (const [args, message] of bad) {
    const r = await runPool(['config', 'edge', ...args])
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr.trim()}`)
    t.match(r.stderr, message)
  }
})

t.test('pool config edge prints the config; bad input is one line on stderr and exit 2', async (t) => {
  const good = await runPool(['config', 'edge', '--hosts', '10.0.0.11:9001,[2001:db8::5]:9001,web3.example:9001',
    '--agent-port', '9100',
    '-n', '4', '--agent-inter', '250ms', '--check-inter', '1', '--timeout', '45', '--queue-timeout', '5s', '--backend',
    'web'])
  t.equal(good.code, 0, good.stderr)
  t.equal(good.stdout, edgeConfig({
    hosts: '10.0.0.11:9001,[2001:db8::5]:9001,web3.example:9001',
    agentPort: 9100,
    workers: 4,
    agentInter: 250,
    checkInter: 1000,
    timeout: 45000,
    queueTimeout: 5000,
    backend: 'web'
  }), 'the CLI prints what edgeConfig() returns for the same options')

  const bad = [
    [['--agent-port', '9100'], /--hosts or --discover is required/],
    [['--hosts', '1.2.3.4', '--agent-port', '9100'], /--hosts entry '1\.2\.3\.4' has no port/],
    [['--hosts', '1.2.3.4:70000', '--agent-port', '9100'],
      /--hosts entry '1\.2\.3\.4:70000': the port must be 1-65535/],
    [['--hosts', '1.2.3.4:9001,1.2.3.5:9001,1.2.3.4:9001', '--agent-port', '9100'],
      /--hosts lists 1\.2\.3\.4:9001 twice/],
    [['--hosts', '1.2.3.4:9001,1.2.3.4:9002', '--agent-port', '9100'], /--hosts lists the address 1\.2\.3\.4 twice/],
    [['--hosts', '[::1]:9001,[0:0::1]:9001', '--agent-port', '9100'], /--hosts lists \[::1\]:9001 twice/],
    [['--hosts', '::1:9001', '--agent-port', '9100'], /an IPv6 address goes in brackets/],
    [['--hosts', '1.2.3.4:9001'], /--agent-port is required/],
    [['--hosts', '1.2.3.4:9001', '--agent-port', '9100', '--threads', '65'], /--threads must be at most 64 \(got 65\)/]
  ]
  for (const [args, message] of bad) {
    const r = await runPool(['config', 'edge', ...args])
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(r.stdout, '', 'nothing on stdout')
    t.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr.trim()}`)
    t.match(r.stderr, message)
  }
})

// A fake host at `address`: the pool's HTTP port (/ping, and /work?ms=N answered after N ms)
// and its agent (one line per connection, `line`, which the test changes). It counts the
// requests it runs at once. `frozen`: it accepts connections and answers nothing, on both ports.
// `hangUp`: it closes the connection of each /work request without an answer (a crash).
async function startFakeHost (t, address, { port, agentPort }) {
  const host = {
    address,
    line: 'up ready maxconn:1',
    ping: 200,
    frozen: false,
    hangUp: false,
    inFlight: 0,
    maxInFlight: 0,
    served: 0,
    methods: []
  }
  const held = new Set()
  const server = http.createServer((req, res) => {
    if (host.frozen) return
    if (req.url === '/ping') {
      res.statusCode = host.ping
      return res.end()
    }
    host.served++
    host.methods.push(req.method)
    if (host.hangUp) {
      // 'then-refuse': its pool went down under this request; later connections are refused
      // (the requests it runs still end).
      if (host.hangUp === 'then-refuse') server.close()
      return req.socket.destroy()
    }
    host.inFlight++
    host.maxInFlight = Math.max(host.maxInFlight, host.inFlight)
    const ms = Number(new URL(req.url, 'http://x').searchParams.get('ms') || 0)
    req.resume()
    setTimeout(() => { host.inFlight--; res.end(address) }, ms)
  })
  const agent = net.createServer((socket) => {
    socket.on('error', () => {})
    if (host.frozen) return held.add(socket)
    socket.end(host.line + '\n')
  })
  await new Promise((resolve) => server.listen(port, address, resolve))
  await new Promise((resolve) => agent.listen(agentPort, address, resolve))
  host.resetCount = () => { host.maxInFlight = host.inFlight; host.served = 0; host.methods = [] }
  host.closeHttp = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  host.openHttp = () => new Promise((resolve) => server.listen(port, address, resolve))
  t.teardown(async () => {
    for (const socket of held) socket.destroy()
    await new Promise((resolve) => agent.close(() => resolve()))
    if (server.listening) await host.closeHttp()
  })
  return host
}

// The generated edge, `platform`'s HAProxy, in front of two fake hosts, on loopback ports, in a
// temp dir.
async function startFleet (t, { workers, platform }) {
  const dir = tempDir(t, 'pool-edge-', { openToOthers: true })
  const [port, statsPort, hostsPort, agentPort] = await freePorts(4)
  const hosts = [
    await startFakeHost(t, '127.0.0.2', { port: hostsPort, agentPort }),
    await startFakeHost(t, '127.0.0.3', { port: hostsPort, agentPort })
  ]
  const cfg = edgeConfig({
    hosts: `127.0.0.2:${hostsPort},127.0.0.3:${hostsPort}`,
    agentPort,
    workers,
    host: '127.0.0.1',
    port,
    statsPort,
    prefix: dir,
    log: 'none'
  })
  const haproxy = await startHaproxy({ cfg, dir, t, platform })
  const client = new HaproxyClient({ socket: haproxy.socket })
  const servers = () => client.servers(BACKEND)
  const url = `http://127.0.0.1:${port}`
  return { hosts, client, servers, url, statsPort }
}

// Wait until `pred(host1, host2)` holds for the edge's `show stat` rows.
function waitForServers (servers, pred, what) {
  return waitFor(async () => {
    const s = await servers()
    return pred(s.host1, s.host2) && s
  }, { timeout: 5000, interval: 25, what })
}

// Each host as the edge and the fake host see it, for a failure's message: a host a stall of
// this process took DOWN shows chkdown and a check_status of L7TOUT.
function describeHosts (hosts, rows) {
  return hosts.map((host, i) => {
    const s = rows[`host${i + 1}`]
    return `host${i + 1} ${s.status} check ${s.check_status} chkfail ${s.chkfail} chkdown ${s.chkdown} slim ` +
      `${s.slim} wretr ${s.wretr} wredis ${s.wredis} eresp ${s.eresp}, running ${host.inFlight}`
  }).join('; ')
}

// `count` requests at once through the edge. Resolves with their statuses.
async function burst (url, count, { ms = 100, method = 'GET' } = {}) {
  const replies = await Promise.all(Array.from({ length: count }, (_, i) =>
    request(`${url}/work?ms=${ms}&i=${i}`, { method, body: method === 'POST' ? 'x' : undefined })
      .catch((err) => ({ status: err.message }))))
  return replies.map((r) => r.status)
}

const allOk = (n) => Array(n).fill(200)

onPlatforms(t, 'the generated edge, live, in front of two hosts', async (t, platform) => {
  const { hosts, client, servers, url, statsPort } = await startFleet(t, { platform, workers: 3 })
  const [host1, host2] = hosts

  await t.test('maxconn follows each host\'s agent', async (t) => {
    host1.line = 'up ready maxconn:2'
    host2.line = 'up ready maxconn:1'
    await waitForServers(servers, (a, b) => a.slim === 2 && b.slim === 1, 'slim 2 and 1 (the config says 3)')
    t.pass('host1 slim 2, host2 slim 1: the agents\' maxconn replaced the configured 3')
    host2.line = 'up ready maxconn:4'
    await waitForServers(servers, (a, b) => b.slim === 4, 'host2 slim 4')
    t.pass('host2 slim 4 once its agent says maxconn:4')
    host2.line = 'up ready maxconn:1'
    await waitForServers(servers, (a, b) => a.status === 'UP' && b.status === 'UP' && b.slim === 1,
      'both UP, host2 back to slim 1')
  })

  // With several threads HAProxy 2.6 and 3.0 may pick one host for two requests arriving together
  // before either has taken its slot (20 to 35 pairs in 100 with two threads).
  await t.test('two requests that arrive together go to the two hosts with a free slot, never both to one ' +
    '(nbthread 1)', async (t) => {
    host1.line = 'up ready maxconn:1'
    await waitForServers(servers, (a, b) => a.slim === 1 && b.slim === 1 && a.status === 'UP' && b.status === 'UP',
      'both UP, slim 1 and 1')
    for (const h of hosts) h.resetCount()
    const pairs = 40
    let oneHost = 0
    for (let i = 0; i < pairs; i++) {
      // 100 ms each: the first is still running when the second is picked, however late.
      const replies = await Promise.all(['a', 'b'].map((x) => request(`${url}/work?ms=100&i=${x}${i}`)))
      if (replies[0].body === replies[1].body) oneHost++
    }
    t.equal(oneHost, 0, `each of ${pairs} pairs answered by both hosts (${describeHosts(hosts, await servers())})`)
    t.same(hosts.map((h) => h.maxInFlight), [1, 1], 'no host ever ran two')
    host1.line = 'up ready maxconn:2'
    await waitForServers(servers, (a) => a.slim === 2, 'host1 back to slim 2')
  })

  await t.test('a burst waits at the edge: no host ever runs more than its maxconn', async (t) => {
    for (const h of hosts) h.resetCount()
    t.same(await burst(url, 12, { ms: 300 }), allOk(12), 'all 12 answered 200')
    t.equal(host1.maxInFlight, 2, 'host1 (maxconn 2) ran 2 at most, and was kept full')
    t.equal(host2.maxInFlight, 1, 'host2 (maxconn 1) ran 1 at most')
    t.equal(host1.served + host2.served, 12)
    const backend = (await client.showStat(BACKEND)).find((r) => r.svname === 'BACKEND')
    t.ok(backend.qmax >= 6, `the rest queued in the edge's backend (qmax ${backend.qmax})`)
  })

  await t.test('agent drain and down take a host out; up ready puts it back', async (t) => {
    host1.line = 'drain maxconn:2 #reloading: 1 of 2 ready'
    await waitForServers(servers, (a) => a.status.startsWith('DRAIN'), 'host1 DRAIN')
    for (const h of hosts) h.resetCount()
    t.same(await burst(url, 6), allOk(6), 'drain: all answered')
    t.equal(host1.served, 0, 'drain: host1 got nothing new')
    t.equal(host2.served, 6, 'drain: host2 served them all, one at a time')
    t.equal(host2.maxInFlight, 1)

    host1.line = 'down #no worker ready'
    await waitForServers(servers, (a) => a.status.startsWith('DOWN'), 'host1 DOWN')
    for (const h of hosts) h.resetCount()
    t.same(await burst(url, 6), allOk(6), 'down: all answered')
    t.equal(host1.served, 0, 'down: host1 got nothing')
    t.equal(host2.served, 6)

    host1.line = 'up ready maxconn:2'
    await waitForServers(servers, (a) => a.status === 'UP', 'host1 UP')
    for (const h of hosts) h.resetCount()
    t.same(await burst(url, 9, { ms: 200 }), allOk(9), 'up: all answered')
    t.ok(host1.served >= 4, `up: host1 serves again (${host1.served} of 9)`)
    t.equal(host1.maxInFlight, 2)
    t.equal(host2.maxInFlight, 1)
  })

  await t.test('the agent ends a MAINT set by hand, unless it is disabled first (the comment says so)', async (t) => {
    await client.setServerState(BACKEND, 'host1', 'maint')
    await waitForServers(servers, (a) => a.status === 'UP', 'the agent\'s `ready` to undo MAINT')
    t.pass('MAINT set on the runtime API was undone by the agent')
    t.equal((await client.command(`disable agent ${BACKEND}/host1`)).trim(), '')
    await client.setServerState(BACKEND, 'host1', 'maint')
    await sleep(1500) // three agent intervals
    t.equal((await servers()).host1.status, 'MAINT', 'with its agent disabled, host1 stays MAINT')
    await client.command(`enable agent ${BACKEND}/host1`)
    await client.setServerState(BACKEND, 'host1', 'ready')
    await waitForServers(servers, (a) => a.status === 'UP', 'host1 UP')
  })

  await t.test('a host that stops answering is taken out by the /ping check', async (t) => {
    const frozenAt = Date.now()
    host1.frozen = true // accepts connections, answers neither /ping nor its agent
    const s = await waitForServers(servers, (a) => a.status === 'DOWN', 'frozen host1 DOWN')
    t.equal(s.host1.check_status, 'L7TOUT',
      `DOWN by the check's timeout, ${Date.now() - frozenAt} ms after it froze ` +
        '(the config says at most 2s after its last good answer)')
    for (const h of hosts) h.resetCount()
    t.same(await burst(url, 4), allOk(4), 'requests go to host2')
    t.equal(host1.served, 0)
    host1.frozen = false
    await waitForServers(servers, (a) => a.status === 'UP', 'host1 UP again')

    host1.ping = 503 // a pool that is stopping answers /ping with 503
    const down = await waitForServers(servers, (a) => a.status === 'DOWN', 'host1 DOWN on /ping 503')
    t.equal(down.host1.check_status, 'L7STS', 'DOWN by the HTTP check\'s status')
    for (const h of hosts) h.resetCount()
    t.same(await burst(url, 4), allOk(4), 'requests go to host2')
    t.equal(host1.served, 0)
    host1.ping = 200
    await waitForServers(servers, (a) => a.status === 'UP', 'host1 UP again')
  })

  await t.test('a host that hangs up without an answer: GET is tried again elsewhere, POST is not', async (t) => {
    // Both up at the start: a host a stall took DOWN (two /ping checks of 500 ms missed on a
    // loaded machine) comes back only after two good ones.
    await waitForServers(servers, (a, b) => a.status === 'UP' && b.status === 'UP', 'both hosts UP')
    for (const h of hosts) h.resetCount()
    host1.hangUp = true
    const replies = { GET: [], POST: [] }
    for (let i = 0; i < 12; i++) {
      // GET GET POST POST …: leastconn alternates between the two idle hosts, so each method
      // reaches both.
      const method = i % 4 < 2 ? 'GET' : 'POST'
      replies[method].push((await request(`${url}/work?ms=1`,
        { method, body: method === 'POST' ? 'x' : undefined })).status)
    }
    host1.hangUp = false
    const onHost1 = (method) => host1.methods.filter((m) => m === method).length
    t.ok(onHost1('GET') > 0 && onHost1('POST') > 0,
      `host1 hung up on ${onHost1('GET')} GET and ${onHost1('POST')} POST`)
    // A retry goes back to the host that hung up only when HAProxy finds no other host it may
    // use at that instant (leastconn's avoided server): what each host's state and counters were.
    t.same(replies.GET, allOk(6),
      `every GET answered 200: the ones host1 dropped were sent to host2 (${describeHosts(hosts, await servers())})`)
    t.equal(replies.POST.filter((s) => s === 502).length, onHost1('POST'),
      'each POST host1 dropped is a 502, never sent twice')
    t.equal(host2.methods.filter((m) => m === 'POST').length, 6 - onHost1('POST'), 'host2 saw only the other POSTs')
  })

  await t.test('a host that refuses connections costs no request, POST included', async (t) => {
    const before = (await servers()).host1.wredis
    await host1.closeHttp() // its pool is gone; its agent still says up
    const statuses = []
    for (let i = 0; i < 12; i++) {
      const method = i % 4 < 2 ? 'GET' : 'POST'
      statuses.push((await request(`${url}/work?ms=1`, { method, body: method === 'POST' ? 'x' : undefined })).status)
    }
    t.same(statuses, allOk(12), '6 GET and 6 POST while host1 refuses: all 200')
    const after = await waitForServers(servers, (a) => a.status === 'DOWN', 'host1 DOWN')
    t.ok(after.host1.wredis > before,
      `some were tried on host1 first and redispatched (${after.host1.wredis - before})`)
    t.equal(after.host1.check_status, 'L4CON')
  })

  // leastconn sends a retry back to the host it should avoid when no other host has a free slot
  // at that instant. A host whose pool went down refuses it and is DOWN at once (observe
  // layer4): the request waits in the edge's queue for a slot elsewhere.
  await t.test('a host that hangs up while the others are full: the GET waits for another host', async (t) => {
    await host1.openHttp()
    // Both: a host a stall took DOWN comes back only after two good checks.
    await waitForServers(servers, (a, b) => a.status === 'UP' && b.status === 'UP', 'both hosts UP')
    const before = (await servers()).host1
    // Two long GETs at once: one on each host (leastconn), host2 (maxconn 1) now full.
    const long = [request(`${url}/work?ms=800&i=a`), request(`${url}/work?ms=800&i=b`)]
    await waitFor(async () => {
      if (host1.inFlight === 1 && host2.inFlight === 1) return true
      throw new Error(`now: ${describeHosts(hosts, await servers())}`)
    }, { timeout: 5000, what: 'a long GET on each host' })
    host1.resetCount()
    host1.hangUp = 'then-refuse'
    const sent = Date.now()
    const reply = await request(`${url}/work?ms=1&i=c`)
    host1.hangUp = false
    t.equal(reply.status, 200, 'answered 200')
    t.equal(reply.body, '127.0.0.3', 'by host2')
    // At least until host2's long GET ends (about 800 ms); with one host left up, HAProxy also
    // pauses `timeout connect` (1s) after the refused connect before it tries again.
    t.ok(Date.now() - sent >= 500, `it waited for host2's slot (${Date.now() - sent} ms)`)
    t.same(host1.methods, ['GET'], 'host1 saw it once: it hung up, then refused the retry')
    t.same((await Promise.all(long)).map((r) => r.status), [200, 200], 'the long GETs, host1\'s included, answered')
    const after = await waitForServers(servers, (a) => a.status === 'DOWN', 'host1 DOWN')
    t.ok(after.host1.wretr > before.wretr,
      `retried (host1 wretr ${before.wretr} → ${after.host1.wretr}, wredis ${after.host1.wredis})`)
  })

  await t.test('a slow upload holds no host slot until its body is in (option http-buffer-request)', async (t) => {
    host2.resetCount()
    const client = net.connect(Number(new URL(url).port), '127.0.0.1')
    t.teardown(() => client.destroy())
    client.on('error', () => {})
    const reply = new Promise((resolve) => client.once('data', (d) => resolve(String(d).split('\r\n')[0])))
    client.write('POST /work?ms=0 HTTP/1.1\r\nHost: edge\r\nContent-Length: 10\r\n\r\nabcde')
    await sleep(300) // time for the request to go on, were it to
    t.equal(host2.served, 0, 'half the body sent: no host has the request yet')
    client.write('fghij')
    t.equal(await reply, 'HTTP/1.1 200 OK')
    t.equal(host2.served, 1, 'the whole body in: host2 served it')
  })

  const metrics = await request(`http://127.0.0.1:${statsPort}/metrics`)
  t.match(metrics.body, /haproxy_server_current_sessions\{proxy="fleet",server="host2"\}/,
    'Prometheus /metrics on the stats port')
})

onPlatforms(t, 'a streamed page passes the edge as the host writes it (option http-no-delay)', async (t, platform) => {
  const dir = tempDir(t, 'pool-edge-', { openToOthers: true })
  const [port, statsPort, hostPort, agentPort] = await freePorts(4)
  const writes = await startStreamingWorker(t, hostPort)
  // The host's agent port is closed: an agent that does not answer leaves the host as it is.
  const cfg = edgeConfig({
    hosts: `127.0.0.1:${hostPort}`,
    agentPort,
    workers: 2,
    host: '127.0.0.1',
    port,
    statsPort,
    prefix: dir,
    log: 'none'
  })
  const haproxy = await startHaproxy({ cfg, dir, t, platform })
  const client = new HaproxyClient({ socket: haproxy.socket })
  await waitFor(async () => (await client.servers(BACKEND)).host1?.status === 'UP', { timeout: 5000, what: 'host1 UP' })
  // The least of three: the kernel's hold of a part sent with MSG_MORE (200 ms) is there every time.
  const delays = []
  for (let i = 0; i < 3; i++) {
    const pathname = `/page?i=${i}`
    const got = await timedGet(port, pathname)
    const wrote = writes.get(pathname)
    t.ok(got.shellAt < wrote.lateAt, 'the shell arrived before the rest was written')
    delays.push(got.shellAt - wrote.shellAt)
  }
  const least = Math.min(...delays)
  t.ok(least < 100,
    `the shell reached the client ${least.toFixed(1)} ms after the host wrote it ` +
      `(the least of ${delays.map((d) => d.toFixed(1)).join(', ')})`)
})
