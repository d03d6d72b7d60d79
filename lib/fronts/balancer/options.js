'use strict'

// The embedded balancer's options, in the option table's format so that the CLI can
// build its flags from it and the Pool can validate it. Durations are milliseconds, sizes bytes.

const { resolveOptions, OPTIONS: POOL_OPTIONS } = require('../../options/table')
const { trustedPeers } = require('./trust')
const { classifier, CLASSES } = require('./priority')
const { poolError, codes } = require('../../errors')
const { defaultBodyBudget } = require('./body-budget')
const { defaultResponseBudget } = require('./response-budget')
const { availableMemory } = require('./budget')
const { descriptorLimit } = require('../../net/descriptors')
const { streamRoutes } = require('../../protocol/long-lived')

const MB = 1024 * 1024

// What an open request costs the balancer, measured (bench/streams.js: two sockets, the parser,
// the attempt and its relay): the default --max-open spends a sixteenth of the memory on them.
const OPEN_REQUEST_COST = 16 * 1024
const DEFAULT_WORKER_MAX_OPEN = 8192

// Requests the queue holds by default: with --queue-timeout (20 s) and renders of tens of
// milliseconds, a pool rarely serves more within a queued request's deadline, and each queued
// request holds a connection (its body is bounded by --body-budget).
const DEFAULT_MAX_QUEUE = 1024

const OPTIONS = {
  port: {
    flag: 'port',
    kind: 'port',
    default: 9001,
    group: 'Balancer',
    describe: 'Port the embedded balancer listens on'
  },
  host: {
    flag: 'host',
    kind: 'string',
    default: '127.0.0.1',
    group: 'Balancer',
    describe: 'Address the embedded balancer listens on'
  },
  maxconn: {
    flag: 'maxconn',
    kind: 'count',
    default: 1,
    group: 'Balancer',
    describe: 'With --worker-concurrency 1: requests one worker renders at a time (a request renders until its ' +
      'response head arrives); the rest wait in one FIFO queue'
  },
  maxOpen: {
    flag: 'max-open',
    kind: 'count',
    default: undefined,
    defaultText: `(RAM or the cgroup limit) ÷ 16 ÷ ${OPEN_REQUEST_COST / 1024} KiB, and at most half the descriptors ` +
      'the process may open',
    group: 'Balancer',
    describe: 'Requests open on all workers at once, rendering or streaming: each holds two connections in the ' +
      'balancer; past it requests wait in the queue'
  },
  workerMaxOpen: {
    flag: 'worker-max-open',
    kind: 'count',
    default: DEFAULT_WORKER_MAX_OPEN,
    group: 'Balancer',
    describe: 'Requests open on one worker at once, rendering or streaming (each costs the app its own memory: tens ' +
      'of KB in plain Node); past it the worker is given none'
  },
  balance: {
    flag: 'balance',
    kind: 'choice',
    choices: ['first', 'rr'],
    default: 'first',
    group: 'Balancer',
    describe: 'Among the workers that may take a request (with K above 1, those holding nothing first): first: ' +
      'the lowest slot (keeps a few workers hot); rr: rotate among them'
  },
  retries: {
    flag: 'retries',
    kind: 'int',
    default: 3,
    group: 'Balancer',
    describe: 'Times a request whose connection to a worker was refused is sent to another worker (any method: the ' +
      'worker saw nothing)'
  },
  queueTimeout: {
    flag: 'queue-timeout',
    kind: 'duration',
    default: 20000,
    group: 'Balancer',
    describe: 'A request queued longer gets 503 with Retry-After (0: wait forever)'
  },
  maxQueue: {
    flag: 'max-queue',
    kind: 'int',
    default: DEFAULT_MAX_QUEUE,
    group: 'Balancer',
    describe: 'Queued requests beyond this get 503 with Retry-After at once (a request with a body: before its body ' +
      'is read); a request of a higher class takes the place of the lowest-class one that would be served last'
  },
  overloadControl: {
    flag: 'overload-control',
    kind: 'bool',
    default: true,
    group: 'Balancer',
    describe: 'Protection against overload, never worse than a FIFO queue where a FIFO answers every request within ' +
      '--overload-max-wait: the queue stays first come first served until more arrives than the workers take and a ' +
      'FIFO could no longer answer in time; then later arrivals are served newest first, and a request that can no ' +
      'longer be answered in time gets 503 with Retry-After at once (off: --no-overload-control, a plain FIFO)'
  },
  overloadMaxWait: {
    flag: 'overload-max-wait',
    kind: 'duration',
    default: undefined,
    defaultText: '1s, or 100 paces if longer, at most --queue-timeout',
    group: 'Balancer',
    describe: 'How long clients wait: overload control acts only once a FIFO would answer a request later than this; ' +
      'then a request that has waited so long that a typical render would end past it is turned away. A pace: the ' +
      'measured time between two requests leaving a busy queue'
  },
  overloadInterval: {
    flag: 'overload-interval',
    kind: 'duration',
    default: undefined,
    defaultText: '--overload-max-wait',
    group: 'Balancer',
    describe: 'The window over which arrivals are compared with the requests the workers take: the queue stands only ' +
      'if more arrived than were taken in each quarter of it, and no longer once as many were taken as arrived over ' +
      'its last half'
  },
  priorityHeader: {
    flag: 'priority-header',
    kind: 'string',
    default: undefined,
    group: 'Balancer',
    describe: `Request header whose value (${CLASSES.join(', ')}) sets the request's class, believed only from ` +
      '--trust-proxy peers; a higher class is always served first'
  },
  priorityRoutes: {
    flag: 'priority-routes',
    kind: 'string',
    default: undefined,
    group: 'Balancer',
    describe: 'Classes by path prefix, longest first: PREFIX=CLASS,... (e.g. ' +
      '/health=high,/static/=high,/export/=low); the header wins over a route'
  },
  streamRoutes: {
    flag: 'stream-routes',
    kind: 'string',
    default: undefined,
    group: 'Balancer',
    describe: 'Path prefixes of long-lived requests (PREFIX,...: an AI chat route, long polls): they hold no render ' +
      'place and start at once beside renders, up to --worker-max-open per worker; a request that accepts ' +
      'text/event-stream is long-lived anyway'
  },
  maxBody: {
    flag: 'max-body',
    kind: 'size',
    default: 10 * MB,
    group: 'Balancer',
    describe: 'Largest request body, read whole before a worker is taken (413 above it)'
  },
  bodyBudget: {
    flag: 'body-budget',
    kind: 'size',
    default: undefined,
    defaultText: '1/16 of RAM (or of the cgroup limit), at most 256 MiB, at least --max-body',
    group: 'Balancer',
    describe: 'Request-body bytes held at once over all requests (being read, queued, on a worker), counted as they ' +
      'arrive; a body that would pass it gets 503 with Retry-After, before a byte of it is read when its announced ' +
      'length has no room (0: no limit)'
  },
  maxResponseBuffer: {
    flag: 'max-response-buffer',
    kind: 'size',
    default: 8 * MB,
    group: 'Balancer',
    describe: 'Response bytes held for one client that reads slower than its worker writes: each part of a response ' +
      'goes to the client as it comes, and the balancer reads on ahead of the client up to this size, so that the ' +
      'worker is free once it has answered; past it, the worker waits for the client (0: no read-ahead). Also the ' +
      'most an X-Accel-Buffering: yes response is held whole before it is sent'
  },
  responseBudget: {
    flag: 'response-budget',
    kind: 'size',
    default: undefined,
    defaultText: '1/16 of RAM (or of the cgroup limit), at most 256 MiB, at least --max-response-buffer',
    group: 'Balancer',
    describe: 'Response bytes held at once over all clients (read from workers, not yet taken by the clients); past ' +
      'it the balancer stops reading workers until clients take some (0: no limit)'
  },
  tunnelTimeout: {
    flag: 'tunnel-timeout',
    kind: 'duration',
    default: 3600000,
    group: 'Balancer',
    describe: 'A WebSocket that carries no byte either way for this long is closed, as HAProxy\'s timeout tunnel ' +
      'does (0: never); apps that ping (Socket.IO every 25 s) never reach it'
  },
  pingPath: {
    flag: 'ping-path',
    kind: 'string',
    default: '/ping',
    group: 'Balancer',
    describe: 'Path answered by the balancer itself (200, or 503 while stopping), never by a worker'
  },
  stopAnnounce: {
    flag: 'stop-announce',
    kind: 'duration',
    default: 2000,
    group: 'Balancer',
    describe: 'On stop, when a health check (/ping) or an edge (the agent) watches the pool: how long its workers go ' +
      'on serving as before while /ping answers 503 and the agent says drain, before the listener closes (unwatched, ' +
      'it closes at once)'
  },
  headersTimeout: {
    flag: 'headers-timeout',
    kind: 'duration',
    default: 10000,
    group: 'Balancer',
    describe: 'A client must send its request headers within this (slowloris)'
  },
  requestTimeout: {
    flag: 'request-timeout',
    kind: 'duration',
    default: 60000,
    group: 'Balancer',
    describe: 'A client must send its whole request, body included, within this (at the defaults a 10 MB body needs ' +
      '175 KB/s)'
  },
  sendTimeout: {
    flag: 'send-timeout',
    kind: 'duration',
    default: 60000,
    group: 'Balancer',
    describe: 'A client that takes none of the response bytes waiting for it for this long is cut off, freeing what ' +
      'it held (nginx\'s send_timeout: the clock runs only while bytes wait; 0: never)'
  },
  keepAliveTimeout: {
    flag: 'keep-alive-timeout',
    kind: 'duration',
    default: 5000,
    group: 'Balancer',
    describe: 'An idle client connection is closed after this'
  },
  trustProxy: {
    flag: 'trust-proxy',
    kind: 'string',
    default: '127.0.0.1,::1',
    group: 'Balancer',
    describe: 'Peers (addresses, CIDR ranges, or none) whose X-Forwarded-For/-Proto and Forwarded headers are passed ' +
      'on; from others they are replaced by what the balancer sees'
  },
  accessLog: {
    flag: 'access-log',
    kind: 'bool',
    default: true,
    group: 'Balancer',
    describe: 'Log one line per request (id, status, worker, queue and total time)'
  }
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

function bad (message) { return poolError(codes.BAD_OPTION, message) }

// The limits on each request the balancer enforces as it relays it: the pool's --read-timeout and
// --max-request-time (the pool's option table; when the balancer is used alone, its defaults).
const LIMITS = ['readTimeout', 'maxRequestTime']

// Defaults, the table's checks, then what the table cannot say: relations between options.
// `pool`: the pool's options, resolved, for the limits (LIMITS).
function resolveBalancerOptions (input = {}, pool = resolveOptions(pick(input, LIMITS), pick(POOL_OPTIONS, LIMITS))) {
  const o = resolveOptions(omit(input, LIMITS), OPTIONS)
  for (const key of LIMITS) o[key] = pool[key]
  if (!o.pingPath.startsWith('/')) {
    throw bad(`pingPath (--ping-path) must start with / (got ${JSON.stringify(o.pingPath)})`)
  }
  try {
    o.isTrustedPeer = trustedPeers(o.trustProxy)
  } catch (err) {
    throw bad(`trustProxy (--trust-proxy): ${err.message} (got ${JSON.stringify(o.trustProxy)})`)
  }
  if (o.priorityHeader !== undefined && !HEADER_NAME.test(o.priorityHeader)) {
    throw bad(`priorityHeader (--priority-header) must be a header name (got ${JSON.stringify(o.priorityHeader)})`)
  }
  try {
    o.priorityOf = classifier({ header: o.priorityHeader, routes: o.priorityRoutes, isTrustedPeer: o.isTrustedPeer })
  } catch (err) {
    throw bad(`priorityRoutes (--priority-routes): ${err.message} (got ${JSON.stringify(o.priorityRoutes)})`)
  }
  try {
    o.longLivedRoutes = streamRoutes(o.streamRoutes)
  } catch (err) {
    throw bad(`streamRoutes (--stream-routes): ${err.message} (got ${JSON.stringify(o.streamRoutes)})`)
  }
  // An overload duration left unset scales with the pool's pace (overload control).
  if (o.overloadInterval <= 0) {
    throw bad(`overloadInterval (--overload-interval) must be more than 0 (got ${o.overloadInterval})`)
  }
  if (o.overloadMaxWait <= 0) {
    throw bad(`overloadMaxWait (--overload-max-wait) must be more than 0 (got ${o.overloadMaxWait})`)
  }
  o.overload = o.overloadControl ? { interval: o.overloadInterval, maxWait: o.overloadMaxWait } : null
  if (o.bodyBudget === undefined) o.bodyBudget = defaultBodyBudget(o.maxBody)
  else if (o.bodyBudget > 0 &&
    o.bodyBudget < o.maxBody) {
    throw bad('bodyBudget (--body-budget) must be at least maxBody (--max-body), or 0 for ' +
      `no limit (${o.bodyBudget} < ${o.maxBody})`)
  }
  if (o.responseBudget === undefined) o.responseBudget = defaultResponseBudget(o.maxResponseBuffer)
  if (o.maxOpen === undefined) o.maxOpen = defaultMaxOpen()
  if (o.requestTimeout > 0 && o.headersTimeout > o.requestTimeout) {
    throw bad('headersTimeout (--headers-timeout) must not exceed requestTimeout (--request-timeout) ' +
      `(${o.headersTimeout} > ${o.requestTimeout})`)
  }
  return o
}

// A sixteenth of the memory, and half the descriptors (a client's connection and the worker's),
// less what the pool keeps for itself.
function defaultMaxOpen (memory = availableMemory(), descriptors = descriptorLimit()) {
  const byMemory = Math.floor(memory / 16 / OPEN_REQUEST_COST)
  const byDescriptors = Number.isFinite(descriptors) ? Math.floor((descriptors - 256) / 2) : Infinity
  return Math.max(1, Math.min(byMemory, byDescriptors))
}

function pick (o, keys) { return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) }
function omit (o, keys) { return Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k))) }

module.exports = { OPTIONS, resolveBalancerOptions, defaultMaxOpen, DEFAULT_MAX_QUEUE, OPEN_REQUEST_COST }
