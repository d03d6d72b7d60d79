'use strict'

// `pool config haproxy`: a complete haproxy.cfg for a pool whose workers HAProxy gives one request
// at a time (maxconn 1), meant to be driven by `pool start --balancer haproxy`. The text explains
// itself in comments because operators read haproxy.cfg, not this file.

const path = require('node:path')
const { resolveOptions, OPTIONS: POOL_OPTIONS } = require('../options/table')
const { poolError, codes } = require('../errors')
const { parseRoutes, CLASSES } = require('../shared/priority')
const { DEFAULT_BACKEND, serverName, streamsBackend } = require('../haproxy/names')
const { STREAM_HEADER, streamRoutes } = require('../protocol/long-lived')
const { haproxyRetryLines, replayableInWords, HAPROXY_RETRIES } = require('../fronts/balancer/failures')

const DEFAULT_PREFIX = '/run/pool'
const MAX_UNIX_PATH = 107 // sun_path is 108 bytes with its terminating NUL
const PROXY_NAME = /^[A-Za-z0-9_.:-]+$/
// 100 queued requests are worked off in about 100 paces, as long as the embedded balancer's
// overload control takes clients to wait on a pool of slow renders (--overload-max-wait): what
// HAProxy 2.6 can express of it, as a length.
const DEFAULT_MAX_QUEUE = 100
// A WebSocket's idle limit: HAProxy's documented example for WebSockets (`timeout tunnel 1h`).
// Clients and servers that ping (browsers do not; Socket.IO every 25 s) keep theirs open longer.
const DEFAULT_TUNNEL_TIMEOUT = 3600000
// HAProxy's times are milliseconds in a signed 32-bit integer.
const MAX_HAPROXY_TIME = 24 * 24 * 3600 * 1000

// In the option table's format, so the CLI builds its flags from it. Paths left undefined are
// derived from `prefix`.
const OPTIONS = {
  // The pool's own flags, with the pool's defaults, so `pool config` and `pool start` agree.
  workers: { ...POOL_OPTIONS.workers, group: 'Pool', describe: 'Servers worker1..N (match `pool start -n`)' },
  maxWorkers: {
    flag: 'max-workers',
    kind: 'count',
    group: 'Pool',
    defaultText: '--workers',
    describe: 'Also declare spare servers up to this many, for scaling up at run time'
  },
  workerHost: { ...POOL_OPTIONS.workerHost, group: 'Pool' },
  workerPort: { ...POOL_OPTIONS.workerPort, group: 'Pool' },
  timeout: {
    ...POOL_OPTIONS.timeout,
    group: 'Pool',
    describe: 'The pool\'s --timeout; HAProxy\'s server timeout is set above it'
  },
  readTimeout: {
    ...POOL_OPTIONS.readTimeout,
    group: 'Pool',
    describe: 'The pool\'s --read-timeout (its workers enforce it behind HAProxy); HAProxy\'s server timeout is set ' +
      'above it (0: none, and HAProxy waits an hour)'
  },
  host: {
    flag: 'host',
    kind: 'string',
    default: '127.0.0.1',
    group: 'HAProxy',
    describe: 'Address of the HTTP frontend'
  },
  port: { flag: 'port', kind: 'port', default: 9001, group: 'HAProxy', describe: 'Port of the HTTP frontend' },
  backend: {
    flag: 'backend',
    kind: 'string',
    default: DEFAULT_BACKEND,
    group: 'HAProxy',
    describe: 'Backend name (pass the same to `pool start --haproxy-backend`)'
  },
  balance: {
    flag: 'balance',
    kind: 'choice',
    choices: ['first', 'static-rr'],
    default: 'first',
    group: 'HAProxy',
    describe: 'first: fill the lowest worker with room; static-rr: strict rotation'
  },
  queueTimeout: {
    flag: 'queue-timeout',
    kind: 'duration',
    default: 10000,
    group: 'HAProxy',
    describe: 'A request waiting longer than this for a free worker gets a 503 (under overload, set it below your ' +
      'clients\' deadline minus a render)'
  },
  maxQueue: {
    flag: 'max-queue',
    kind: 'int',
    default: DEFAULT_MAX_QUEUE,
    group: 'HAProxy',
    describe: 'A request that finds this many waiting gets 503 with Retry-After at once instead of joining the queue ' +
      '(0: no limit); they are worked off in about this many paces (a pace: render time ÷ workers), so it bounds the ' +
      'wait under overload at any pool size'
  },
  priorityRoutes: {
    flag: 'priority-routes',
    kind: 'string',
    group: 'HAProxy',
    defaultText: 'none',
    describe: 'Priority classes by path prefix, as the embedded balancer\'s: PREFIX=CLASS,... (high, normal, low); a ' +
      'higher class leaves the queue first'
  },
  priorityHeader: {
    flag: 'priority-header',
    kind: 'string',
    group: 'HAProxy',
    defaultText: 'none',
    describe: 'Request header (high, normal, low) that sets the class, believed from nginx\'s unix socket and ' +
      '127.0.0.1/::1 only'
  },
  streamRoutes: {
    flag: 'stream-routes',
    kind: 'string',
    group: 'HAProxy',
    defaultText: 'none',
    describe: 'Path prefixes of long-lived requests (PREFIX,...: an AI chat route, long polls), sent to the streams ' +
      'backend, where they do not take a worker\'s only render slot; requests that accept text/event-stream go there ' +
      'anyway'
  },
  workerMaxOpen: {
    flag: 'worker-max-open',
    kind: 'count',
    default: 8192,
    group: 'HAProxy',
    describe: 'Long-lived requests one worker may hold at once (the streams backend\'s maxconn per server)'
  },
  tunnelTimeout: {
    flag: 'tunnel-timeout',
    kind: 'duration',
    default: DEFAULT_TUNNEL_TIMEOUT,
    group: 'HAProxy',
    describe: 'A WebSocket (a tunnel once its 101 came back) silent this long both ways is closed (timeout tunnel; ' +
      'give the same to `pool config nginx`); keep clients\' pings below it'
  },
  statsPort: {
    flag: 'stats-port',
    kind: 'port',
    default: 8999,
    group: 'HAProxy',
    describe: 'Stats page and Prometheus /metrics on 127.0.0.1'
  },
  prefix: {
    flag: 'prefix',
    kind: 'string',
    default: DEFAULT_PREFIX,
    group: 'Paths',
    describe: 'Directory of the sockets and pid file'
  },
  socket: {
    flag: 'socket',
    kind: 'string',
    group: 'Paths',
    defaultText: 'PREFIX/haproxy-admin.sock',
    describe: 'Runtime API socket (give the same to `pool start --haproxy-socket`)'
  },
  httpSocket: {
    flag: 'http-socket',
    kind: 'string',
    group: 'Paths',
    defaultText: 'PREFIX/haproxy-http.sock',
    describe: 'Unix socket of the HTTP frontend, for nginx'
  },
  pidFile: {
    flag: 'pid-file',
    kind: 'string',
    group: 'Paths',
    defaultText: 'PREFIX/haproxy.pid',
    describe: 'Pid file'
  },
  stateFile: {
    flag: 'state-file',
    kind: 'string',
    group: 'Paths',
    defaultText: 'none',
    describe: 'Load the servers\' states from this file at each start and reload; the pool keeps it written (`pool ' +
      'start --haproxy-state-file`), so a reload keeps ready workers in service'
  },
  socketUser: {
    flag: 'socket-user',
    kind: 'string',
    group: 'Users',
    describe: 'Owner of the runtime API socket: the user `pool` runs as'
  },
  httpSocketUser: {
    flag: 'http-socket-user',
    kind: 'string',
    group: 'Users',
    defaultText: 'none: mode 666',
    describe: 'Owner of the HTTP socket, then mode 600: the user nginx\'s workers run as'
  },
  user: {
    flag: 'user',
    kind: 'string',
    group: 'Users',
    describe: 'User HAProxy drops to after binding (when started as root)'
  },
  group: { flag: 'group', kind: 'string', group: 'Users', describe: 'Group HAProxy drops to after binding' },
  log: {
    flag: 'log',
    kind: 'string',
    default: '/dev/log',
    group: 'HAProxy',
    describe: 'Syslog target, \'stdout\', or \'none\''
  }
}

// Timeouts shared by the HAProxy and nginx configs, so that each layer gives up after the one
// behind it and the client gets the most precise answer. Each is a silence, not a length: a
// stream lasts as long as it sends.
//   pool --read-timeout R  a worker ends a response it left R without a byte (504 before the head)
//   pool --timeout T       the pool kills a worker whose event loop stopped for T (and sets it
//                          MAINT)
//   timeout server         max(R, T) + 30 s of silence from a worker: never first, because HAProxy
//                          giving up frees the server slot while the worker may still render
//                          (a second request would then wait in the worker behind the first)
//   timeout queue          how long a request may wait for a free worker (503 after)
//   timeout client         the client is nginx on this host; it never stalls, so only a bound
//   nginx read timeout     10 s above the longest HAProxy can leave it waiting, so that its 502,
//                          503 or 504 reaches the client, not nginx's: queue + server (the pool
//                          gone, HAProxy's own 504), or twice queue + T (a GET whose worker the
//                          pool killed at T is replayed once, and may queue and be killed again)
//   timeout tunnel         a WebSocket, once upgraded, silent both ways for this long
//                          (--tunnel-timeout); it replaces client and server for the tunnel
//   nginx tunnel timeout   the same, 10 s above, so HAProxy's close comes first
// Without a read timeout (R 0), a worker may be silent for an hour before HAProxy gives up.
const NO_READ_TIMEOUT = 3600000

function timeouts ({
  timeout = 30000, readTimeout = 60000, queueTimeout = 10000,
  tunnelTimeout = DEFAULT_TUNNEL_TIMEOUT
} = {}) {
  const server = Math.max(readTimeout > 0 ? readTimeout : NO_READ_TIMEOUT, timeout) + 30000
  return {
    request: timeout,
    read: readTimeout,
    connect: 1000,
    queue: queueTimeout,
    server,
    client: queueTimeout + server + 10000,
    httpRequest: 10000,
    // Longer than nginx's upstream keepalive_timeout (60 s), so nginx always closes an idle
    // connection first and never sends a request on one HAProxy is closing.
    httpKeepAlive: 75000,
    upstreamKeepAlive: 60000,
    nginxRead: Math.max(queueTimeout + server, 2 * (queueTimeout + timeout)) + 10000,
    tunnel: tunnelTimeout,
    nginxTunnel: tunnelTimeout + 10000
  }
}

function duration (ms) {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

// 3600000 → '1h', 90000 → '90s': HAProxy's (and nginx's) time format, in the largest unit that is
// exact.
function longDuration (ms) {
  for (const [unit, size] of [['d', 86400000], ['h', 3600000], ['m', 60000]]) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`
  }
  return duration(ms)
}

// --tunnel-timeout, alike for every config that carries it. 0 would not mean "none": HAProxy
// takes `timeout tunnel 0` as unset and falls back to the client and server timeouts.
function checkTunnelTimeout (ms) {
  if (ms < 1000) {
    throw bad(`--tunnel-timeout must be at least 1s (got ${duration(ms)}): it is how long a WebSocket may stay ` +
      'silent, and HAProxy would read 0 as unset, not as never')
  }
  if (ms > MAX_HAPROXY_TIME) {
    throw bad(`--tunnel-timeout must be at most 24 days, 34560m (got ${longDuration(ms)}): HAProxy's timers stop there`)
  }
}

function bad (message) {
  return poolError(codes.BAD_OPTION, message)
}

function checkPath (flag, p, { unixSocket = false } = {}) {
  const abs = path.resolve(p)
  if (/\s/.test(abs)) throw bad(`--${flag} must not contain spaces (got '${p}')`)
  if (unixSocket && Buffer.byteLength(abs) > MAX_UNIX_PATH) {
    throw bad(`--${flag} is ${Buffer.byteLength(abs)} bytes long; a unix socket path may have at ` +
      `most ${MAX_UNIX_PATH} (got '${abs}')`)
  }
  return abs
}

function checkWord (flag, value) {
  if (value !== undefined && /\s/.test(value)) throw bad(`--${flag} must be one word (got '${value}')`)
}

// Fill defaults, derive paths from the prefix and reject what HAProxy would refuse or misread.
function resolveHaproxyOptions (input = {}) {
  const o = resolveOptions(input, OPTIONS)
  if (!PROXY_NAME.test(o.backend)) {
    throw bad(`--backend must be a HAProxy name: letters, digits, '-', '_', '.', ':' (got '${o.backend}')`)
  }
  o.maxWorkers = o.maxWorkers ?? o.workers
  if (o.maxWorkers < o.workers) throw bad(`--max-workers (${o.maxWorkers}) must be at least --workers (${o.workers})`)
  const lastPort = o.workerPort + o.maxWorkers - 1
  if (lastPort > 65535) throw bad(`--worker-port ${o.workerPort} + ${o.maxWorkers} servers goes past port 65535`)
  for (const [flag, p] of [['port', o.port], ['stats-port', o.statsPort]]) {
    if (p >= o.workerPort && p <= lastPort) {
      throw bad(`--${flag} ${p} is one of the workers' ports ${o.workerPort}-${lastPort}`)
    }
  }
  if (o.port === o.statsPort) throw bad(`--port and --stats-port are both ${o.port}`)
  for (const flag of ['worker-host', 'host', 'socket-user', 'http-socket-user', 'user', 'group']) {
    checkWord(flag, o[camel(flag)])
  }
  o.prefix = checkPath('prefix', o.prefix)
  o.socket = checkPath('socket', o.socket ?? path.join(o.prefix, 'haproxy-admin.sock'), { unixSocket: true })
  o.httpSocket = checkPath('http-socket', o.httpSocket ?? path.join(o.prefix, 'haproxy-http.sock'),
    { unixSocket: true })
  o.pidFile = checkPath('pid-file', o.pidFile ?? path.join(o.prefix, 'haproxy.pid'))
  if (o.stateFile !== undefined) o.stateFile = checkPath('state-file', o.stateFile)
  try { o.longLivedRoutes = streamRoutes(o.streamRoutes) } catch (err) { throw bad(`--stream-routes: ${err.message}`) }
  if (o.priorityRoutes !== undefined) {
    try {
      o.priorityRules =
      parseRoutes(o.priorityRoutes)
    } catch (err) { throw bad(`--priority-routes: ${err.message}`) }
  }
  if (o.priorityHeader !== undefined && !/^[A-Za-z0-9-]+$/.test(o.priorityHeader)) {
    throw bad(`--priority-header must be a header name (got '${o.priorityHeader}')`)
  }
  checkTunnelTimeout(o.tunnelTimeout)
  return o
}

function camel (flag) {
  return flag.replace(/-([a-z])/g, (_, c) => c.toUpperCase())
}

function hostPort (host, port) {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
}

function logLine (target) {
  if (target === 'none') return []
  if (target === 'stdout') return ['    log stdout format raw local0']
  return [`    log ${target} local0`]
}

// What the runtime API is for in this config, and why its sessions may idle this long.
const POOL_SOCKET_COMMENTS = {
  socket: [
    '    # The runtime API `pool start --balancer haproxy --haproxy-socket` drives: it sets each',
    '    # server READY, DRAIN or MAINT. `set server` needs level admin; mode 600 keeps everyone but',
    '    # its owner out. expose-fd lets a reload take over the listeners without dropping any.'
  ],
  timeout: '    # Idle limit of an interactive session; the pool opens one connection per command.',
  threads: () => [
    '    # One thread. With several, HAProxy 2.6 and 3.0 may pick the same worker for two requests that',
    '    # arrive together before either has taken its slot: the worker then runs the second',
    '    # behind the first, or the second waits for it while another worker is free (two threads:',
    '    # a fifth to a third of simultaneous pairs). One thread serves some 10,000 requests/s a',
    '    # core (measured on a 2-core VM), more than a host\'s workers render.'
  ]
}

// `threads`: HAProxy's nbthread (the edge's --threads; 1 for a host's workers).
function globalSection (o, t, comments = POOL_SOCKET_COMMENTS, threads = 1) {
  const owner = (user) => (user ? ` user ${user}` : '')
  return [
    'global',
    ...logLine(o.log),
    `    pidfile ${o.pidFile}`,
    ...(o.user ? [`    user ${o.user}`] : []),
    ...(o.group ? [`    group ${o.group}`] : []),
    ...comments.socket,
    `    stats socket ${o.socket} mode 600 level admin expose-fd listeners${owner(o.socketUser)}`,
    comments.timeout,
    '    stats timeout 30s',
    ...comments.threads(threads),
    `    nbthread ${threads}`,
    '    # After a reload, the old process may finish what it runs, up to the longest request.',
    `    hard-stop-after ${duration(t.queue + t.server + 10000)}`,
    ...(o.stateFile
      ? ['    # Written by the pool at every state it sets (--haproxy-state-file); read at start and',
          '    # reload, so the new process keeps READY workers READY instead of the `disabled` below.',
          '    # Until the pool first runs, the file is missing and HAProxy warns once: harmless.',
          `    server-state-file ${o.stateFile}`]
      : []),
    ''
  ]
}

// A reload's old process keeps each idle client connection for one more answer instead of
// closing it as it stops, which races a request the client (`clients`) writes on it.
function idleCloseOnResponse (clients) {
  return [
    '    # On a reload the old process would close idle client connections at once, racing a request',
    `    # written on one by ${clients}.`,
    '    # This keeps each open until it has carried one more answer, sent with `Connection: close`;',
    '    # hard-stop-after bounds the wait.',
    '    option idle-close-on-response'
  ]
}

function defaultsSection (o, t) {
  return [
    'defaults',
    '    mode http',
    ...(o.stateFile ? ['    load-server-state-from-file global'] : []),
    '    log global',
    '    option dontlognull',
    '    # Workers are on this host: a connect that takes longer than this will not succeed, and',
    '    # failing fast lets `retries` + `option redispatch` move the request to another worker.',
    `    timeout connect ${duration(t.connect)}`,
    '    # The client is nginx on this host, which buffers the whole request first: nothing slow',
    '    # comes from it. Slow clients are nginx\'s job (its client_*_timeout, send_timeout).',
    `    timeout http-request ${duration(t.httpRequest)}`,
    '    # Longer than queue + server, so nginx waiting for an answer is never cut off.',
    `    timeout client ${duration(t.client)}`,
    '    # Above nginx\'s upstream keepalive_timeout (60s): nginx closes idle connections first.',
    `    timeout http-keep-alive ${duration(t.httpKeepAlive)}`,
    ...idleCloseOnResponse('nginx, which does not replay it'),
    '    # A client that leaves ends its request at the worker at once, so its app sees the close',
    '    # (an LLM call stops): measured 0-3 ms for a stream, where without it the close reaches the',
    '    # worker only once HAProxy has written to the gone client twice. It takes effect only from',
    '    # here (a frontend cannot set it); the render backend turns it off again (see there).',
    '    option abortonclose',
    '    # The pool owns the limits: its workers end a response left silent for --read-timeout',
    `    # (${t.read > 0 ? duration(t.read) : 'none'} here), and it kills a worker whose loop stopped for --timeout ` +
      `(${duration(t.request)}) and`,
    '    # sets it MAINT. HAProxy must never give up first, or it would free the slot (maxconn 1)',
    '    # while the worker is still busy with the old request. A silence, not a length: a stream',
    '    # that sends lasts as long as it sends.',
    `    timeout server ${duration(t.server)}`,
    ''
  ]
}

function frontendSection (o) {
  return [
    'frontend pool_http',
    `    bind ${hostPort(o.host, o.port)}`,
    ...httpSocketBind(o),
    ...(o.log === 'none' ? [] : ['    option httplog']),
    ...longLivedRules(o),
    `    default_backend ${o.backend}`,
    ''
  ]
}

// Which requests are long-lived, decided before a worker is chosen: HAProxy counts connections,
// not renders, and cannot tell a stream from a page until the answer comes.
function longLivedRules (o) {
  const streams = streamsBackend(o.backend)
  const routes = o.longLivedRoutes
  return [
    '    # Long-lived requests go to the streams backend, over the same workers, where they do not',
    '    # take a worker\'s only render slot: server-sent events (the client accepts',
    `    # text/event-stream)${routes.length ? ' and the routes of --stream-routes' : ''}. A client cannot send ` +
      'the pool\'s header itself.',
    `    http-request del-header ${STREAM_HEADER}`,
    '    acl pool_long_lived req.hdr(accept) -m sub text/event-stream',
    ...routes.map((r) => `    acl pool_long_lived path_beg ${r}`),
    `    use_backend ${streams} if pool_long_lived`,
    ...websocketRules(streams, 'pool'),
    '    # Socket.IO (Engine.IO: its query names EIO): a poll waits for data up to 25 s, and every',
    '    # request of a session must reach the worker holding it (sessionLines).',
    '    acl pool_engine_io url_param(EIO) -m found',
    `    use_backend ${streams} if pool_engine_io`
  ]
}

// Socket.IO's sessions: only the worker that answered a session's handshake (a poll without
// `sid`) knows it; every other answers 400 "Session ID unknown". The id is read from that answer
// (`0{"sid":"…"`, Engine.IO 4), the worker's id kept under it in a table (expiring an hour after
// the session's last request), and a later request naming the id (`?sid=`) goes to that worker,
// also while it drains. A worker that is down is skipped, and the client opens a new session.
// The table keeps the server's id, which is its place in the list (worker1 is 1, as declared).
function sessionLines (o) {
  const table = streamsBackend(o.backend)
  const open = '{ var(txn.engine_open) -m bool }'
  const known = '{ var(txn.engine_sid) -m reg ^[-_A-Za-z0-9]{1,64}$ }' // an id, not a body that had none
  const sid = "\"res.body,regsub('^0.{8}([-_A-Za-z0-9]+).*\\$','\\\\1')\""
  const servers = []
  for (let i = 1; i <= o.maxWorkers; i++) {
    servers.push(`    use-server ${serverName(i)} if { var(txn.engine_server) -m int ${i} }`)
  }
  return [
    '    # Socket.IO sessions, each on the worker that opened it (see `pool_engine_io` above).',
    '    stick-table type string len 64 size 100k expire 1h store gpt0',
    '    http-request set-var(txn.engine_open) bool(true) if { url_param(EIO) -m found } ' +
      '{ url_param(transport) -m str polling } !{ url_param(sid) -m found }',
    '    # Only a session the table knows is tracked (refreshed): a client cannot fill it with ids.',
    `    http-request track-sc1 url_param(sid) if { url_param(sid),in_table(${table}) }`,
    `    http-request set-var(txn.engine_server) url_param(sid),table_gpt0(${table}) if { url_param(sid) -m found }`,
    ...servers,
    `    http-response wait-for-body time 1s at-least 64 if ${open}`,
    `    http-response set-var(txn.engine_sid) ${sid} if ${open}`,
    `    http-response track-sc2 var(txn.engine_sid) if ${open} ${known}`,
    `    http-response sc-set-gpt0(2) srv_id if ${open} ${known}`
  ]
}

// A WebSocket handshake (RFC 6455: Upgrade: websocket, and Connection listing upgrade; hdr()
// takes each comma-separated value on its own, -i any case) goes to `backend`, after the
// `comment` lines: its connection stays open for as long as the socket lives. Shared with the
// edge's config.
function websocketRules (backend, prefix, comment = [
  '    # WebSockets go there too: a socket holds its connection for its whole life, and in the',
  '    # render backend it would hold a worker\'s only slot while every page waited behind it.'
]) {
  return [
    ...comment,
    `    acl ${prefix}_websocket hdr(upgrade) -i websocket`,
    `    acl ${prefix}_upgrade hdr(connection) -i upgrade`,
    `    use_backend ${backend} if ${prefix}_websocket ${prefix}_upgrade`
  ]
}

// What HAProxy knows of a WebSocket, said where it is configured (the pool's and the edge's
// streams backends), and the tunnel timeout that is its only limit once upgraded.
function tunnelLines (t, where) {
  return [
    `    # A WebSocket ${where}: HAProxy sees its handshake and the 101, then relays bytes both`,
    '    # ways. It counts the connection on its server for as long as the socket lives (the',
    '    # server\'s sessions, scur) and never sees a message, a ping or a close frame: it cannot tell',
    '    # an idle socket from a dead one, and what it closes it closes without a frame (the client',
    '    # sees 1006). Once upgraded, `timeout tunnel` replaces `timeout client` and `timeout server`',
    `    # (measured, 2.6.12): the socket is closed when nothing has passed either way for ${longDuration(t.tunnel)}`,
    '    # (--tunnel-timeout); bytes one way keep it open. An app whose sockets idle longer pings',
    '    # (Socket.IO does, every 25 s).',
    `    timeout tunnel ${longDuration(t.tunnel)}`
  ]
}

function streamsSection (o, t) {
  return [
    `backend ${streamsBackend(o.backend)}`,
    `    # The same workers as ${o.backend}, for long-lived requests: each worker holds up to`,
    `    # ${o.workerMaxOpen} of them (--worker-max-open) beside its one render, fewest first. The header tells`,
    '    # its guard that the request holds no render place, so a stream never waits behind a render',
    '    # nor a render behind a stream. The pool sets these servers READY, DRAIN and MAINT with',
    `    # those of ${o.backend}. What HAProxy cannot know: a request here that renders long on the CPU`,
    '    # still shares its worker\'s loop with the render it runs beside.',
    ...tunnelLines(t, 'here'),
    '    balance leastconn',
    '    # A refused connection (a dead worker not yet MAINT) goes to another worker; nothing else',
    '    # is replayed: a stream may have been acted on.',
    ...haproxyRetryLines({ replays: false }),
    `    timeout queue ${duration(t.queue)}`,
    `    http-request set-header ${STREAM_HEADER} 1`,
    '    # server-close ends the server connection after a response; a 101 makes it a tunnel',
    '    # instead, which lasts until either side closes.',
    '    option http-server-close',
    '    option http-no-delay',
    '    # abortonclose (from the defaults): a client that leaves ends its stream at the worker.',
    ...sessionLines(o),
    `    default-server maxconn ${o.workerMaxOpen} disabled check inter 2s fall 1 rise 1 observe layer4 error-limit ` +
      '1 on-error mark-down',
    ...serverLines(o),
    ''
  ]
}

// nginx's workers open the HTTP socket, and which user they run as depends on how nginx was
// started (as root: its `user`, nobody by default; otherwise whoever started it). Without
// --http-socket-user the socket is open to every local user: no less private than the TCP bind
// above, which any local process can reach, and it works whoever runs nginx.
function httpSocketBind (o) {
  if (o.httpSocketUser) {
    return [
      '    # nginx reaches HAProxy here (keepalive upstream over a unix socket); its workers run ' +
        `as ${o.httpSocketUser}.`,
      `    bind unix@${o.httpSocket} mode 600 user ${o.httpSocketUser} name nginx`
    ]
  }
  return [
    '    # nginx reaches HAProxy here (keepalive upstream over a unix socket). Mode 666: nginx\'s',
    '    # workers connect as whatever user they run as (nobody when nginx starts as root), and the',
    '    # TCP bind above is open to every local user anyway. --http-socket-user limits it to one.',
    `    bind unix@${o.httpSocket} mode 666 name nginx`
  ]
}

function serverLines (o) {
  const lines = []
  for (let i = 1; i <= o.maxWorkers; i++) {
    if (i === o.workers + 1) {
      lines.push('    # Spare servers for `pool scale`: same settings, unused until the pool makes them ready.')
    }
    lines.push(`    server ${serverName(i)} ${hostPort(o.workerHost, o.workerPort + i - 1)}`)
  }
  return lines
}

// Decided by measurement; a test repeats it against the real haproxy.
const ABORT_ON_CLOSE_COMMENT = [
  '    # `no option abortonclose` here (the defaults set it, for the long-lived requests), by',
  '    # measurement (HAProxy 2.6.12, one worker rendering 1 s,',
  '    # request A running, B queued, A\'s client closing at 300 ms, by FIN or by RST):',
  '    #   without it: A keeps its slot until the worker finishes A; B reaches the worker at',
  '    #     1001 ms. Never two requests in one worker.',
  '    #   with it: HAProxy frees the slot at once and sends B to the worker still rendering A',
  '    #     (two in one worker at 302 ms), which breaks one-request-per-worker.',
  '    # The price: a request whose client left while it was queued is still rendered (the',
  '    # option would drop it). `timeout queue` bounds how late such a render can come; and a',
  '    # client that leaves while its answer streams is seen only when HAProxy next writes to it.',
  '    no option abortonclose'
]

// Decided by measurement; a test repeats it against the real haproxy.
const NO_DELAY_LINES = [
  '    # A streamed page (its shell at once, the rest as its data arrives) reaches the client as the',
  '    # worker sends it. Without http-no-delay HAProxy sends a part it knows is not the last with',
  '    # MSG_MORE, and the kernel holds it up to 200 ms waiting for more (HAProxy 2.6.12 on',
  '    # loopback, a 4 KB shell then the rest 300 ms later: the shell reached the client after',
  '    # 208-218 ms; with it, 1-6 ms, as from the worker directly). A page written in one piece goes',
  '    # out the same either way; one written in many pieces costs a few more packets.',
  '    option http-no-delay'
]

// Retries as the embedded balancer makes them, as far as HAProxy 2.6 can (the rule, and where
// HAProxy differs: lib/fronts/balancer/failures.js); a test measures them against the real HAProxy.
const RETRY_LINES = [
  '    # Retries, each on another worker (`redispatch 1`):',
  '    #   conn-failure    the connection was refused (a dead worker not yet MAINT): nothing',
  '    #                   reached a worker, so any method is retried.',
  '    #   empty-response  the worker closed the connection without answering: it died holding',
  `    #                   the request. Only ${replayableInWords()} are sent again (disable-l7-retry below):`,
  '    #                   anything else may have been acted on, and gets a 502.',
  '    # `retries` is one budget for both: HAProxy counts a replay as a retry, and tries a request',
  `    # at most retries + 1 times. ${HAPROXY_RETRIES}, so that a GET that kills every worker it reaches costs two`,
  '    # workers (with 3 it cost four), as in the embedded balancer. The price: a refused connection',
  '    # is retried once, not three times; with the pool setting a dead worker MAINT within',
  '    # milliseconds and `observe` below, that one retry lands on a live worker.',
  '    # A replay needs the whole request in one buffer (tune.bufsize, 16 KB by default): a larger',
  '    # request is not replayed.',
  ...haproxyRetryLines({ replays: true })
]

// HAProxy's queue is ordered by class, then arrival: the embedded balancer's priority classes
// as `set-priority-class` rules, high -1, normal 0, low 1. Each
// matching rule sets the class and the last one wins, so routes go shortest prefix first (the
// longest match wins) and the header last (it wins over a route).
const CLASS_NUMBER = { high: -1, normal: 0, low: 1 }

function priorityLines (o) {
  if (!o.priorityRules && !o.priorityHeader) return []
  const lines = ['    # Priority classes: a lower class leaves the queue first; within a class, arrival order.']
  for (const { prefix, cls } of [...(o.priorityRules || [])].reverse()) {
    lines.push(`    http-request set-priority-class int(${CLASS_NUMBER[CLASSES[cls]]}) if { path_beg ${prefix} }`)
  }
  if (o.priorityHeader) {
    const h = o.priorityHeader.toLowerCase()
    lines.push('    # The header is believed only from nginx (the unix socket, its bind named nginx) and this host.')
    lines.push('    acl pool_trusted_peer src 127.0.0.1 ::1', '    acl pool_trusted_peer so_name nginx')
    for (const name of CLASSES) {
      lines.push(`    http-request set-priority-class int(${CLASS_NUMBER[name]}) if pool_trusted_peer { ` +
        `req.hdr(${h}) -i ${name} }`)
    }
  }
  return lines
}

// Overload protection, as far as HAProxy 2.6 can express it: a cap on the queue's length. Its
// queue is FIFO within a class, and it cannot tell how long requests have waited until
// `timeout queue`, nor serve the newest first (the embedded balancer's --overload-control).
// Rules run in order, so this comes after the priority rules: a high-class request is let in.
function overloadLines (o) {
  if (o.maxQueue === 0) {
    return ['    # No cap on the queue (--max-queue 0): under overload every request waits up to `timeout queue`.']
  }
  const highLetIn = o.priorityRules || o.priorityHeader ? ' !{ prio_class lt 0 }' : ''
  return [
    `    # Overload: a request that finds ${o.maxQueue} waiting gets 503 with Retry-After at once, rather than`,
    '    # a place at the end of a queue that would serve it after its client gave up. The queue is',
    `    # worked off in about ${o.maxQueue} paces (a pace: render time / workers), so this bounds the wait`,
    '    # at any pool size, and a healthy queue below capacity almost never gets this long.',
    ...(highLetIn ? ['    # A high-class request is let in whatever the length: it is served first anyway.'] : []),
    `    http-request return status 503 content-type text/plain string "${OVERLOADED_TEXT}" hdr Retry-After 1 if { ` +
      `queue(${o.backend}) ge ${o.maxQueue} }${highLetIn}`
  ]
}

// As the embedded balancer words its answer to a full queue.
const OVERLOADED_TEXT = 'the queue is full (the pool is overloaded); retry shortly'

function backendSection (o, t) {
  return [
    `backend ${o.backend}`,
    `    balance ${o.balance}`,
    ...RETRY_LINES,
    '    # Requests wait here, in the backend queue, while every worker is busy.',
    `    timeout queue ${duration(t.queue)}`,
    ...priorityLines(o),
    ...overloadLines(o),
    '    # A new connection per request: a connect is ~0.1 ms on loopback against renders of tens',
    '    # of ms, and it removes the race of reusing an idle connection the worker is closing. Each',
    '    # request is then a fresh connect, which is what `observe layer4` judges.',
    '    option http-server-close',
    ...NO_DELAY_LINES,
    ...ABORT_ON_CLOSE_COMMENT,
    '    # maxconn 1: each worker takes one request at a time; the rest queue above.',
    '    # disabled: every server starts in MAINT and gets traffic only once the pool sets it',
    '    #   READY (`pool start --balancer haproxy`), so nothing is sent to a worker still booting.',
    '    # observe layer4 ... mark-down: the second line of defence when a worker dies: its first',
    '    #   refused connection marks it DOWN (MAINT from the pool on exit is the first line). HAProxy',
    '    #   only observes servers that have `check`; without it `observe` silently does nothing.',
    '    # check: a TCP connect every 2 s; a dead worker is DOWN within one interval even when the',
    '    #   pool itself is gone. The kernel accepts the connect, so a busy worker still passes.',
    '    default-server maxconn 1 disabled check inter 2s fall 1 rise 1 observe layer4 error-limit 1 on-error ' +
      'mark-down',
    ...serverLines(o),
    ''
  ]
}

function statsSection (o) {
  return [
    'frontend stats',
    `    bind 127.0.0.1:${o.statsPort}`,
    '    no log',
    '    http-request use-service prometheus-exporter if { path /metrics }',
    '    stats enable',
    '    stats uri /',
    '    stats refresh 5s',
    '    stats show-legends',
    ''
  ]
}

function haproxyConfig (input = {}) {
  const o = resolveHaproxyOptions(input)
  const t = timeouts(o)
  return [
    ...header(o),
    '',
    ...globalSection(o, t),
    ...defaultsSection(o, t),
    ...frontendSection(o),
    ...backendSection(o, t),
    ...streamsSection(o, t),
    ...statsSection(o)
  ].join('\n')
}

// The header says how to start HAProxy and the pool on this file, with every `pool start` flag
// that must agree with it spelled out (a default left implicit is one that can drift).
function header (o) {
  const poolUser = o.socketUser ?? 'the user that started HAProxy'
  return [
    `# haproxy.cfg for ${o.workers} pool workers (worker1..worker${o.workers} ` +
      `on ${hostPort(o.workerHost, o.workerPort)} and up).`,
    `# Generated by \`${generatedBy(o)}\`.`,
    '# Start HAProxy on this file (FILE), as root or as the pool\'s user (systemd\'s haproxy.service',
    '# does it for /etc/haproxy/haproxy.cfg); stop it by its pid file:',
    `#   mkdir -p ${o.prefix} && haproxy -D -f FILE`,
    `#   kill $(cat ${o.pidFile})`,
    `# Then the pool, as ${poolUser} (the runtime API socket is mode 600, theirs), with`,
    '# every setting that must match this file:',
    `#   ${poolStartLine(o)}`,
    ...(poolStatsClash(o)
      ? [`#   (--stats-port 0: the pool's /status would default to --worker-port - 2 = ${o.workerPort - 2}, which`,
          '#   HAProxy takes here; give it a free port instead.)']
      : []),
    '# nginx in front: `pool config nginx ' +
      `--haproxy-http-socket ${o.httpSocket}${o.tunnelTimeout === DEFAULT_TUNNEL_TIMEOUT
? ''
: ' ' +
  `--tunnel-timeout ${duration(o.tunnelTimeout)}`}\`.`
  ]
}

function poolStartLine (o) {
  return ['pool', 'start', 'APP', ...poolStartArgs(o)].join(' ')
}

// The `pool start` flags that must agree with the config of options `o` (resolved), as an argv.
// scripts/demo-stack.js starts its pool with them too.
function poolStartArgs (o) {
  const args = ['-n', String(o.workers)]
  if (o.workerHost !== POOL_OPTIONS.workerHost.default) args.push('--worker-host', o.workerHost)
  args.push('--worker-port', String(o.workerPort), '--timeout', duration(o.timeout), '--read-timeout',
    duration(o.readTimeout),
    '--balancer', 'haproxy', '--haproxy-socket', o.socket, '--haproxy-backend', o.backend)
  if (o.stateFile) args.push('--haproxy-state-file', o.stateFile)
  if (poolStatsClash(o)) args.push('--stats-port', '0')
  return args
}

// `pool start --balancer haproxy` listens for its own /status and /metrics on --worker-port − 2
// unless told otherwise.
function poolStatsClash (o) {
  return [o.port, o.statsPort].includes(o.workerPort - 2)
}

// The `pool config haproxy` command line that prints this config: every setting that is not
// its default.
function generatedBy (o) {
  const words = ['pool config haproxy', `-n ${o.workers}`]
  const derived = {
    maxWorkers: o.workers,
    socket: path.join(o.prefix, 'haproxy-admin.sock'),
    httpSocket: path.join(o.prefix, 'haproxy-http.sock'),
    pidFile: path.join(o.prefix, 'haproxy.pid')
  }
  for (const [name, spec] of Object.entries(OPTIONS)) {
    if (name === 'workers' || o[name] === undefined) continue
    const byDefault = name in derived ? derived[name] : spec.default
    if (o[name] === byDefault) continue
    words.push(`--${spec.flag} ${spec.kind === 'duration' ? duration(o[name]) : o[name]}`)
  }
  return words.join(' ')
}

module.exports = {
  haproxyConfig,
  resolveHaproxyOptions,
  poolStartArgs,
  timeouts,
  duration,
  longDuration,
  checkTunnelTimeout,
  OPTIONS,
  DEFAULT_PREFIX,
  // Shared with the fleet's edge config.
  PROXY_NAME,
  bad,
  camel,
  checkPath,
  checkWord,
  hostPort,
  globalSection,
  statsSection,
  idleCloseOnResponse,
  websocketRules,
  tunnelLines,
  MAX_HAPROXY_TIME,
  DEFAULT_TUNNEL_TIMEOUT
}
