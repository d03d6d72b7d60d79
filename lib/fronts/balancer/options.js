'use strict'

// The embedded balancer's options, in the table format of lib/options/table.js so that the CLI can
// build its flags from it and the Pool can validate it. Durations are milliseconds, sizes bytes.

const { resolveOptions } = require('../../options/table')
const { trustedPeers } = require('./trust')
const { classifier, CLASSES } = require('./priority')
const { poolError, codes } = require('../../errors')
const { defaultBodyBudget } = require('./body-budget')
const { defaultResponseBudget } = require('./response-budget')

const MB = 1024 * 1024

// Requests the queue holds by default: with --queue-timeout (20 s) and renders of tens of
// milliseconds, a pool rarely serves more within a queued request's deadline, and each queued
// request holds a connection (its body is bounded by --body-budget).
const DEFAULT_MAX_QUEUE = 1024

const OPTIONS = {
  port: { flag: 'port', kind: 'port', default: 9001, group: 'Balancer', describe: 'Port the embedded balancer listens on' },
  host: { flag: 'host', kind: 'string', default: '127.0.0.1', group: 'Balancer', describe: 'Address the embedded balancer listens on' },
  maxconn: { flag: 'maxconn', kind: 'count', default: 1, group: 'Balancer', describe: 'Requests one worker is given at a time; the rest wait in one FIFO queue' },
  balance: { flag: 'balance', kind: 'choice', choices: ['first', 'rr'], default: 'first', group: 'Balancer', describe: 'first: lowest free slot (keeps a few workers hot); rr: rotate among free workers' },
  retries: { flag: 'retries', kind: 'int', default: 3, group: 'Balancer', describe: 'Times a request whose connection to a worker was refused is sent to another worker (any method: the worker saw nothing)' },
  queueTimeout: { flag: 'queue-timeout', kind: 'duration', default: 20000, group: 'Balancer', describe: 'A request queued longer gets 503 with Retry-After (0: wait forever)' },
  maxQueue: { flag: 'max-queue', kind: 'int', default: DEFAULT_MAX_QUEUE, group: 'Balancer', describe: 'Queued requests beyond this get 503 with Retry-After at once (a request with a body: before its body is read); a request of a higher class takes the place of the lowest-class one that would be served last' },
  overloadControl: { flag: 'overload-control', kind: 'bool', default: true, group: 'Balancer', describe: 'When the queue stands (see --overload-interval), serve the newest request first and answer those queued longer than --overload-max-wait 503 at once, rather than serving them after their clients gave up (off: --no-overload-control)' },
  overloadInterval: { flag: 'overload-interval', kind: 'duration', default: undefined, defaultText: '400ms, or 100 paces if longer', group: 'Balancer', describe: 'The queue stands once it has gone this long without emptying and without serving any request that waited at most --overload-target. A pace: the typical render divided by the workers, measured' },
  overloadTarget: { flag: 'overload-target', kind: 'duration', default: undefined, defaultText: '100ms, or 50 paces if longer', group: 'Balancer', describe: 'A queue that serves requests within this wait is keeping up, however long it is' },
  overloadMaxWait: { flag: 'overload-max-wait', kind: 'duration', default: undefined, defaultText: '200ms, or 100 paces if longer', group: 'Balancer', describe: 'While the queue stands, a request queued longer than this gets 503 with Retry-After at once, unless one round of the workers serves it next' },
  priorityHeader: { flag: 'priority-header', kind: 'string', default: undefined, group: 'Balancer', describe: `Request header whose value (${CLASSES.join(', ')}) sets the request's class, believed only from --trust-proxy peers; a higher class is always served first` },
  priorityRoutes: { flag: 'priority-routes', kind: 'string', default: undefined, group: 'Balancer', describe: 'Classes by path prefix, longest first: PREFIX=CLASS,... (e.g. /health=high,/static/=high,/export/=low); the header wins over a route' },
  maxBody: { flag: 'max-body', kind: 'int', default: 10 * MB, group: 'Balancer', describe: 'Largest request body in bytes, read whole before a worker is taken (413 above it)' },
  bodyBudget: { flag: 'body-budget', kind: 'int', default: undefined, defaultText: '1/16 of RAM (or of the cgroup limit), at most 256 MiB, at least --max-body', group: 'Balancer', describe: 'Request-body bytes held at once over all requests (being read, queued, on a worker), counted as they arrive; a body that would pass it gets 503 with Retry-After, before a byte of it is read when its announced length has no room (0: no limit)' },
  maxResponseBuffer: { flag: 'max-response-buffer', kind: 'int', default: 8 * MB, group: 'Balancer', describe: 'Response bytes held for one client that reads slower than its worker writes: each part of a response goes to the client as it comes, and the balancer reads on ahead of the client up to this many bytes, so that the worker is free once it has answered; past it, the worker waits for the client (0: no read-ahead). Also the most an X-Accel-Buffering: yes response is held whole before it is sent' },
  responseBudget: { flag: 'response-budget', kind: 'int', default: undefined, defaultText: '1/16 of RAM (or of the cgroup limit), at most 256 MiB, at least --max-response-buffer', group: 'Balancer', describe: 'Response bytes held at once over all clients (read from workers, not yet taken by the clients); past it the balancer stops reading workers until clients take some (0: no limit)' },
  pingPath: { flag: 'ping-path', kind: 'string', default: '/ping', group: 'Balancer', describe: 'Path answered by the balancer itself (200, or 503 while stopping), never by a worker' },
  stopAnnounce: { flag: 'stop-announce', kind: 'duration', default: 2000, group: 'Balancer', describe: 'On stop, the listener stays open this long (less once no worker can take a request), answering /ping 503 and serving what arrives, so that a health check in front sees the stop' },
  headersTimeout: { flag: 'headers-timeout', kind: 'duration', default: 10000, group: 'Balancer', describe: 'A client must send its request headers within this (slowloris)' },
  requestTimeout: { flag: 'request-timeout', kind: 'duration', default: 60000, group: 'Balancer', describe: 'A client must send its whole request, body included, within this (at the defaults a 10 MB body needs 175 KB/s)' },
  sendTimeout: { flag: 'send-timeout', kind: 'duration', default: 60000, group: 'Balancer', describe: 'A client that takes none of the response bytes waiting for it for this long is cut off, freeing what it held (nginx\'s send_timeout: the clock runs only while bytes wait; 0: never)' },
  keepAliveTimeout: { flag: 'keep-alive-timeout', kind: 'duration', default: 5000, group: 'Balancer', describe: 'An idle client connection is closed after this' },
  proxyTimeout: { flag: 'proxy-timeout', kind: 'duration', default: 0, group: 'Balancer', describe: 'A worker silent this long after being given a request yields 504 (0: off, the pool\'s --timeout kills it)' },
  trustProxy: { flag: 'trust-proxy', kind: 'string', default: '127.0.0.1,::1', group: 'Balancer', describe: 'Peers (addresses, CIDR ranges, or none) whose X-Forwarded-For/-Proto and Forwarded headers are passed on; from others they are replaced by what the balancer sees' },
  accessLog: { flag: 'access-log', kind: 'bool', default: true, group: 'Balancer', describe: 'Log one line per request (id, status, worker, queue and total time)' }
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

function bad (message) { return poolError(codes.BAD_OPTION, message) }

// Defaults, the table's checks, then what the table cannot say: relations between options.
function resolveBalancerOptions (input = {}) {
  const o = resolveOptions(input, OPTIONS)
  if (!o.pingPath.startsWith('/')) throw bad(`pingPath (--ping-path) must start with / (got ${JSON.stringify(o.pingPath)})`)
  try {
    o.isTrustedPeer = trustedPeers(o.trustProxy)
  } catch (err) {
    throw bad(`trustProxy (--trust-proxy): ${err.message} (got ${JSON.stringify(o.trustProxy)})`)
  }
  if (o.priorityHeader !== undefined && !HEADER_NAME.test(o.priorityHeader)) throw bad(`priorityHeader (--priority-header) must be a header name (got ${JSON.stringify(o.priorityHeader)})`)
  try {
    o.priorityOf = classifier({ header: o.priorityHeader, routes: o.priorityRoutes, isTrustedPeer: o.isTrustedPeer })
  } catch (err) {
    throw bad(`priorityRoutes (--priority-routes): ${err.message} (got ${JSON.stringify(o.priorityRoutes)})`)
  }
  // An overload duration left unset scales with the pool's pace (lib/fronts/balancer/overload.js).
  if (o.overloadInterval <= 0) throw bad(`overloadInterval (--overload-interval) must be more than 0 (got ${o.overloadInterval})`)
  if (o.overloadMaxWait <= 0) throw bad(`overloadMaxWait (--overload-max-wait) must be more than 0 (got ${o.overloadMaxWait})`)
  o.overload = o.overloadControl ? { interval: o.overloadInterval, target: o.overloadTarget, maxWait: o.overloadMaxWait } : null
  if (o.bodyBudget === undefined) o.bodyBudget = defaultBodyBudget(o.maxBody)
  else if (o.bodyBudget > 0 && o.bodyBudget < o.maxBody) throw bad(`bodyBudget (--body-budget) must be at least maxBody (--max-body), or 0 for no limit (${o.bodyBudget} < ${o.maxBody})`)
  if (o.responseBudget === undefined) o.responseBudget = defaultResponseBudget(o.maxResponseBuffer)
  if (o.requestTimeout > 0 && o.headersTimeout > o.requestTimeout) throw bad(`headersTimeout (--headers-timeout) must not exceed requestTimeout (--request-timeout) (${o.headersTimeout} > ${o.requestTimeout})`)
  return o
}

module.exports = { OPTIONS, resolveBalancerOptions, DEFAULT_MAX_QUEUE }
