'use strict'

// `pool config nginx`: the nginx.conf that fronts the HAProxy of `pool config haproxy`. nginx
// deals with the internet (slow clients, uploads, keep-alive); HAProxy queues; the pool renders.
// Every path is under one prefix, so it runs without root:
//   mkdir -p PREFIX/logs && nginx -p PREFIX/ -c PREFIX/nginx.conf -e PREFIX/logs/error.log

const path = require('node:path')
const { resolveOptions } = require('../options/table')
const { poolError, codes } = require('../errors')
const {
  timeouts, duration, longDuration, checkTunnelTimeout, DEFAULT_PREFIX,
  OPTIONS: HAPROXY_OPTIONS
} = require('./haproxy')

const OPTIONS = {
  port: { flag: 'port', kind: 'port', default: 8080, group: 'nginx', describe: 'Port nginx listens on' },
  host: {
    flag: 'host',
    kind: 'string',
    group: 'nginx',
    defaultText: 'every address',
    describe: 'Address nginx listens on'
  },
  prefix: {
    flag: 'prefix',
    kind: 'string',
    default: '/var/lib/pool/nginx',
    group: 'nginx',
    describe: 'Directory of nginx.conf, pid, logs and temp files'
  },
  user: {
    flag: 'user',
    kind: 'string',
    group: 'nginx',
    defaultText: 'nobody',
    describe: 'User of the worker processes when nginx starts as root'
  },
  group: {
    flag: 'group',
    kind: 'string',
    group: 'nginx',
    defaultText: 'the group named like --user',
    describe: 'Group of the worker processes, with --user (Debian has no group \'nobody\': --user nobody --group ' +
      'nogroup)'
  },
  workerConnections: {
    flag: 'worker-connections',
    kind: 'count',
    default: 16384,
    group: 'nginx',
    describe: 'Connections one nginx worker holds at once; a request or stream holds two (its client\'s, ' +
      'HAProxy\'s). Each worker may open twice as many files, plus 1024 (worker_rlimit_nofile)'
  },
  haproxySocket: {
    flag: 'haproxy-http-socket',
    kind: 'string',
    default: path.join(DEFAULT_PREFIX, 'haproxy-http.sock'),
    group: 'HAProxy',
    describe: 'HAProxy\'s HTTP unix socket (`pool config haproxy --http-socket`)'
  },
  upstream: {
    flag: 'upstream',
    kind: 'string',
    group: 'HAProxy',
    describe: 'HAProxy as host:port instead of the unix socket'
  },
  timeout: {
    flag: 'timeout',
    kind: 'duration',
    default: 30000,
    group: 'Timeouts',
    describe: 'The pool\'s --timeout (sets how long nginx waits for HAProxy)'
  },
  readTimeout: {
    flag: 'read-timeout',
    kind: 'duration',
    default: 60000,
    group: 'Timeouts',
    describe: 'The pool\'s --read-timeout (sets how long nginx waits for HAProxy between two reads)'
  },
  queueTimeout: {
    flag: 'queue-timeout',
    kind: 'duration',
    default: 10000,
    group: 'Timeouts',
    describe: 'HAProxy\'s --queue-timeout'
  },
  tunnelTimeout: {
    ...HAPROXY_OPTIONS.tunnelTimeout,
    group: 'Timeouts',
    describe: 'HAProxy\'s --tunnel-timeout: a WebSocket is closed after this long without a byte (nginx waits 10 s ' +
      'more, so HAProxy\'s close comes first)'
  }
}

const HOST_PORT = /^(\[[^\]]+\]|[^\s/:[\]]+):(\d{1,5})$/

function bad (message) {
  return poolError(codes.BAD_OPTION, message)
}

function resolveNginxOptions (input = {}) {
  const o = resolveOptions(input, OPTIONS)
  for (const flag of ['host', 'user', 'group']) {
    if (o[flag] !== undefined && /[\s;{}]/.test(o[flag])) throw bad(`--${flag} must be one word (got '${o[flag]}')`)
  }
  if (o.group !== undefined && o.user === undefined) throw bad('--group needs --user')
  if (o.upstream !== undefined && !HOST_PORT.test(o.upstream)) {
    throw bad(`--upstream must be host:port (got '${o.upstream}')`)
  }
  o.prefix = path.resolve(o.prefix)
  o.haproxySocket = path.resolve(o.haproxySocket)
  for (const [flag, p] of [['prefix', o.prefix], ['haproxy-http-socket', o.haproxySocket]]) {
    if (/[\s;{}]/.test(p)) throw bad(`--${flag} must not contain spaces, ';' or braces (got '${p}')`)
  }
  checkTunnelTimeout(o.tunnelTimeout)
  return o
}

function listenAddress (o) {
  if (o.host === undefined) return String(o.port)
  return o.host.includes(':') ? `[${o.host}]:${o.port}` : `${o.host}:${o.port}`
}

function nginxConfig (input = {}) {
  const o = resolveNginxOptions(input)
  const t = timeouts(o)
  const p = (...parts) => path.join(o.prefix, ...parts)
  const upstream = o.upstream ?? `unix:${o.haproxySocket}`
  return [
    ...header(o),
    '',
    ...(o.user ? [`user ${o.user}${o.group ? ` ${o.group}` : ''};`] : []),
    'worker_processes auto;',
    '# Long-lived requests (server-sent events, AI token streams) each hold two connections of a',
    '# worker for as long as they last: a worker holds --worker-connections, half as many of them,',
    '# and may open the files they need (the master raises the limit when it runs as root).',
    `worker_rlimit_nofile ${2 * o.workerConnections + 1024};`,
    `pid ${p('nginx.pid')};`,
    `error_log ${p('logs', 'error.log')} warn;`,
    '',
    'events {',
    `    worker_connections ${o.workerConnections};`,
    '}',
    '',
    'http {',
    `    access_log ${p('logs', 'access.log')};`,
    '    # Temp files under the prefix too (the defaults, /var/lib/nginx, need root). nginx creates',
    '    # each directory but not its parent, so they sit directly in the prefix.',
    `    client_body_temp_path ${p('client_body_temp')};`,
    `    proxy_temp_path ${p('proxy_temp')};`,
    `    fastcgi_temp_path ${p('fastcgi_temp')};`,
    `    uwsgi_temp_path ${p('uwsgi_temp')};`,
    `    scgi_temp_path ${p('scgi_temp')};`,
    '    default_type application/octet-stream;',
    '    server_tokens off;',
    '',
    '    # nginx owns the client side: a slow or idle client costs nginx a connection, never a',
    '    # worker, and these limits are tight. HAProxy and the pool own the timeouts behind.',
    '    client_header_timeout 10s;',
    '    client_body_timeout 10s;',
    '    send_timeout 10s;',
    '    keepalive_timeout 65s;',
    '    client_max_body_size 10m;',
    '    # Request bodies up to 1 MiB stay in memory; the whole body is read before HAProxy sees',
    '    # the request (proxy_request_buffering on), so a slow upload never holds a worker.',
    '    client_body_buffer_size 1m;',
    '',
    ...WEBSOCKET_MAP,
    '',
    '    upstream pool_haproxy {',
    `        server ${upstream};`,
    '        # Reused connections to HAProxy (needs proxy_http_version 1.1 and an empty Connection',
    '        # header below). nginx closes idle ones after 60s, before HAProxy would (75s).',
    '        keepalive 64;',
    `        keepalive_timeout ${duration(t.upstreamKeepAlive)};`,
    '        keepalive_requests 10000;',
    '    }',
    '',
    '    server {',
    `        listen ${listenAddress(o)};`,
    '',
    '        # Liveness of nginx itself, answered without touching HAProxy or a worker.',
    '        location = /ping {',
    '            access_log off;',
    '            default_type text/plain;',
    '            return 200 "pong\\n";',
    '        }',
    '',
    '        location / {',
    '            # A WebSocket handshake goes on in @websocket below (418 only names the jump: nothing',
    '            # answers it), every other request here.',
    '            error_page 418 = @websocket;',
    '            if ($pool_websocket) {',
    '                return 418;',
    '            }',
    '            proxy_pass http://pool_haproxy;',
    '            proxy_http_version 1.1;',
    '            # No Connection header (nor Upgrade, which nginx never passes on by itself): the',
    '            # connection to HAProxy stays open for the next request.',
    '            proxy_set_header Connection "";',
    ...FORWARDED_HEADERS,
    '            # A request that failed on a worker is not replayed: it may have had effects, and a',
    '            # GET that crashed one worker would crash the next one too. HAProxy already retries',
    '            # connections a dead worker refused, which is the safe case.',
    '            proxy_next_upstream off;',
    '            proxy_request_buffering on;',
    '            # The whole response is taken as fast as HAProxy sends it, so the worker is free',
    '            # at once: 64k for headers and the first part, 1 MiB more in memory per request',
    '            # (rendered pages are hundreds of KB), anything larger goes to a temp file.',
    '            # Buffering does not hold back a streamed page: nginx passes each chunk of a chunked',
    '            # response on as it comes (measured with nginx 1.22: a 4 KB shell reached the client',
    '            # at once, the rest when the worker sent it, 300 ms later). What it holds is a',
    '            # response with a Content-Length written in parts, until it is whole.',
    '            # X-Accel-Buffering from the app is obeyed, as by `pool start`\'s own balancer: `no`',
    '            # turns buffering off for that response, which then goes at its client\'s pace and',
    '            # holds its worker while the client reads (what server-sent events or a stream that',
    '            # wants back-pressure ask for); `yes` is the default here. nginx never passes it on.',
    '            proxy_buffering on;',
    '            proxy_buffer_size 64k;',
    '            proxy_buffers 16 64k;',
    '            proxy_busy_buffers_size 128k;',
    '            # HAProxy is local and accepts at once; requests queue inside HAProxy, not here.',
    '            proxy_connect_timeout 2s;',
    '            proxy_send_timeout 10s;',
    '            # A silence between two reads, not a length: a stream lasts as long as it sends. 10 s above',
    `            # the longest HAProxy may leave nginx waiting: queue + server (${duration(t.queue)} ` +
      `+ ${duration(t.server)}), or a GET`,
    `            # replayed after its worker was killed at --timeout, twice (${duration(t.queue)} ` +
      `+ ${duration(t.request)}). So HAProxy's own`,
    '            # 502/503/504 reaches the client rather than a timeout of nginx\'s. A client that leaves',
    '            # closes nginx\'s connection to HAProxy, and so the worker\'s (proxy_ignore_client_abort',
    '            # off, nginx\'s default): the app sees its response close.',
    `            proxy_read_timeout ${duration(t.nginxRead)};`,
    '        }',
    '',
    ...websocketLocation(t),
    '    }',
    '}',
    ''
  ].join('\n')
}

const FORWARDED_HEADERS = [
  '            proxy_set_header Host $host;',
  '            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
  '            proxy_set_header X-Forwarded-Proto $scheme;',
  '            proxy_set_header X-Real-IP $remote_addr;'
]

// A WebSocket handshake, as HAProxy's config tells it (RFC 6455): Upgrade is websocket and
// Connection lists upgrade, in any case. One map over both headers: 1 for a handshake, else 0.
const WEBSOCKET_MAP = [
  '    # A WebSocket handshake: Upgrade: websocket, and Connection listing upgrade (any case). It',
  '    # goes to location @websocket, which passes both on; every other request has neither.',
  '    map "$http_upgrade:$http_connection" $pool_websocket {',
  '        default 0;',
  '        "~*^(?:[^:]*,)?\\s*websocket\\s*(?:,[^:]*)?:(?:.*,)?\\s*upgrade\\s*(?:,.*)?$" 1;',
  '    }'
]

// A location of its own for WebSockets: an upgrade needs its Upgrade and Connection headers
// passed on, and a read timeout fit for a tunnel, which nginx's timeouts cannot take from a
// variable. The connection to HAProxy it upgrades is closed with the socket: nginx returns to
// its keepalive cache only connections whose response ended, never an upgraded one.
function websocketLocation (t) {
  return [
    '        # WebSockets: nginx passes the handshake on with its Upgrade and `Connection: upgrade`,',
    '        # which send it to HAProxy\'s streams backend (not a worker\'s render slot), and once the',
    '        # 101 comes back relays bytes both ways until either side closes. This connection to',
    '        # HAProxy is then the socket\'s alone: nginx closes it with the socket and never reuses',
    '        # it (the keepalive above is for the requests of location /).',
    '        location @websocket {',
    '            proxy_pass http://pool_haproxy;',
    '            proxy_http_version 1.1;',
    '            proxy_set_header Upgrade $http_upgrade;',
    '            proxy_set_header Connection upgrade;',
    ...FORWARDED_HEADERS,
    '            proxy_next_upstream off;',
    '            proxy_connect_timeout 2s;',
    `            # A tunnel silent for this long is closed: HAProxy's --tunnel-timeout (${longDuration(t.tunnel)}) ` +
      'closes it first;',
    '            # this is 10 s above it. It also bounds the wait for the 101, which HAProxy answers',
    '            # within its queue and server timeouts.',
    `            proxy_read_timeout ${longDuration(t.nginxTunnel)};`,
    `            proxy_send_timeout ${longDuration(t.nginxTunnel)};`,
    '        }'
  ]
}

// How to start and stop nginx on this file, and what its workers must be able to reach when it
// starts as root and they run as another user.
function header (o) {
  const p = (...parts) => path.join(o.prefix, ...parts)
  const workerUser = o.user ? `${o.user}${o.group ? `:${o.group}` : ''}` : 'nobody (--user to choose)'
  return [
    '# nginx.conf in front of the HAProxy of `pool config haproxy`.',
    `# Generated by \`${generatedBy(o)}\`.`,
    `# Every path is under ${o.prefix} (this file is ${p('nginx.conf')}). Start it, as root`,
    '# or as any user, and stop it with',
    `#   mkdir -p ${p('logs')} && nginx -p ${o.prefix}/ -c ${p('nginx.conf')} -e ${p('logs', 'error.log')}`,
    `#   kill -QUIT $(cat ${p('nginx.pid')})`,
    `# Started as root, its workers run as ${workerUser}: they must be able to reach`,
    o.upstream === undefined
      ? `# ${o.haproxySocket} (\`pool config haproxy\` makes it mode 666 unless --http-socket-user)`
      : `# HAProxy at ${o.upstream}`,
    '# and the temp directories here, so this prefix and its parents must be searchable by them.'
  ]
}

// The `pool config nginx` command line that prints this config: every setting that is not its
// default.
function generatedBy (o) {
  const words = ['pool config nginx']
  for (const [name, spec] of Object.entries(OPTIONS)) {
    if (o[name] === undefined) continue
    const byDefault = name === 'prefix' || name === 'haproxySocket' ? path.resolve(spec.default) : spec.default
    if (o[name] === byDefault) continue
    words.push(`--${spec.flag} ${spec.kind === 'duration' ? duration(o[name]) : o[name]}`)
  }
  return words.join(' ')
}

module.exports = { nginxConfig, resolveNginxOptions, OPTIONS }
