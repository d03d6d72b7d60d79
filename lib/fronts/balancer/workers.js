'use strict'

// The balancer's view of the workers: which may be given a request now, and how many each is
// serving. The supervisor is the source of truth (workerReady / workerGone); a refused or reset
// connection only benches a worker briefly, because the supervisor's word on it may be a few
// milliseconds behind the socket's. Refusals in a row are counted, for the supervisor to hear of
// a worker that refuses while it lives (pipeline.js noteRefusal). A record changes only through
// its own methods.
//
// A worker forked with --worker-concurrency K above 1 (its snapshot's `concurrency`) is admitted
// by CPU, not by request: it may hold up to K, but is given one more only while every request it
// holds awaits I/O, as it said last (awaiting()), and nothing was sent to it since: a request
// just sent runs on its CPU until the worker says otherwise. The word names the request the
// worker started last, so one sent before the balancer's latest request reached it is old news.

const { ConnectionPool, WorkerGoneError } = require('./upstream')

class WorkerRecord {
  constructor (snapshot, maxconn) {
    this.slot = snapshot.slot
    this.byCpu = (snapshot.concurrency ?? 1) > 1 // admitted by CPU (--worker-concurrency above 1)
    this.cap = this.byCpu ? snapshot.concurrency : maxconn // places: requests it may hold at once
    this.name = snapshot.name || `worker${snapshot.slot}`
    this.pid = snapshot.pid
    this.host = snapshot.host || '127.0.0.1'
    this.port = snapshot.port
    this.inFlight = 0 // places taken: requests on it, and those whose app may still run (abandoned)
    this.abandoned = 0 // of those, the requests whose answer failed while the app may still run them
    this.draining = false
    this.gone = false
    this.benched = false // refused or reset a connection a moment ago (see Dispatcher.bench)
    this.benchTimer = null
    this.refusedInARow = 0 // connections refused since the last one established
    this.refusingReported = false
    this.lastSent = null // the X-Request-Id of the request given to it last (byCpu)
    this.saidOpen = 0 // its last word: this many requests, all awaiting I/O, the last started `saidLast`
    this.saidLast = null
    this.connections = new ConnectionPool({ host: this.host, port: this.port, maxIdle: this.cap, onConnect: () => { this.refusedInARow = 0 } })
  }

  // In the pool's words (a worker handle's states), seen from the balancer: dead once out of
  // rotation, ready when it may be given a request, and `benched`, the one state of the
  // balancer's own: ready, but given nothing for a moment after a refused or reset connection.
  state () {
    if (this.gone) return 'dead'
    if (this.draining) return 'draining'
    if (this.inFlight > 0) return 'busy'
    if (this.benched) return 'benched'
    return 'ready'
  }

  // ---- its places (the Dispatcher's) -------------------------------------------------------

  take (job) {
    this.inFlight++
    if (this.byCpu) this.lastSent = job.id
  }

  release () { this.inFlight-- }

  // The worker's word: the `open` requests it holds all await I/O, `last` started last.
  awaiting (open, last) {
    this.saidOpen = open
    this.saidLast = last
  }

  // Whether every request it holds awaits I/O, as far as the worker has said: its word counts
  // the latest request given to it, and no more are held now than it counted (those it
  // answered since are gone from both).
  get onlyAwaiting () {
    return this.saidLast === this.lastSent && this.saidOpen >= this.inFlight
  }

  // A request's answer failed while its app may still run it: its place is kept until the
  // worker says the request ended (ended()), or the worker is gone.
  abandon () { this.abandoned++ }
  ended () { this.abandoned-- }

  drain () { this.draining = true }

  // Given nothing until unbenched (the Dispatcher's timer, or the supervisor's word).
  bench (timer) {
    clearTimeout(this.benchTimer)
    this.benched = true
    this.benchTimer = timer
  }

  unbench () {
    clearTimeout(this.benchTimer)
    this.benchTimer = null
    const was = this.benched
    this.benched = false
    return was
  }

  // ---- refusals (pipeline.js noteRefusal) ------------------------------------------------------

  // One more connection refused in a row; returns how many.
  refused () { return ++this.refusedInARow }
  reportedRefusing (told) { this.refusingReported = told }

  // Stop talking to this worker: its process is gone or going. What is in flight fails now
  // (and may be redispatched) rather than when the socket notices.
  close (reason) {
    this.gone = true
    clearTimeout(this.benchTimer)
    this.connections.destroy(reason)
  }
}

class WorkerSet {
  constructor ({ maxconn, balance }) {
    this.maxconn = maxconn
    this.balance = balance
    this.records = [] // in slot order, so that `first` is a scan from the start
    this.rrCursor = -1
    this.byCpu = 0 // records admitted by CPU
  }

  get (slot) { return this.records.find((r) => r.slot === slot) }

  add (snapshot) {
    const old = this.get(snapshot.slot)
    if (old) this.remove(old.slot, undefined, new WorkerGoneError(`worker ${old.name} replaced`))
    const record = new WorkerRecord(snapshot, this.maxconn)
    this.records.push(record)
    if (record.byCpu) this.byCpu++
    this.records.sort((a, b) => a.slot - b.slot)
    return record
  }

  // Returns the removed record, or undefined if `slot` (with that pid, when both are known)
  // was not in rotation.
  remove (slot, pid, reason) {
    const i = this.records.findIndex((r) => r.slot === slot)
    if (i < 0) return undefined
    const record = this.records[i]
    if (pid !== undefined && record.pid !== undefined && pid !== record.pid) return undefined
    this.records.splice(i, 1)
    if (record.byCpu) this.byCpu--
    record.close(reason || new WorkerGoneError(`worker ${record.name} is gone`))
    return record
  }

  canTake (record) {
    return !record.draining && !record.benched && record.inFlight < record.cap && (record.inFlight === 0 || !record.byCpu || record.onlyAwaiting)
  }

  // A worker that may take a request and holds none.
  canTakeIdle (record) {
    return record.inFlight === 0 && this.canTake(record)
  }

  // The worker the next request goes to, or undefined if none can take one now. Among workers
  // admitted by CPU, one that holds nothing is preferred to one whose requests await I/O.
  pickFree () {
    if (this.byCpu === 0) return this.pickBy((r) => this.canTake(r))
    return this.pickBy((r) => this.canTakeIdle(r)) || this.pickBy((r) => this.canTake(r))
  }

  pickBy (canTake) {
    const list = this.records
    if (this.balance === 'rr') {
      for (let k = 1; k <= list.length; k++) {
        const i = (this.rrCursor + k) % list.length
        if (canTake(list[i])) { this.rrCursor = i; return list[i] }
      }
      return undefined
    }
    for (let i = 0; i < list.length; i++) if (canTake(list[i])) return list[i]
    return undefined
  }

  // Whether some worker could take a request now (pickFree without moving the rr cursor).
  anyFree () {
    return this.records.some((r) => this.canTake(r))
  }

  // How many requests the workers in rotation can hold at once (a benched one is back soon).
  places () {
    let n = 0
    for (let i = 0; i < this.records.length; i++) if (!this.records[i].draining) n += this.records[i].cap
    return n
  }

  inFlight () {
    let n = 0
    for (const r of this.records) n += r.inFlight
    return n
  }

  closeAll (reason) {
    this.byCpu = 0
    for (const r of this.records.splice(0)) r.close(reason)
  }
}

module.exports = { WorkerSet, WorkerRecord }
