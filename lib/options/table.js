'use strict'

// One table for every `pool start` option: the library's name (camelCase), the CLI flag, its
// kind, its default and a one-line description. The CLI builds its yargs options from it, the
// Pool validates against it, and docs/reference/options.md's table mirrors it (a test checks that).
//
// Durations are milliseconds in the library. On the command line a bare number means seconds
// (`--timeout 30`), and a unit may be given (`500ms`, `2s`, `1m`). Sizes are bytes in the
// library; on the command line, in the environment and in a config file a bare number is bytes,
// and a unit may be given as nginx writes sizes (`512k`, `8m`, `1g`; `1mb`, `1MiB` alike: 1024-based).

const os = require('node:os')
const { poolError, codes } = require('../errors')
const { cgroupCpuQuota } = require('./cgroup')

// The CPUs this process may use: those it may run on, or fewer when its cgroup's CPU quota (a
// container's --cpus, a unit's CPUQuota=) allows less. Read once.
let usableCpus = null
function cpuCount () {
  if (usableCpus !== null) return usableCpus
  const online = os.availableParallelism ? os.availableParallelism() : os.cpus().length
  const quota = cgroupCpuQuota()
  usableCpus = quota !== null && quota < online ? quota : online
  return usableCpus
}

function defaultWorkers (env = process.env) {
  const fromEnv = Number(env.WEB_CONCURRENCY)
  if (Number.isInteger(fromEnv) && fromEnv > 0) return fromEnv
  return cpuCount()
}

// The default ceiling on the number of workers (-n, `pool scale`): min(CEILING_PER_CPU × CPUs,
// free memory ÷ MEMORY_PER_WORKER), at least 1. Each worker renders one request at a time, so
// past a few per core they only wait for the CPU (an app waiting on I/O is why it is 8, not 1),
// and a Node worker with an app loaded holds some 50 to 150 MB. Free memory is what the kernel
// says is available (MemAvailable), or the cgroup's memory limit when that is lower, read once
// when the pool is made.
const CEILING_PER_CPU = 8
const MEMORY_PER_WORKER = 128 * 1024 * 1024

function freeMemory () {
  const free = os.freemem()
  const limit = typeof process.constrainedMemory === 'function' ? process.constrainedMemory() : 0
  return limit > 0 && limit < free ? limit : free
}

// { max, why }: the most workers the pool may have, and how that was decided, for the message
// that refuses more. --max-workers 0: no ceiling.
function workerCeiling ({ maxWorkers }, { cpus = cpuCount(), memory = freeMemory() } = {}) {
  if (maxWorkers === 0) return { max: Infinity, why: 'no ceiling' }
  if (maxWorkers !== undefined) return { max: maxWorkers, why: `--max-workers ${maxWorkers}` }
  const byCpu = CEILING_PER_CPU * cpus
  const byMemory = Math.floor(memory / MEMORY_PER_WORKER)
  const max = Math.max(1, Math.min(byCpu, byMemory))
  return {
    max,
    why: `the default ceiling of ${max} (min(${CEILING_PER_CPU} × ${cpus} CPUs, ${Math.round(memory / 1048576)} MB ` +
      `free ÷ ${MEMORY_PER_WORKER / 1048576} MB))`
  }
}

// --worker-concurrency's default: K above 1 only where it helps. The embedded balancer sees each
// worker's loop, so a worker rendering on the CPU is never given a second request (CPU-bound
// pages keep one request per worker) while pages awaiting data share a worker. Elsewhere it brings
// nothing: HAProxy (--balancer haproxy) and a balancer of the user's (none, a library's own
// fronts) cannot see the loop, so K would only loosen the worker's guard; and a fleet's edge
// (--agent-port) sends a host one request per ready worker, each of which its balancer starts on
// an idle worker. `o`: the options as given (`balancer` and `agentPort` among them).
const EMBEDDED_CONCURRENCY = 16
function defaultConcurrency (o) {
  return o.balancer === 'embedded' && !o.agentPort ? EMBEDDED_CONCURRENCY : 1
}

// kind: 'count' (integer >= 1), 'int' (integer >= `min`, by default 0), 'port' (1..65535),
// 'port-or-off' (0..65535, 0 meaning off), 'list' (strings; a repeatable flag), 'duration'
// (ms >= 0), 'size' (bytes, an integer >= 0), 'number' (>= 0), 'string', 'choice' (one of
// `choices`), 'bool'.
const OPTIONS = {
  workers: {
    flag: 'workers',
    alias: 'n',
    kind: 'count',
    default: () => defaultWorkers(),
    group: 'Workers',
    describe: 'Number of worker processes (default: $WEB_CONCURRENCY, else the number of CPUs, or the cgroup\'s CPU ' +
      'quota when lower)'
  },
  workerHost: {
    flag: 'worker-host',
    kind: 'string',
    default: '127.0.0.1',
    group: 'Workers',
    describe: 'Address the workers listen on'
  },
  workerPort: {
    flag: 'worker-port',
    kind: 'port',
    default: 9002,
    group: 'Workers',
    describe: 'Port of slot 1; slot i listens on worker-port + i - 1. Ports in the kernel\'s ephemeral range ' +
      '(net.ipv4.ip_local_port_range) are refused, unless reserved: an outgoing connection could take one while its ' +
      'worker restarts'
  },
  maxWorkers: {
    flag: 'max-workers',
    kind: 'int',
    default: undefined,
    defaultText: `min(${CEILING_PER_CPU} × CPUs (or the cgroup's CPU quota when lower), free memory ` +
      `÷ ${MEMORY_PER_WORKER / 1048576} MB)`,
    group: 'Workers',
    describe: 'Ceiling of -n and `pool scale` (0: none; in HAProxy mode the backend\'s servers bound it too)'
  },
  maxBooting: {
    flag: 'max-booting',
    kind: 'count',
    default: () => 2 * cpuCount(),
    defaultText: '2 × CPUs',
    group: 'Workers',
    describe: 'Workers booting at once at most; a big scale or many crashes start a batch at a time'
  },
  workerConcurrency: {
    flag: 'worker-concurrency',
    kind: 'count',
    default: defaultConcurrency,
    defaultText: `${EMBEDDED_CONCURRENCY} behind the embedded balancer; 1 with --agent-port, --balancer haproxy or ` +
      'none',
    group: 'Workers',
    describe: 'Requests one worker may hold at once (K). 1: one request per worker. Above 1 (embedded balancer): a ' +
      'worker holding requests is given another only while every request it holds awaits I/O (its event loop idle), ' +
      'never while one renders, never past K; an idle worker is preferred. The worker\'s own guard runs at most K at ' +
      'once'
  },
  timeout: {
    flag: 'timeout',
    kind: 'duration',
    default: 30000,
    group: 'Workers',
    describe: 'A worker holding requests whose event loop has not come round for this long is hung: SIGKILLed and ' +
      'replaced, with the requests it held (a render stuck on the CPU; however long a request that awaits I/O lasts, ' +
      'it kills nothing). Seen within this plus a check-in interval (a quarter of it, at most 500 ms)'
  },
  readTimeout: {
    flag: 'read-timeout',
    kind: 'duration',
    default: 60000,
    group: 'Requests',
    describe: 'A response the app leaves this long without a byte (before its head, or between two parts) ends that ' +
      'request alone: 504 when nothing was sent, cut otherwise; the app sees its response close (nginx\'s ' +
      'proxy_read_timeout; the time a client takes to read is --send-timeout\'s). Enforced by the embedded balancer, ' +
      'else by the worker (0: none)'
  },
  maxRequestTime: {
    flag: 'max-request-time',
    kind: 'duration',
    default: 0,
    group: 'Requests',
    describe: 'A request may last this long at most, whatever it sends, then it ends as for --read-timeout (0: no ' +
      'limit, the default: a stream may last as long as it sends)'
  },
  bootTimeout: {
    flag: 'boot-timeout',
    kind: 'duration',
    default: 60000,
    group: 'Workers',
    describe: 'A worker not ready within this is killed (a failed start)'
  },
  heartbeatTimeout: {
    flag: 'heartbeat-timeout',
    kind: 'duration',
    default: 30000,
    group: 'Workers',
    describe: 'An idle worker silent for this long is treated as hung and replaced (as long as --timeout, by default)'
  },
  heartbeatInterval: {
    flag: 'heartbeat-interval',
    kind: 'duration',
    default: (o) => Math.round(o.heartbeatTimeout / 3),
    defaultText: '--heartbeat-timeout ÷ 3 (10 s)',
    group: 'Workers',
    describe: 'How often an idle worker checks in with its RSS (below --heartbeat-timeout; each costs the worker a ' +
      'wake); one that holds requests checks in every check-in interval'
  },
  gracefulTimeout: {
    flag: 'graceful-timeout',
    kind: 'duration',
    default: 30000,
    group: 'Workers',
    describe: 'On stop, how long running requests may finish before SIGTERM'
  },
  killTimeout: {
    flag: 'kill-timeout',
    kind: 'duration',
    default: 5000,
    group: 'Workers',
    describe: 'After SIGTERM, how long before SIGKILL'
  },
  restartDelay: {
    flag: 'restart-delay',
    kind: 'duration',
    default: 100,
    group: 'Restarts',
    describe: 'Delay before respawning a crashed worker (first crash)'
  },
  restartFactor: {
    flag: 'restart-factor',
    kind: 'number',
    default: 1.5,
    group: 'Restarts',
    describe: 'The delay is multiplied by this for each consecutive crash'
  },
  restartMaxDelay: {
    flag: 'restart-max-delay',
    kind: 'duration',
    default: 15000,
    group: 'Restarts',
    describe: 'Upper bound of the respawn delay'
  },
  healthyAfter: {
    flag: 'healthy-after',
    kind: 'duration',
    default: 30000,
    group: 'Restarts',
    describe: 'Uptime after which a worker counts as healthy even if it served nothing: its death then costs no ' +
      'backoff and resets the slot\'s crash count (one that answered a request already counts)'
  },
  maxBootFailures: {
    flag: 'max-boot-failures',
    kind: 'count',
    default: 5,
    group: 'Restarts',
    describe: 'A slot whose worker dies before ready this many times in a row is given up (a failed fork never counts)'
  },
  givenUpRetry: {
    flag: 'given-up-retry',
    kind: 'duration',
    default: 300000,
    group: 'Restarts',
    describe: 'A given-up slot tries again from scratch this long after it gave up (0: only a reload revives it)'
  },
  warmup: {
    flag: 'warmup',
    kind: 'list',
    default: () => [],
    defaultText: 'none',
    group: 'Workers',
    describe: 'A path a new worker is sent GET requests for before it is given traffic (repeatable); 500 or more ' +
      'fails its boot'
  },
  warmupRequests: {
    flag: 'warmup-requests',
    kind: 'int',
    default: 5,
    group: 'Workers',
    describe: 'Warm-up requests per new worker, cycling through the --warmup paths, one at a time, within ' +
      '--boot-timeout'
  },
  reloadBatch: {
    flag: 'reload-batch',
    kind: 'count',
    default: 1,
    group: 'Reload and recycling',
    describe: 'Slots replaced at a time by a rolling reload or recycling; capacity never drops below workers - batch'
  },
  maxRequests: {
    flag: 'max-requests',
    kind: 'int',
    default: 0,
    group: 'Reload and recycling',
    describe: 'Recycle a worker after this many requests (0: never)'
  },
  maxRequestsJitter: {
    flag: 'max-requests-jitter',
    kind: 'int',
    default: 0,
    group: 'Reload and recycling',
    describe: 'Add 0..this many requests to each worker\'s limit, so workers do not recycle together'
  },
  maxRss: {
    flag: 'max-rss',
    kind: 'int',
    default: 0,
    group: 'Reload and recycling',
    describe: 'Recycle a worker whose RSS exceeds this many MB, as reported after a request or in a heartbeat (0: ' +
      'never)'
  },
  statsPort: {
    flag: 'stats-port',
    kind: 'port-or-off',
    default: undefined,
    defaultText: 'CLI: 9000 (--port − 1; --worker-port − 2 without the embedded balancer); library: off',
    group: 'Stats and agent',
    describe: 'Port of the pool\'s /metrics and /status, in every mode (0: off)'
  },
  statsHost: {
    flag: 'stats-host',
    kind: 'string',
    default: '127.0.0.1',
    group: 'Stats and agent',
    describe: 'Address of the stats listener'
  },
  agentPort: {
    flag: 'agent-port',
    kind: 'port-or-off',
    default: 0,
    group: 'Stats and agent',
    describe: 'Port of the HAProxy agent-check responder for a fleet\'s edge: one line per connection with this ' +
      'host\'s ready workers (0: off)'
  },
  agentHost: {
    flag: 'agent-host',
    kind: 'string',
    default: undefined,
    defaultText: 'the embedded balancer\'s --host, else --worker-host',
    group: 'Stats and agent',
    describe: 'Address of the agent-check responder'
  },
  // the control socket: made by the CLI's `pool start`, not by the Pool itself
  control: {
    flag: 'control',
    kind: 'string',
    default: undefined,
    defaultText: '$XDG_RUNTIME_DIR/pool-PORT.sock, else $TMPDIR/pool-UID/pool-PORT.sock',
    group: 'Control',
    describe: 'Control socket for `pool status|reload|scale|recycle|stop` (CLI only; PORT is --port, or ' +
      '--worker-port with --balancer none/haproxy)'
  },
  logLevel: {
    flag: 'log-level',
    kind: 'choice',
    choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    default: 'info',
    group: 'Logs',
    describe: 'Log level'
  },
  logFormat: {
    flag: 'log-format',
    kind: 'choice',
    choices: ['auto', 'json', 'pretty'],
    default: 'auto',
    group: 'Logs',
    describe: 'JSON lines, or readable lines; auto = pretty on a terminal'
  },
  logBuffer: {
    flag: 'log-buffer',
    kind: 'int',
    min: 16384,
    default: 16 * 1024 * 1024,
    defaultText: '16 MiB',
    group: 'Logs',
    describe: 'Bytes of log lines the supervisor holds for a stdout reader that does not keep up; past it lines are ' +
      'dropped and counted (pool_log_lines_dropped_total), and one line says how many once the reader takes lines again'
  }
}

const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m)?$/

// CLI durations: a bare number is seconds.
function parseDuration (value, flag) {
  if (typeof value === 'number' && value >= 0) return Math.round(value * 1000)
  const m = DURATION.exec(String(value).trim())
  if (!m) throw poolError(codes.BAD_OPTION, `--${flag} must be a duration like 30, 2.5s or 500ms (got '${value}')`)
  const n = Number(m[1])
  const unit = m[2] || 's'
  return Math.round(unit === 'ms' ? n : unit === 's' ? n * 1000 : n * 60000)
}

const SIZE = /^(\d+(?:\.\d+)?)\s*(?:([kmg])(?:i?b)?|b)?$/i
const SIZE_UNITS = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }

// Sizes in text: a bare number is bytes; k, m and g (with or without b, or as KiB, MiB, GiB)
// multiply by 1024 each, as in nginx. A number is bytes as it is.
function parseSize (value, flag) {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value
  const m = SIZE.exec(String(value).trim())
  if (!m) throw poolError(codes.BAD_OPTION, `--${flag} must be a size like 1048576, 512k, 8m or 1g (got '${value}')`)
  return Math.round(Number(m[1]) * SIZE_UNITS[(m[2] || '').toLowerCase()])
}

// A size as it is best read: in g, m or k when it is a whole number of them, else in bytes.
function formatSize (bytes) {
  for (const unit of ['g', 'm', 'k']) {
    if (bytes >= SIZE_UNITS[unit] && bytes % SIZE_UNITS[unit] === 0) return `${bytes / SIZE_UNITS[unit]}${unit}`
  }
  return String(bytes)
}

function check (name, spec, value) {
  const bad = (what) => poolError(codes.BAD_OPTION, `${name} (--${spec.flag}) ${what} (got ${JSON.stringify(value)})`)
  switch (spec.kind) {
    case 'count':
      if (!Number.isInteger(value) || value < 1) throw bad('must be a positive integer')
      break
    case 'int':
      if (!Number.isInteger(value) || value < (spec.min ?? 0)) throw bad(`must be a whole number >= ${spec.min ?? 0}`)
      break
    case 'size':
      if (!Number.isInteger(value) || value < 0) throw bad('must be a whole number of bytes >= 0')
      break
    case 'port':
      if (!Number.isInteger(value) || value < 1 || value > 65535) throw bad('must be a port number 1-65535')
      break
    case 'port-or-off':
      if (!Number.isInteger(value) || value < 0 || value > 65535) {
        throw bad('must be a port number 1-65535, or 0 for off')
      }
      break
    case 'duration':
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw bad('must be a number >= 0')
      break
    case 'choice':
      if (!spec.choices.includes(value)) throw bad(`must be one of ${spec.choices.join(', ')}`)
      break
    case 'string':
      if (typeof value !== 'string' || value === '') throw bad('must be a non-empty string')
      break
    case 'bool':
      if (typeof value !== 'boolean') throw bad('must be true or false')
      break
    case 'list':
      if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v === '')) {
        throw bad('must be a list of non-empty strings')
      }
      break
  }
}

// Fill defaults and validate. Unknown keys are kept (fronts and users may pass their own), so
// only the keys in `table` are checked. A default that is a function is given the options
// resolved so far (those above it in the table).
function resolveOptions (input = {}, table = OPTIONS) {
  const out = { ...input }
  for (const [name, spec] of Object.entries(table)) {
    if (out[name] === undefined || out[name] === null) {
      const d = typeof spec.default === 'function' ? spec.default(out) : spec.default
      if (d === undefined) continue
      out[name] = d
    }
    check(name, spec, out[name])
  }
  return out
}

const WILDCARD = new Set(['0.0.0.0', '::', '[::]'])

// The workers' ports must exist, and the pool's own listeners (stats, agent, and the embedded
// balancer's port where the caller knows it) must not sit on one of them: the worker would find
// it taken only when it boots, and the error would blame "some other process". Checked before
// anything starts, so `-n 100000` is refused at once instead of after probing every port.
// `others`: more listeners of the pool, [{ name, flag, port, host }].
function checkOwnPorts (o, others = []) {
  const slots = Math.max(o.workers, o.maxWorkers || 0)
  const last = o.workerPort + slots - 1
  if (last > 65535) {
    const by = o.maxWorkers > o.workers ? `--max-workers ${o.maxWorkers}` : `${o.workers} workers`
    throw poolError(codes.BAD_OPTION,
      `workerPort (--worker-port) ${o.workerPort} with ${by} needs ports up to ${last}, past 65535: lower ` +
        '--worker-port or the number of workers')
  }
  const overlaps = (host) => host === undefined || host === o.workerHost || WILDCARD.has(host) ||
    WILDCARD.has(o.workerHost)
  // The caller's first: a stats port derived from the balancer's (--port − 1) would otherwise
  // take the blame for the --port the user gave.
  const listeners = [
    ...others,
    { name: 'statsPort', flag: OPTIONS.statsPort.flag, port: o.statsPort, host: o.statsHost },
    { name: 'agentPort', flag: OPTIONS.agentPort.flag, port: o.agentPort, host: o.agentHost }
  ]
  for (const { name, flag, port, host } of listeners) {
    if (port && port >= o.workerPort && port <= last && overlaps(host)) {
      throw poolError(codes.BAD_OPTION,
        `${name} (--${flag}) ${port} is one of the workers' ports (${o.workerPort}-${last})`)
    }
  }
  return o
}

module.exports = {
  OPTIONS,
  resolveOptions,
  checkOption: check,
  checkOwnPorts,
  parseDuration,
  parseSize,
  formatSize,
  workerCeiling,
  CEILING_PER_CPU,
  MEMORY_PER_WORKER,
  EMBEDDED_CONCURRENCY
}
