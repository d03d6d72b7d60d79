'use strict'

// The embedded balancer's options, in the table format of lib/options.js so that the CLI can
// build its flags from it and the Pool can validate it. Durations are milliseconds, sizes bytes.

const { resolveOptions } = require('../options')
const { trustedPeers } = require('./trust')
const { poolError, codes } = require('../errors')

const MB = 1024 * 1024

const OPTIONS = {
  port: { flag: 'port', kind: 'port', default: 9001, group: 'Balancer', describe: 'Port the embedded balancer listens on' },
  host: { flag: 'host', kind: 'string', default: '127.0.0.1', group: 'Balancer', describe: 'Address the embedded balancer listens on' },
  maxconn: { flag: 'maxconn', kind: 'count', default: 1, group: 'Balancer', describe: 'Requests one worker is given at a time; the rest wait in one FIFO queue' },
  balance: { flag: 'balance', kind: 'choice', choices: ['first', 'rr'], default: 'first', group: 'Balancer', describe: 'first: lowest free slot (keeps a few workers hot); rr: rotate among free workers' },
  retries: { flag: 'retries', kind: 'int', default: 3, group: 'Balancer', describe: 'Times a request whose connection to a worker was refused is sent to another worker (any method: the worker saw nothing)' },
  queueTimeout: { flag: 'queue-timeout', kind: 'duration', default: 20000, group: 'Balancer', describe: 'A request queued longer gets 503 with Retry-After (0: wait forever)' },
  maxQueue: { flag: 'max-queue', kind: 'int', default: undefined, group: 'Balancer', describe: 'Queued requests beyond this get 503 at once (default: unlimited)' },
  maxBody: { flag: 'max-body', kind: 'int', default: 10 * MB, group: 'Balancer', describe: 'Largest request body in bytes, read whole before a worker is taken (413 above it)' },
  maxResponseBuffer: { flag: 'max-response-buffer', kind: 'int', default: 8 * MB, group: 'Balancer', describe: 'A response up to this many bytes is read whole before it is sent, freeing the worker at once; larger ones stream' },
  pingPath: { flag: 'ping-path', kind: 'string', default: '/ping', group: 'Balancer', describe: 'Path answered by the balancer itself (200, or 503 while stopping), never by a worker' },
  headersTimeout: { flag: 'headers-timeout', kind: 'duration', default: 10000, group: 'Balancer', describe: 'A client must send its request headers within this (slowloris)' },
  requestTimeout: { flag: 'request-timeout', kind: 'duration', default: 60000, group: 'Balancer', describe: 'A client must send its whole request, body included, within this (at the defaults a 10 MB body needs 175 KB/s)' },
  sendTimeout: { flag: 'send-timeout', kind: 'duration', default: 60000, group: 'Balancer', describe: 'A client that takes no byte of its response for this long is cut off, freeing what it held (nginx\'s send_timeout; 0: never)' },
  keepAliveTimeout: { flag: 'keep-alive-timeout', kind: 'duration', default: 5000, group: 'Balancer', describe: 'An idle client connection is closed after this' },
  proxyTimeout: { flag: 'proxy-timeout', kind: 'duration', default: 0, group: 'Balancer', describe: 'A worker silent this long after being given a request yields 504 (0: off, the pool\'s --timeout kills it)' },
  trustProxy: { flag: 'trust-proxy', kind: 'string', default: '127.0.0.1,::1', group: 'Balancer', describe: 'Peers (addresses, CIDR ranges, or none) whose X-Forwarded-For/-Proto and Forwarded headers are passed on; from others they are replaced by what the balancer sees' },
  accessLog: { flag: 'access-log', kind: 'bool', default: true, group: 'Balancer', describe: 'Log one line per request (id, status, worker, queue and total time)' }
}

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
  if (o.requestTimeout > 0 && o.headersTimeout > o.requestTimeout) throw bad(`headersTimeout (--headers-timeout) must not exceed requestTimeout (--request-timeout) (${o.headersTimeout} > ${o.requestTimeout})`)
  return o
}

module.exports = { OPTIONS, resolveBalancerOptions }
