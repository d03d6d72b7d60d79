'use strict'

// The balancer's view of the workers: which may take a request now, and what each holds. The
// supervisor is the truth (workerReady / workerGone); a refused or reset connection only benches a
// worker briefly. A request holds a render place from sending until its response head (what follows
// awaits I/O: an open request, bounded by `maxOpen`). A worker with --worker-concurrency K above 1
// is admitted by CPU: K places, and one more only while none it holds renders (every head is here,
// or its latest word, naming the last request sent, says all await I/O). A replayed request (a
// suspect: it may have killed its worker) renders alone on a worker holding nothing (dispatcher.js
// REPLAY_ALONE_MS), which takes nothing else until its head. A drained worker whose slot has a new
// process while it holds streams is retired: out of rotation until what it holds is over.

const { ConnectionPool, WorkerGoneError } = require('./upstream')
const { budget: descriptors } = require('../../net/descriptors')

class WorkerRecord {
  constructor (snapshot, { maxconn, maxOpen = Infinity, stats = null }) {
    this.slot = snapshot.slot
    this.byCpu = (snapshot.concurrency ?? 1) > 1 // admitted by CPU (--worker-concurrency above 1)
    this.cap = this.byCpu ? snapshot.concurrency : maxconn // render places: requests rendering at once
    this.maxOpen = Math.max(this.cap, maxOpen) // requests it may hold at once, rendering or not
    this.name = snapshot.name || `worker${snapshot.slot}`
    this.pid = snapshot.pid
    this.host = snapshot.host || '127.0.0.1'
    this.port = snapshot.port
    this.inFlight = 0 // open requests: on it, and those whose app may still run (abandoned)
    this.renders = 0 // of those, the ones holding a render place (no response head yet)
    this.abandoned = 0 // of those, the requests whose answer failed while the app may still run them
    this.watched = new Map() // X-Request-Id → [resolve]: abandoned requests whose end the worker will tell
    this.draining = false
    this.retired = false // a new process has its slot; this one finishes what it holds
    this.gone = false
    this.benched = false // refused or reset a connection a moment ago (see Dispatcher.bench)
    this.benchTimer = null
    this.refusedInARow = 0 // connections refused since the last one established
    this.refusingReported = false
    this.lastSent = null // the request given to it last (byCpu): its exchange (X-Pool-Request) names it
    this.saidOpen = 0 // its last word: this many requests, all awaiting I/O, the last started `saidLast`
    this.saidLast = null
    this.stats = stats // its slot's counters (slots.js), which outlive this process
    this.suspect = null // the replayed request it renders alone (see the top), until its head
    this.connections = new ConnectionPool({
      host: this.host,
      port: this.port,
      maxIdle: this.cap,
      onConnect: () => { this.refusedInARow = 0 }
    })
  }

  // The pool's worker states, plus `benched`: ready, but given nothing just after a refusal or reset.
  state () {
    if (this.gone) return 'dead'
    if (this.draining) return 'draining'
    if (this.inFlight > 0) return 'busy'
    if (this.benched) return 'benched'
    return 'ready'
  }

  // ---- its places (the Dispatcher's)

  // A stream takes no render place, but is still the latest the worker's word must name.
  take (request) {
    this.inFlight++
    if (!request.longLived) this.renders++
    if (this.byCpu) this.lastSent = request
    if (request.replayed && !request.longLived) this.suspect = request // a stream renders nothing to be alone for
  }

  headArrived (request) {
    this.renders--
    if (this.suspect === request) this.suspect = null
  }

  // `rendering`: it still held its render place.
  giveBack (request, rendering) {
    this.inFlight--
    if (rendering) this.renders--
    if (this.suspect === request) this.suspect = null
  }

  // The worker's word: the `open` requests it holds all await I/O, `last` started last.
  awaiting (open, last) {
    this.saidOpen = open
    this.saidLast = last
  }

  // Whether every request it holds awaits I/O, per its word: naming the latest request sent, and
  // counting no fewer than render here.
  get onlyAwaiting () {
    return this.lastSent !== null && this.saidLast === this.lastSent.exchange && this.saidOpen >= this.renders
  }

  // Its answer let go while the app may still run it: the place is kept until the worker says it
  // ended or is gone. `ask()`: false if the worker cannot be asked (then null), else a promise.
  abandon (id, ask) {
    if (this.gone || !ask()) return null
    this.abandoned++
    return new Promise((resolve) => this.watched.set(id, [...(this.watched.get(id) ?? []), resolve]))
  }

  requestEnded (id) {
    const waiting = this.watched.get(id)
    if (!waiting) return
    this.watched.delete(id)
    this.abandoned -= waiting.length
    for (const resolve of waiting) resolve()
  }

  drain () { this.draining = true }

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

  // ---- refusals (pipeline.js noteRefusal)

  refused () { return ++this.refusedInARow }
  reportedRefusing (told) { this.refusingReported = told }

  // Its process is gone or going: what is in flight fails now (maybe redispatched), not later.
  close (reason) {
    this.gone = true
    clearTimeout(this.benchTimer)
    this.connections.destroy(reason)
    for (const id of [...this.watched.keys()]) this.requestEnded(id)
  }
}

class WorkerSet {
  // maxOpen: open requests one worker may hold; maxOpenTotal: all workers together.
  constructor ({ maxconn, balance, maxOpen = Infinity, maxOpenTotal = Infinity }) {
    this.maxconn = maxconn
    this.balance = balance
    this.maxOpen = maxOpen
    this.maxOpenTotal = maxOpenTotal
    this.records = [] // in rotation, in slot order, so that `first` is a scan from the start
    this.retired = new Set() // out of rotation, still holding requests (see the top)
    this.open = 0 // requests open on every record, retired ones included
    this.rrCursor = -1
    this.byCpu = 0 // records admitted by CPU
  }

  get (slot) { return this.records.find((r) => r.slot === slot) }

  // The record of process `pid` in `slot`, in rotation or retired.
  find (slot, pid) {
    const r = this.get(slot)
    if (r && (pid === undefined || r.pid === undefined || r.pid === pid)) return r
    for (const old of this.retired) if (old.slot === slot && old.pid === pid) return old
    return undefined
  }

  // stats: the slot's counters (slots.js), kept across the processes that come and go in it.
  add (snapshot, stats = null) {
    const old = this.get(snapshot.slot)
    if (old && old.draining && old.inFlight > 0 && old.pid !== snapshot.pid) this.retire(old)
    else if (old) this.remove(old.slot, undefined, new WorkerGoneError(`worker ${old.name} replaced`))
    const record = new WorkerRecord(snapshot, { maxconn: this.maxconn, maxOpen: this.maxOpen, stats })
    this.records.push(record)
    if (record.byCpu) this.byCpu++
    this.records.sort((a, b) => a.slot - b.slot)
    return record
  }

  retire (record) {
    this.records.splice(this.records.indexOf(record), 1)
    if (record.byCpu) this.byCpu--
    record.retired = true
    this.retired.add(record)
  }

  // The removed record, or undefined if `slot` (with that pid, when known) is not held.
  remove (slot, pid, reason) {
    const record = this.find(slot, pid)
    if (!record) return undefined
    if (record.retired) this.retired.delete(record)
    else {
      this.records.splice(this.records.indexOf(record), 1)
      if (record.byCpu) this.byCpu--
    }
    this.open -= record.inFlight
    record.close(reason || new WorkerGoneError(`worker ${record.name} is gone`))
    return record
  }

  forgetIfDone (record) {
    if (!record.retired || record.inFlight > 0) return
    this.retired.delete(record)
    record.close(new WorkerGoneError(`worker ${record.name} (retired) holds nothing more`))
  }

  take (record, request) {
    record.take(request)
    this.open++
  }

  giveBack (record, request, rendering) {
    record.giveBack(request, rendering)
    if (!record.gone) this.open--
  }

  available (record) {
    return !record.draining && !record.benched && record.suspect === null && record.inFlight < record.maxOpen
  }

  // The worker of a request's session may take it even draining or retired, while it has room.
  mayServe (record) {
    if (record.gone || record.benched || record.suspect !== null) return false
    return record.inFlight < record.maxOpen && this.hasRoom()
  }

  canTake (record) {
    if (!this.available(record) || record.renders >= record.cap) return false
    return record.renders === 0 || !record.byCpu || record.onlyAwaiting
  }

  // A worker for a suspect, holding nothing; with `besideStreams` (waited long), one rendering nothing.
  pickForSuspect ({ besideStreams = false } = {}) {
    if (!this.hasRoom()) return undefined
    const alone = (r) => this.available(r) && r.renders === 0
    return this.pickBy((r) => r.inFlight === 0 && alone(r)) || (besideStreams ? this.fewest(alone) : undefined)
  }

  // The next request's worker (undefined: none now): by --balance; with CPU-admitted workers, one
  // holding nothing first, then the fewest-holding among those rendering nothing (streams spread).
  pickFree () {
    if (!this.hasRoom()) return undefined
    if (this.byCpu === 0) return this.pickBy((r) => this.canTake(r))
    return this.pickBy((r) => r.inFlight === 0 && this.canTake(r)) ||
      this.fewest((r) => r.renders === 0 && this.canTake(r)) ||
      this.pickBy((r) => this.canTake(r))
  }

  // A stream's worker: fewest open (HAProxy's leastconn), preferring those rendering nothing.
  pickForStream () {
    if (!this.hasRoom()) return undefined
    return this.fewest((r) => r.renders === 0 && this.available(r)) || this.fewest((r) => this.available(r))
  }

  fewest (canTake) {
    let best
    for (const r of this.records) if ((best === undefined || r.inFlight < best.inFlight) && canTake(r)) best = r
    return best
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

  anyFree () {
    return this.hasRoom() && this.records.some((r) => this.canTake(r))
  }

  // Under --max-open, with a descriptor left beyond the pool's reserve (else the request waits).
  hasRoom () {
    if (this.open >= this.maxOpenTotal) return false
    if (descriptors.hasRoom(1)) return true
    // Idle kept-alive connections give theirs back first.
    for (const r of this.records) r.connections.closeIdle()
    return false
  }

  // Render places of the workers in rotation (a benched one is back soon).
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

  rendering () {
    let n = 0
    for (const r of this.records) n += r.renders
    return n
  }

  closeAll (reason) {
    this.byCpu = 0
    this.open = 0
    for (const r of this.records.splice(0)) r.close(reason)
    for (const r of this.retired) r.close(reason)
    this.retired.clear()
  }
}

module.exports = { WorkerSet, WorkerRecord }
