'use strict'

// `pool config edge`: the haproxy.cfg of an edge HAProxy in front of a fleet of hosts, each
// running a pool. The edge holds the one queue of the whole fleet: each host is one server whose
// maxconn is that host's ready workers, kept true by the host's agent (`pool start
// --agent-port`), so a request leaves the edge only when a worker is free for it. The text
// explains itself in comments because operators read haproxy.cfg, not this file.

const net = require('node:net')
const path = require('node:path')
const { resolveOptions, OPTIONS: POOL_OPTIONS } = require('../options/table')
const {
  timeouts, duration, longDuration, DEFAULT_PREFIX, PROXY_NAME, MAX_HAPROXY_TIME, bad, camel, checkPath, checkWord,
  hostPort,
  globalSection, statsSection, idleCloseOnResponse, websocketRules, tunnelLines, checkTunnelTimeout,
  OPTIONS: HAPROXY_OPTIONS
} = require('./haproxy')
const { haproxyRetryLines, replayableInWords } = require('../fronts/balancer/failures')

const RESOLVERS = 'fleet_dns'
// Debian 12's HAProxy 2.6 is built with MAX_THREADS=64 (haproxy -vv; Debian 13's 3.0 with 256).
const MAX_THREADS = 64

// A host that stops answering its /ping is taken out after FALL failed checks in a row, and
// put back after RISE good ones.
const FALL = 2
const RISE = 2

// In the option table's format, so the CLI builds its flags from it. Paths left undefined are
// derived from `prefix`.
const OPTIONS = {
  hosts: {
    flag: 'hosts',
    kind: 'string',
    group: 'Fleet',
    defaultText: 'required, or --discover',
    describe: 'The hosts, HOST:PORT,HOST:PORT,… (IPv4, [IPv6] or a DNS name): where each host\'s pool (`pool start ' +
      '--host --port`) or its nginx listens'
  },
  discover: {
    flag: 'discover',
    kind: 'string',
    group: 'Discovery',
    describe: 'Find the hosts by DNS instead of --hosts, as they come and go: NAME:PORT (each A record a host, on ' +
      'PORT) or _SERVICE._tcp.NAME (each SRV record a host and its port); a Kubernetes headless Service answers both'
  },
  maxHosts: {
    flag: 'max-hosts',
    kind: 'count',
    default: 16,
    group: 'Discovery',
    describe: 'With --discover: how many hosts the edge holds at once (its servers host1..N, filled from the ' +
      'records; records past N are ignored)'
  },
  nameservers: {
    flag: 'nameservers',
    kind: 'string',
    group: 'Discovery',
    defaultText: 'those of /etc/resolv.conf',
    describe: 'With --discover: the DNS servers to ask, ADDRESS[:PORT],… (port 53 by default)'
  },
  resolveInter: {
    flag: 'resolve-inter',
    kind: 'duration',
    default: 1000,
    group: 'Discovery',
    describe: 'With --discover: how often the name is resolved again; a host that joins is sent work within a few of ' +
      'these'
  },
  dnsHold: {
    flag: 'dns-hold',
    kind: 'duration',
    default: 3600000,
    group: 'Discovery',
    describe: 'With --discover: while DNS fails (no answer, refused, an error, or the name gone), the hosts last ' +
      'found keep serving this long'
  },
  agentPort: {
    flag: 'agent-port',
    kind: 'port',
    group: 'Fleet',
    defaultText: 'required',
    describe: 'Port of each host\'s agent (`pool start --agent-port`), which sets the host\'s maxconn to its ready ' +
      'workers'
  },
  workers: {
    flag: 'workers',
    alias: 'n',
    kind: 'count',
    default: 1,
    group: 'Fleet',
    describe: 'maxconn of each host until its agent first answers'
  },
  agentInter: {
    flag: 'agent-inter',
    kind: 'duration',
    default: 500,
    group: 'Fleet',
    describe: 'How often each host\'s agent is asked'
  },
  checkInter: {
    flag: 'check-inter',
    kind: 'duration',
    default: 500,
    group: 'Fleet',
    describe: `How often each host's /ping is checked; ${FALL} failures in a row take the host out`
  },
  timeout: {
    ...POOL_OPTIONS.timeout,
    group: 'Fleet',
    describe: 'The pools\' --timeout; the edge\'s server timeout is set above it'
  },
  readTimeout: {
    ...POOL_OPTIONS.readTimeout,
    group: 'Fleet',
    describe: 'The pools\' --read-timeout; the edge\'s server timeout is set above it'
  },
  host: {
    flag: 'host',
    kind: 'string',
    default: '0.0.0.0',
    group: 'HAProxy',
    describe: 'Address of the edge\'s HTTP frontend'
  },
  port: { flag: 'port', kind: 'port', default: 8080, group: 'HAProxy', describe: 'Port of the edge\'s HTTP frontend' },
  backend: {
    flag: 'backend',
    kind: 'string',
    default: 'fleet',
    group: 'HAProxy',
    describe: 'Backend name; its servers are host1..N in --hosts order'
  },
  queueTimeout: {
    flag: 'queue-timeout',
    kind: 'duration',
    default: 10000,
    group: 'HAProxy',
    describe: 'A request waiting longer than this for a free worker anywhere in the fleet gets a 503'
  },
  retries: {
    flag: 'retries',
    kind: 'int',
    default: 3,
    group: 'HAProxy',
    describe: 'Times a request is sent again, to another host, when a host refused the connection (or, GET and HEAD ' +
      'only, closed it without an answer)'
  },
  tunnelTimeout: {
    ...HAPROXY_OPTIONS.tunnelTimeout,
    group: 'HAProxy',
    describe: 'A WebSocket (a tunnel once its 101 came back) silent this long both ways is closed (the edge\'s ' +
      'timeout tunnel); keep it at or above the hosts\' own'
  },
  threads: {
    flag: 'threads',
    kind: 'count',
    default: 1,
    group: 'HAProxy',
    describe: 'HAProxy\'s threads (nbthread): one never sends a host more than its agent\'s last maxconn and carried ' +
      '10,000 requests/s here; more, where the cores are free for them, carry more, but requests that arrive ' +
      'together may then take a host past it'
  },
  statsPort: {
    flag: 'stats-port',
    kind: 'port',
    default: 8999,
    group: 'HAProxy',
    describe: 'Stats page and Prometheus /metrics on 127.0.0.1'
  },
  log: {
    flag: 'log',
    kind: 'string',
    default: '/dev/log',
    group: 'HAProxy',
    describe: 'Syslog target, \'stdout\', or \'none\''
  },
  prefix: {
    flag: 'prefix',
    kind: 'string',
    default: DEFAULT_PREFIX,
    group: 'Paths',
    describe: 'Directory of the socket and pid file'
  },
  socket: {
    flag: 'socket',
    kind: 'string',
    group: 'Paths',
    defaultText: 'PREFIX/haproxy-edge-admin.sock',
    describe: 'Runtime API socket, for operators'
  },
  pidFile: {
    flag: 'pid-file',
    kind: 'string',
    group: 'Paths',
    defaultText: 'PREFIX/haproxy-edge.pid',
    describe: 'Pid file'
  },
  user: {
    flag: 'user',
    kind: 'string',
    group: 'Users',
    describe: 'User HAProxy drops to after binding (when started as root)'
  },
  group: { flag: 'group', kind: 'string', group: 'Users', describe: 'Group HAProxy drops to after binding' }
}

// RFC 1123 host names: dot-separated labels of letters, digits and inner hyphens.
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?'
const HOST_NAME = new RegExp(`^(?=.{1,253}$)${LABEL}(?:\\.${LABEL})*\\.?$`)
const WILDCARD = new Set(['0.0.0.0', '::'])

// One --hosts entry → { address, port, key }: `address` as HAProxy takes it (IPv6 without
// brackets, hostPort adds them), `key` the same address however it was spelled.
function parseHost (entry) {
  const where = `--hosts entry '${entry}'`
  const example = 'write HOST:PORT, e.g. 10.0.0.5:9001, [2001:db8::5]:9001 or web1.example:9001'
  let address, port
  const v6 = /^\[([^\]]*)\](?::(.*))?$/.exec(entry)
  if (v6) {
    [, address, port] = v6
    if (!net.isIPv6(address)) throw bad(`${where}: '${address}' is not an IPv6 address`)
  } else {
    const colons = entry.split(':').length - 1
    if (colons > 1) throw bad(`${where}: an IPv6 address goes in brackets (${example})`)
    if (colons === 1) [address, port] = entry.split(':')
    else address = entry
    if (/^[\d.]+$/.test(address)) {
      if (!net.isIPv4(address)) throw bad(`${where}: '${address}' is not an IPv4 address`)
    } else if (!HOST_NAME.test(address)) {
      throw bad(`${where}: '${address}' is not an IPv4 address or a host name`)
    }
  }
  if (port === undefined || port === '') throw bad(`${where} has no port: ${example}`)
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    throw bad(`${where}: the port must be 1-65535 (got '${port}')`)
  }
  const key = v6 ? new URL(`http://[${address}]/`).hostname.slice(1, -1) : address.toLowerCase().replace(/\.$/, '')
  if (WILDCARD.has(key)) throw bad(`${where}: ${address} is a wildcard, not the address of a host`)
  return { address, port: Number(port), key, entry }
}

// Every entry of --hosts, checked. One address may appear once only: the edge asks the agent
// at ADDRESS:--agent-port, and that agent speaks for one pool.
function parseHosts (text) {
  const entries = text.split(',').map((s) => s.trim())
  if (entries.some((s) => s === '')) {
    throw bad(`--hosts has an empty entry (got '${text}'): list HOST:PORT entries separated by commas`)
  }
  const seen = new Map()
  const hosts = []
  for (const entry of entries) {
    const host = parseHost(entry)
    const first = seen.get(host.key)
    if (first) {
      const spellings = first.entry === host.entry ? '' : ` ('${first.entry}', '${host.entry}')`
      throw bad(first.port === host.port
        ? `--hosts lists ${hostPort(host.key, host.port)} twice${spellings}`
        : `--hosts lists the address ${host.key} twice ('${first.entry}', '${host.entry}'): its agent on ` +
          '--agent-port speaks for one pool, so one entry per address')
    }
    seen.set(host.key, host)
    hosts.push(host)
  }
  return hosts
}

// --discover: NAME:PORT (A or AAAA records, one host each, on PORT) or _SERVICE._PROTO.NAME (SRV
// records: a host and its port each). → { name, port, srv }
function parseDiscover (text) {
  const example =
    'write NAME:PORT (A records, e.g. pool.default.svc.cluster.local:9001) or _SERVICE._tcp.NAME (SRV records, e.g. ' +
      '_http._tcp.pool.default.svc.cluster.local)'
  if (text.startsWith('_')) {
    const labels = text.replace(/\.$/, '').split('.')
    if (labels.length < 3 || !/^_[A-Za-z0-9-]+$/.test(labels[0]) || !/^_(tcp|udp)$/.test(labels[1]) ||
      !HOST_NAME.test(labels.slice(2).join('.'))) {
      throw bad(`--discover '${text}' is not an SRV name: ${example}`)
    }
    return { name: text, port: null, srv: true }
  }
  const colon = text.lastIndexOf(':')
  if (colon < 0) throw bad(`--discover '${text}' has no port: ${example}`)
  const name = text.slice(0, colon)
  const port = text.slice(colon + 1)
  if (!HOST_NAME.test(name) || /^[\d.]+$/.test(name)) {
    throw bad(`--discover '${text}': '${name}' is not a DNS name (${example})`)
  }
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    throw bad(`--discover '${text}': the port must be 1-65535 (got '${port}')`)
  }
  return { name, port: Number(port), srv: false }
}

// --nameservers: ADDRESS[:PORT],… (IPv4, or [IPv6]) → ['10.0.0.2:53', '[2001:db8::53]:53']
function parseNameservers (text) {
  return text.split(',').map((s) => s.trim()).map((entry) => {
    const v6 = /^\[([^\]]*)\](?::(\d+))?$/.exec(entry)
    const [address, port = '53'] = v6 ? [v6[1], v6[2]] : entry.split(':')
    const ok = v6 ? net.isIPv6(address) : net.isIPv4(address) && entry.split(':').length <= 2
    if (!ok) {
      throw bad(`--nameservers entry '${entry}' is not ADDRESS[:PORT] (an IPv4 address, or an IPv6 one in brackets)`)
    }
    if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
      throw bad(`--nameservers entry '${entry}': the port must be 1-65535`)
    }
    return hostPort(address, Number(port))
  })
}

// Fill defaults, derive paths from the prefix and reject what HAProxy would refuse or misread.
function resolveEdgeOptions (input = {}) {
  const o = resolveOptions(input, OPTIONS)
  if (o.hosts === undefined && o.discover === undefined) {
    throw bad('--hosts or --discover is required: the fleet\'s hosts as HOST:PORT,HOST:PORT,…, or a DNS name that ' +
      'lists them')
  }
  if (o.hosts !== undefined && o.discover !== undefined) {
    throw bad('--hosts and --discover both name the hosts: give one of them')
  }
  if (o.agentPort === undefined) {
    throw bad('--agent-port is required: the port each host\'s agent listens on (`pool start --agent-port`)')
  }
  if (o.discover === undefined) {
    for (const flag of ['nameservers']) if (o[camel(flag)] !== undefined) throw bad(`--${flag} goes with --discover`)
    o.hosts = parseHosts(o.hosts)
  } else {
    o.discover = parseDiscover(o.discover)
    o.nameservers = o.nameservers === undefined ? null : parseNameservers(o.nameservers)
    if (o.resolveInter < 100) throw bad(`--resolve-inter must be at least 100ms (got ${o.resolveInter}ms)`)
    if (o.dnsHold > MAX_HAPROXY_TIME) {
      throw bad(`--dns-hold must be at most 24 days, 34560m (got ${longDuration(o.dnsHold)}): HAProxy's timers stop ` +
        'there')
    }
  }
  if (!PROXY_NAME.test(o.backend)) {
    throw bad(`--backend must be a HAProxy name: letters, digits, '-', '_', '.', ':' (got '${o.backend}')`)
  }
  for (const flag of ['agent-inter', 'check-inter']) {
    if (o[camel(flag)] < 1) throw bad(`--${flag} must be at least 1ms (got ${o[camel(flag)]}ms)`)
  }
  if (o.threads > MAX_THREADS) throw bad(`--threads must be at most ${MAX_THREADS} (got ${o.threads}): HAProxy's limit`)
  if (o.port === o.statsPort) throw bad(`--port and --stats-port are both ${o.port}`)
  checkTunnelTimeout(o.tunnelTimeout)
  for (const flag of ['host', 'user', 'group', 'log']) checkWord(flag, o[flag])
  o.prefix = checkPath('prefix', o.prefix)
  o.socket = checkPath('socket', o.socket ?? path.join(o.prefix, 'haproxy-edge-admin.sock'), { unixSocket: true })
  o.pidFile = checkPath('pid-file', o.pidFile ?? path.join(o.prefix, 'haproxy-edge.pid'))
  return o
}

const SOCKET_COMMENTS = {
  socket: [
    '    # The runtime API, for operators: `show stat`, `set server`, `disable agent`. mode 600 keeps',
    '    # everyone but its owner out. expose-fd lets a reload take over the listeners without',
    '    # dropping any.'
  ],
  timeout: '    # Idle limit of an interactive session (`socat readline`, `prompt`).',
  threads: (n) => n === 1
    ? ['    # One thread (--threads). With several, HAProxy 2.6 and 3.0 may pick the same host for requests',
        '    # that arrive together before either has taken its slot: the host then gets one past its',
        '    # agent\'s maxconn (it waits in that host\'s queue while another host may have a free',
        '    # worker). One thread carried 10,000 requests/s on a 2-core VM.']
    : [`    # ${n} threads (--threads), for more requests/s than one thread carries, at a price: HAProxy`,
        '    # 2.6 and 3.0 may pick the same host for requests that arrive together before either has taken',
        '    # its slot, and the host then gets one past its agent\'s maxconn (it waits in that',
        '    # host\'s queue).']
}

function defaultsSection (o, t) {
  return [
    'defaults',
    '    mode http',
    '    log global',
    '    option dontlognull',
    '    # The hosts are on the local network: a connect that takes longer has met a host that is',
    '    # gone (a lost SYN is only resent after 1s). Failing then lets `retries` try another host.',
    `    timeout connect ${duration(t.connect)}`,
    '    # A client must send its request head within this (slowloris).',
    `    timeout http-request ${duration(t.httpRequest)}`,
    '    # Longer than queue + server, so a client waiting for its answer is never cut off.',
    `    timeout client ${duration(t.client)}`,
    `    timeout http-keep-alive ${duration(t.httpKeepAlive)}`,
    ...idleCloseOnResponse('a client (a load balancer, nginx) that does not replay it'),
    '    # Each host\'s pool owns the limits: it answers 504 for a response left silent for --read-timeout',
    `    # (${o.readTimeout > 0 ? duration(o.readTimeout) : 'none'} here) and kills a worker whose loop stopped for ` +
      `--timeout (${duration(o.timeout)}). The edge must`,
    '    # never give up first: it would free that host\'s slot while the worker is still busy, and send',
    '    # the host a request it has no worker for. 30 s above the longer of the two also covers a',
    '    # wait in a host\'s own queue (keep the hosts\' queue timeouts below that). A silence, not a',
    '    # length: a stream that sends lasts as long as it sends.',
    `    timeout server ${duration(t.server)}`,
    '    # How long one /ping or agent check may take before it counts as failed.',
    `    timeout check ${duration(o.checkInter)}`,
    ''
  ]
}

function frontendSection (o) {
  return [
    'frontend edge_http',
    `    bind ${hostPort(o.host, o.port)}`,
    ...(o.log === 'none' ? [] : ['    option httplog']),
    '    # The hosts see the client\'s address in X-Forwarded-For (a host running the embedded',
    '    # balancer passes it on to the app only from peers in its --trust-proxy: list the edge).',
    '    option forwardfor',
    ...websocketRules(streamsBackendOf(o), 'edge', [
      `    # WebSockets go to ${streamsBackendOf(o)}, over the same hosts: a socket holds its connection for`,
      `    # its whole life, and in ${o.backend} it would hold one of its host's slots while requests queued.`
    ]),
    `    default_backend ${o.backend}`,
    ''
  ]
}

function streamsBackendOf (o) {
  return `${o.backend}_streams`
}

function serverLines (o) {
  if (o.discover) return discoveredServers(o)
  return o.hosts.map((h, i) => `    server host${i + 1} ${hostPort(h.address, h.port)}`)
}

function discoveredServers (o) {
  const { name, port, srv } = o.discover
  return [
    `    # The hosts, found by DNS: host1..host${o.maxHosts} are filled from ` +
      `the ${srv ? 'SRV records of' : 'addresses of'} ${name}`,
    `    # (every ${duration(o.resolveInter)}, resolvers ${RESOLVERS} above), each checked and agent-checked like a ` +
      'listed host. A',
    `    # server without a record is in maintenance (MAINT, "resolution"); past ${o.maxHosts} records, the rest wait`,
    '    # for a free server: raise the count (--max-hosts) above the most hosts you will run.',
    '    # init-addr none: the edge starts even when DNS does not answer yet.',
    `    server-template host 1-${o.maxHosts} ${srv ? name : `${name}:${port}`} resolvers ${RESOLVERS} init-addr ` +
      'none resolve-prefer ipv4'
  ]
}

function resolversSection (o) {
  if (!o.discover) return []
  const hold = longDuration(o.dnsHold)
  return [
    `resolvers ${RESOLVERS}`,
    ...(o.nameservers
      ? o.nameservers.map((ns, i) => `    nameserver ns${i + 1} ${ns}`)
      : ['    # The name servers of /etc/resolv.conf (read once, at start).', '    parse-resolv-conf']),
    '    # Room for many records in one answer (a large SRV set), over UDP.',
    '    accepted_payload_size 8192',
    `    # Resolve again every ${duration(o.resolveInter)}; a host that joins is sent work once its record is seen ` +
      'and its',
    '    # /ping and agent checks pass. A query without an answer is tried again after 1s, 3 times.',
    `    timeout resolve ${duration(o.resolveInter)}`,
    '    timeout retry 1s',
    '    resolve_retries 3',
    '    # DNS unreachable, refusing, failing or saying the name is gone: the hosts last found keep',
    `    # serving for ${hold} after the last good answer (their own checks still take out a host that`,
    '    # is gone), then are put in maintenance. A host whose record is removed leaves at once:',
    '    # stop its pool first (it drains itself; its agent says so within one agent-inter).',
    `    hold timeout ${hold}`,
    `    hold refused ${hold}`,
    `    hold other ${hold}`,
    `    hold nx ${hold}`,
    '    hold obsolete 0s',
    ''
  ]
}

function backendSection (o, t) {
  const downWithin = FALL * 2 * o.checkInter
  return [
    `backend ${o.backend}`,
    '    # leastconn, not first: both take only a host with a free slot (maxconn) and queue here when',
    '    # none has one, so both keep one queue for the fleet. first would fill host1 to its last',
    '    # worker before host2 gets anything: its CPUs all busy, its own balancer competing with',
    '    # them, and a failure of host1 costing most of the requests in flight. leastconn sends each',
    '    # request to the host running the fewest, which spreads the load and leaves each host',
    '    # headroom when its agent is late to report a worker gone.',
    '    balance leastconn',
    '    # A request whose connection to a host failed is sent to another host at every retry',
    '    # (`1`). Measured (HAProxy 2.6.12, a host refusing connections): a few ms per request;',
    '    # without the option, three tries on that same host 1s apart, then a 503. leastconn gives',
    '    # a retry back to the same host only when no other has a free slot at that instant; a host',
    '    # that refuses is DOWN at once (observe layer4, below), and the request waits here instead.',
    ...haproxyRetryLines({
      retries: o.retries,
      replays: true,
      comment: [
        '    # A host that closed the connection without an answer (its pool or machine went down) is',
        `    # retried on another host too, but only for ${replayableInWords()}: a POST may have been acted on.`,
        '    # No response-timeout: the hosts own the request timeout, and a request that ran out of time',
        '    # would only run out of time again. A 5xx from a host is its answer and is passed on.',
        '    # `retries` counts these retries as well.'
      ]
    }),
    '    # Requests wait here, in the backend queue, while every host\'s slots are taken.',
    `    timeout queue ${duration(t.queue)}`,
    '    # A request goes to a host once its body is here (up to one buffer): a slow upload holds',
    '    # no host slot, and the request can be sent again whole if it must be retried.',
    '    option http-buffer-request',
    '    # A streamed page (its shell at once, the rest as its data arrives) reaches the client as the',
    '    # host sends it: without http-no-delay HAProxy holds a part it knows is not the last for up',
    '    # to 200 ms (MSG_MORE; measured and explained in `pool config haproxy`).',
    '    option http-no-delay',
    '    # A new connection per request: a connect costs a round trip on the local network against',
    '    # renders of tens of ms, and it removes the race of reusing an idle connection a host is',
    '    # closing.',
    '    option http-server-close',
    '    # No `option abortonclose`, as in `pool config haproxy`: a client that leaves must not free',
    '    # its host slot while that host\'s worker still renders its request.',
    '    #',
    '    # The health check: GET /ping, answered by the host\'s balancer (or nginx) itself, never by a',
    '    # worker, so a busy host still passes; it answers 503 while the pool stops.',
    '    option httpchk',
    '    http-check send meth GET uri /ping',
    '    http-check expect status 200',
    `    # check inter ${duration(o.checkInter)} fall ${FALL} rise ${RISE}: a host whose /ping fails ${FALL} times ` +
      'in a row is DOWN;',
    `    #   ${RISE} good answers bring it back. A host that vanished (no answer within timeout check) is`,
    `    #   DOWN at most ${duration(downWithin)} after its last good answer (fall × (inter + timeout check)), one ` +
      'that',
    '    #   refuses connections sooner. Only this check takes a vanished host out: its agent is gone too.',
    `    # agent-check: every ${duration(o.agentInter)}, HAProxy reads one line from the host's agent on ` +
      `port ${o.agentPort}`,
    '    #   (`pool start --agent-port`), e.g. `up ready maxconn:5`: maxconn follows the host\'s ready',
    '    #   workers (a reload lowers it while workers are replaced), `drain` (the pool stops) sends',
    '    #   it nothing new, `down` (no worker ready) takes it out until `up`.',
    '    #   An agent that does not answer leaves the host as it was. Its `ready` also ends a MAINT set',
    '    #   on the runtime API: to take a host out by hand, `disable agent BACKEND/hostN` first.',
    `    # maxconn ${o.workers}: each host's slots until its agent first answers (after every start and reload).`,
    '    # observe layer4 ... mark-down: a host that refuses a connection (its pool was killed, or has',
    '    #   stopped listening) is DOWN at once. Without it a refusing host looks like the free one to',
    '    #   leastconn, and while the others are full every retry goes back to it: hundreds of 503s',
    '    #   until the check notices (test/integration/fleet.test.js, SIGKILL of a host\'s pool).',
    `    default-server maxconn ${o.workers} check inter ${duration(o.checkInter)} fall ${FALL} rise ${RISE} observe ` +
      `layer4 error-limit 1 on-error mark-down agent-check agent-port ${o.agentPort} ` +
      `agent-inter ${duration(o.agentInter)}`,
    ...serverLines(o),
    ''
  ]
}

// The same hosts as the backend, for WebSockets. Without the agent's check: its maxconn (the
// host's ready workers) counts render slots, not sockets.
function streamsSection (o, t) {
  return [
    `backend ${streamsBackendOf(o)}`,
    `    # The same hosts as ${o.backend}, for WebSockets. In ${o.backend} a socket would hold one of its`,
    '    # host\'s slots (a worker, to its agent) for its whole life, and requests would queue behind',
    '    # it. Here a host takes any number and bounds its own (`pool config haproxy --worker-max-open`',
    '    # per worker, behind nginx).',
    ...tunnelLines(t, 'through the edge'),
    '    balance leastconn',
    '    # A host that refused the connection: the handshake goes to another. Nothing else is',
    '    # replayed: a socket may have been acted on.',
    ...haproxyRetryLines({ retries: o.retries, replays: false }),
    `    timeout queue ${duration(t.queue)}`,
    '    option http-server-close',
    '    option http-no-delay',
    '    # The /ping check of the backend above, which takes a stopping host out (its /ping answers',
    `    # 503) within ${FALL} checks. No agent-check: its maxconn (the host's ready workers) is a count of`,
    '    # render slots, not of sockets, and would cap each host\'s sockets at it.',
    '    option httpchk',
    '    http-check send meth GET uri /ping',
    '    http-check expect status 200',
    `    default-server check inter ${duration(o.checkInter)} fall ${FALL} rise ${RISE} observe layer4 error-limit 1 ` +
      'on-error mark-down',
    ...(o.discover ? streamsDiscoveredServers(o) : serverLines(o)),
    ''
  ]
}

// The backend's server-template again, without its comments.
function streamsDiscoveredServers (o) {
  return [
    `    # The same hosts as ${o.backend}: the same records, resolved on their own.`,
    discoveredServers(o).at(-1)
  ]
}

function edgeConfig (input = {}) {
  const o = resolveEdgeOptions(input)
  const t = timeouts(o)
  const n = o.discover ? o.maxHosts : o.hosts.length
  const fleet = o.discover
    ? `the hosts DNS lists under ${o.discover.name} (up to ${n}: host1..host${n})`
    : `${n} host${n > 1 ? 's' : ''} (host1..host${n})`
  const source = o.discover
    ? `--discover ${o.discover.srv ? o.discover.name : `${o.discover.name}:${o.discover.port}`}`
    : `--hosts ${o.hosts.map((h) => h.entry).join(',')}`
  return [
    `# Edge haproxy.cfg for a fleet of ${fleet}, one queue for all of them.`,
    `# Generated by \`pool config edge ${source} --agent-port ${o.agentPort}\`; run each host's pool with`,
    `#   pool start APP --host ADDRESS --port PORT --agent-port ${o.agentPort} --timeout ${duration(o.timeout)}`,
    '',
    ...globalSection(o, t, SOCKET_COMMENTS, o.threads),
    ...resolversSection(o),
    ...defaultsSection(o, t),
    ...frontendSection(o),
    ...backendSection(o, t),
    ...streamsSection(o, t),
    ...statsSection(o)
  ].join('\n')
}

module.exports = { edgeConfig, resolveEdgeOptions, parseHosts, OPTIONS }
