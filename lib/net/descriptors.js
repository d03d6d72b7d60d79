'use strict'

// File descriptors: the one resource the pool's clients can take away from its workers. Every
// connection a listener accepts holds one, while forking a worker needs eight at its peak (its
// stdout, stderr and IPC pipes, both ends until the child has them, and libuv's exec-error pipe)
// and keeps three. Under a low `ulimit -n`, idle clients that fill the table leave nothing to
// fork with, and every respawn fails with EMFILE. So each listener of the pool (the embedded
// balancer's front, the stats listener, the agent, the control socket) accepts a connection only
// while the descriptors open plus a reserve for the workers stay within the process's limit;
// past it a new connection is closed at once, and the refusal is logged (once per
// REFUSAL_LOG_MS) and counted in pool_failures_total{reason="out_of_descriptors"}.
//
// The reserve is FORK_PEAK plus HOUSEKEEPING (the supervisor's own needs: /proc reads, a
// reload's canary, the control socket), plus PER_WORKER for each wanted slot that has no process
// right now: the descriptors a worker freed when it exited belong to its next process, not to
// the next client. The control socket may use HOUSEKEEPING: an operator can still reach a pool
// whose clients took every descriptor they may.

const fs = require('node:fs')

const FORK_PEAK = 8
const HOUSEKEEPING = 16
const PER_WORKER = 4 // kept open for a running worker: stdout, stderr, IPC, one connection to it
const REMEASURE_MS = 1000 // the open count is read again at least this often, and whenever tight
const REFUSAL_LOG_MS = 10000

// The process's soft limit on open files (RLIMIT_NOFILE; Node raises it to the hard limit at
// start), or Infinity where /proc cannot tell.
function descriptorLimit () {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'))
    const soft = Number(line.split(/\s{2,}/)[1])
    return Number.isInteger(soft) && soft > 0 ? soft : Infinity
  } catch {
    return Infinity
  }
}

// Descriptors open now (the directory read itself holds one), or null where /proc cannot tell.
function openDescriptors () {
  try {
    return fs.readdirSync('/proc/self/fd').length - 1
  } catch {
    return null
  }
}

class DescriptorBudget {
  // limit(): the process's limit, read again with each count (`prlimit` can change it while
  // the pool runs); count(): the descriptors open now.
  constructor ({ limit = descriptorLimit, count = openDescriptors, now = () => performance.now() } = {}) {
    this.readLimit = limit
    this.limit = limit()
    this.count = count
    this.now = now
    this.missingWorkers = new Set() // one function per owner of workers: how many have no process now
    this.open = null // descriptors open at the last count, plus the connections admitted since
    this.countedAt = -Infinity
  }

  // Keeps descriptors for the workers to come of one owner (a pool) until the function returned
  // is called: PER_WORKER for each, `missing()` read again at every admission.
  reserveForWorkers (missing) {
    const own = () => missing() // one entry per call, even for the same function
    this.missingWorkers.add(own)
    return () => { this.missingWorkers.delete(own) }
  }

  // `priority`: the control socket's connections, which may use the housekeeping part.
  reserve ({ priority = false } = {}) {
    let missing = 0
    for (const count of this.missingWorkers) missing += count() || 0
    return FORK_PEAK + (priority ? 0 : HOUSEKEEPING) + PER_WORKER * missing
  }

  // May the connection just accepted (its descriptor already open) be kept? Counting reads
  // /proc, so between counts each admitted connection is added to the last count; connections
  // that closed since make that estimate high, never low, and a tight one is counted again.
  // `more`: descriptors the connection will need besides its own (the embedded balancer's
  // connection to a worker for each request it carries), kept free too.
  admit ({ priority = false, more = 0 } = {}) {
    if (this.limit === Infinity) return true
    const reserve = this.reserve({ priority }) + more
    if (!this.measureIfTight(1 + reserve)) this.open++ // a count just taken has it already
    if (this.open + reserve <= this.limit) return true
    this.open-- // the refused connection's descriptor is closed at once
    return false
  }

  // Whether `n` more descriptors may be opened now, the reserve kept (asked before the balancer
  // connects to a worker: past it the request waits for one, rather than fail its connect).
  hasRoom (n = 1) {
    if (this.limit === Infinity) return true
    const reserve = this.reserve()
    this.measureIfTight(n + reserve)
    return this.open + n + reserve <= this.limit
  }

  // A descriptor was opened outside an accept (a connection to a worker): the estimate follows.
  opened () { if (this.open !== null) this.open++ }

  // Counts again when the estimate is old or `needed` more would not fit by it. Returns whether
  // it counted; where /proc cannot tell, the estimate is 0 from then on.
  measureIfTight (needed) {
    const now = this.now()
    if (this.open !== null && now - this.countedAt < REMEASURE_MS && this.open + needed <= this.limit) return false
    const open = this.count()
    this.open = open ?? this.open ?? 0
    this.limit = this.readLimit()
    this.countedAt = now
    return open !== null
  }

  // What a refusal line says.
  describe () {
    return { open: this.open, limit: this.limit, reserve: this.reserve() }
  }
}

// One budget per process: descriptors are the process's, whoever opens them.
const budget = new DescriptorBudget()

// Makes `server` refuse connections that would eat the workers' reserve, and survive a failed
// accept. Node (libuv) keeps one spare descriptor for a full table: it accepts what waits and
// closes it at once, so clients see a closed connection rather than a hang, and no error
// reaches us. Should that spare be gone too, the failed accept arrives here as an 'error' from
// `accept`: it is logged, and idle keep-alive connections are let go so that the next accept has
// a descriptor (libuv tries again at once). `name` names the listener in the log;
// `onRefused()` counts a refusal in the owner's metrics. Call it once the server has its
// connection handler (http.Server's own, or the one given to net.createServer): a refused
// connection reaches no handler. `priority`: see reserve(). `more()`: see admit().
function guardAccept (server, {
  name, logger, onRefused = () => {}, priority = false, more = () => 0, descriptors = budget
}) {
  const refusals = new RateLimitedLine(logger, REFUSAL_LOG_MS)
  const handlers = server.listeners('connection')
  server.removeAllListeners('connection')
  server.on('connection', (socket) => {
    if (descriptors.admit({ priority, more: more() })) {
      for (const handler of handlers) handler.call(server, socket)
      return
    }
    socket.destroy()
    onRefused()
    const { open, limit, reserve } = descriptors.describe()
    refusals.warn({ event: 'connection-refused', listener: name, reason: 'out-of-descriptors', open, limit, reserve },
      (n) => `${name}: refused ${n === 1 ? 'a connection' : `${n} connections`}: ${open} of ${limit} file ` +
        `descriptors open, ${reserve} kept for the workers (raise ulimit -n / LimitNOFILE)`)
  })
  server.on('error', (err) => {
    if (!server.listening) return // a failed listen: its caller reports it
    if (err.syscall === 'accept' && (err.code === 'EMFILE' || err.code === 'ENFILE')) {
      onRefused()
      if (typeof server.closeIdleConnections === 'function') server.closeIdleConnections()
      return refusals.warn({ event: 'accept-failed', listener: name, code: err.code },
        (n) => `${name}: accept failed ${n === 1 ? 'once' : `${n} times`}: ${err.code} (out of file descriptors); ` +
          'idle connections closed')
    }
    logger?.warn({ event: 'listener-error', listener: name, err }, `${name}: ${err.message}`)
  })
  return server
}

// A line said at most once per `interval`, naming how many times it happened since.
class RateLimitedLine {
  constructor (logger, interval, now = () => performance.now()) {
    this.logger = logger
    this.interval = interval
    this.now = now
    this.saidAt = -Infinity
    this.pending = 0
  }

  warn (fields, message) {
    this.pending++
    const now = this.now()
    if (now - this.saidAt < this.interval) return
    this.logger?.warn({ ...fields, times: this.pending }, message(this.pending))
    this.saidAt = now
    this.pending = 0
  }
}

module.exports = {
  DescriptorBudget,
  budget,
  guardAccept,
  descriptorLimit,
  openDescriptors,
  FORK_PEAK,
  HOUSEKEEPING,
  PER_WORKER
}
