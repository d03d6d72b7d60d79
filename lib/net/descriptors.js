'use strict'

// File descriptors, which idle clients could take from the workers (a fork needs FORK_PEAK): each listener
// of the pool admits a connection only while those open plus a reserve fit the limit, else closes it
// (logged, counted as out_of_descriptors). Reserve: FORK_PEAK + HOUSEKEEPING (the control socket may use
// it) + PER_WORKER per wanted slot without a process.

const fs = require('node:fs')

const FORK_PEAK = 8
const HOUSEKEEPING = 16
const PER_WORKER = 4 // kept open for a running worker: stdout, stderr, IPC, one connection to it
const REMEASURE_MS = 1000 // the open count is read again this often, and whenever tight
const REFUSAL_LOG_MS = 10000

// RLIMIT_NOFILE's soft limit, or Infinity where /proc cannot tell.
function descriptorLimit () {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'))
    const soft = Number(line.split(/\s{2,}/)[1])
    return Number.isInteger(soft) && soft > 0 ? soft : Infinity
  } catch {
    return Infinity
  }
}

// Less the one the read holds; null where /proc cannot tell.
function openDescriptors () {
  try {
    return fs.readdirSync('/proc/self/fd').length - 1
  } catch {
    return null
  }
}

class DescriptorBudget {
  // limit() is read again with each count: `prlimit` can change it.
  constructor ({ limit = descriptorLimit, count = openDescriptors, now = () => performance.now() } = {}) {
    this.readLimit = limit
    this.limit = limit()
    this.count = count
    this.now = now
    this.missingWorkers = new Set() // one function per owner of workers: how many have no process now
    this.open = null // descriptors open at the last count, plus the connections admitted since
    this.countedAt = -Infinity
  }

  // PER_WORKER for each of `missing()` (read at every admission) until the function returned is called.
  reserveForWorkers (missing) {
    const own = () => missing() // one entry per call, even for the same function
    this.missingWorkers.add(own)
    return () => { this.missingWorkers.delete(own) }
  }

  reserve ({ priority = false } = {}) {
    let missing = 0
    for (const count of this.missingWorkers) missing += count() || 0
    return FORK_PEAK + (priority ? 0 : HOUSEKEEPING) + PER_WORKER * missing
  }

  // May the connection just accepted be kept? Between /proc counts the estimate grows by each admission
  // (high, never low). `more`: descriptors it will need besides its own, kept free too.
  admit ({ priority = false, more = 0 } = {}) {
    if (this.limit === Infinity) return true
    const reserve = this.reserve({ priority }) + more
    if (!this.measureIfTight(1 + reserve)) this.open++ // a count just taken has it already
    if (this.open + reserve <= this.limit) return true
    this.open-- // the refused connection's descriptor is closed at once
    return false
  }

  // Asked before the balancer connects to a worker: past it the request waits rather than fail.
  hasRoom (n = 1) {
    if (this.limit === Infinity) return true
    const reserve = this.reserve()
    this.measureIfTight(n + reserve)
    return this.open + n + reserve <= this.limit
  }

  opened () { if (this.open !== null) this.open++ }

  // Counts again when old or `needed` would not fit; returns whether it counted.
  measureIfTight (needed) {
    const now = this.now()
    if (this.open !== null && now - this.countedAt < REMEASURE_MS && this.open + needed <= this.limit) return false
    const open = this.count()
    this.open = open ?? this.open ?? 0
    this.limit = this.readLimit()
    this.countedAt = now
    return open !== null
  }

  describe () {
    return { open: this.open, limit: this.limit, reserve: this.reserve() }
  }
}

const budget = new DescriptorBudget()

// Makes `server` refuse connections that would eat the reserve, and survive a failed accept (EMFILE past
// libuv's spare fd: logged, idle connections closed). Call it once the server has its connection handler.
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
