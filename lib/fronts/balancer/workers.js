'use strict'

// The balancer's view of the workers: which may be given a request now, and how many each is
// serving. The supervisor is the source of truth (workerReady / workerGone); a refused or reset
// connection only benches a worker briefly, because the supervisor's word on it may be a few
// milliseconds behind the socket's. Refusals in a row are counted, for the supervisor to hear of
// a worker that refuses while it lives (pipeline.js noteRefusal). A record changes only through
// its own methods.
//
// A request holds one of its worker's render places from the moment it is sent until its
// response head arrives (or it ends): what comes after the head (a stream of tokens, server-sent
// events) awaits I/O and holds no place, only an open request, bounded by `maxOpen` per worker
// (and in all by the WorkerSet). A worker forked with --worker-concurrency K above 1 (its
// snapshot's `concurrency`) is admitted by CPU: K render places, and one more request only while
// none of those it holds renders: every one has its response head here (a response under way,
// as the worker's own guard counts it), or the worker said they all await I/O (awaiting()) and
// nothing was sent to it since: a request just sent runs on its CPU until its head comes or the
// worker says otherwise. The word names the request the worker started last, so one sent before
// the balancer's latest request is old news. (A head alone admits the next without a word: a
// stream's, or a page's whose shell is out, comes a round trip sooner than the word, and a worker
// opening hundreds of streams a second, its loop busy writing tokens, may not be quiet enough
// to say it.)
//
// A request replayed after its worker died (a suspect: it may be what killed it) renders alone: it
// goes only to a worker holding nothing (after a while, one rendering nothing: dispatcher.js
// REPLAY_ALONE_MS), and that worker is given nothing else until the suspect's response head comes
// (or it ends). So the replays of one death
// spread over the workers, one each, and a poison request kills its replay's worker with nobody
// else on it; it is not replayed again (failures.js).
//
// A drained worker whose slot has a new process while streams are still open on it is retired:
// out of rotation, kept until what it holds is over or its process is gone.

const { ConnectionPool, WorkerGoneError } = require('./upstream')
const { budget: descriptors } = require('../../net/descriptors')

class WorkerRecord {
  constructor (snapshot, { maxconn, maxOpen = Infinity }) {
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
    this.suspect = null // the replayed request it renders alone (see the top), until its head
    this.connections = new ConnectionPool({
      host: this.host,
      port: this.port,
      maxIdle: this.cap,
      onConnect: () => { this.refusedInARow = 0 }
    })
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

  // A long-lived request (a stream) takes no render place; the worker's word must still name it
  // (it is the latest the worker started).
  take (job) {
    this.inFlight++
    if (!job.longLived) this.renders++
    if (this.byCpu) this.lastSent = job
    if (job.replayed && !job.longLived) this.suspect = job // a stream renders nothing to be alone for
  }

  // A request's response head came: its render place is free, the request stays open.
  headArrived (job) {
    this.renders--
    if (this.suspect === job) this.suspect = null
  }

  // A request is over. `rendering`: it still held its render place (no head came).
  release (job, rendering) {
    this.inFlight--
    if (rendering) this.renders--
    if (this.suspect === job) this.suspect = null
  }

  // The worker's word: the `open` requests it holds all await I/O, `last` started last.
  awaiting (open, last) {
    this.saidOpen = open
    this.saidLast = last
  }

  // Whether every request it holds awaits I/O, as far as the worker has said: its word counts
  // the latest request given to it, and no fewer than render here (those whose head has not come:
  // they are surely still open there; one whose response is still being read may have ended in
  // the worker, its last bytes waiting here for a slow client).
  get onlyAwaiting () {
    return this.lastSent !== null && this.saidLast === this.lastSent.exchange && this.saidOpen >= this.renders
  }

  // A request's answer was let go of while its app may still run it: its place is kept until the
  // worker says the request ended, or the worker is gone. `id`: its exchange (X-Pool-Request).
  // `ask()` asks the worker (the pool's
  // watchRequest): false when it cannot be asked, and then null is returned, else a promise.
  abandon (id, ask) {
    if (this.gone || !ask()) return null
    this.abandoned++
    return new Promise((resolve) => this.watched.set(id, [...(this.watched.get(id) ?? []), resolve]))
  }

  // The worker says the request `id` has ended (or was never there).
  requestEnded (id) {
    const waiting = this.watched.get(id)
    if (!waiting) return
    this.watched.delete(id)
    this.abandoned -= waiting.length
    for (const resolve of waiting) resolve()
  }

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

  add (snapshot) {
    const old = this.get(snapshot.slot)
    if (old && old.draining && old.inFlight > 0 && old.pid !== snapshot.pid) this.retire(old)
    else if (old) this.remove(old.slot, undefined, new WorkerGoneError(`worker ${old.name} replaced`))
    const record = new WorkerRecord(snapshot, { maxconn: this.maxconn, maxOpen: this.maxOpen })
    this.records.push(record)
    if (record.byCpu) this.byCpu++
    this.records.sort((a, b) => a.slot - b.slot)
    return record
  }

  // Out of rotation, kept for what it holds.
  retire (record) {
    this.records.splice(this.records.indexOf(record), 1)
    if (record.byCpu) this.byCpu--
    record.retired = true
    this.retired.add(record)
  }

  // Returns the removed record, or undefined if `slot` (with that pid, when both are known)
  // was not in rotation or retired.
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

  // A retired record whose last request is over has nothing left to keep it.
  forgetIfDone (record) {
    if (!record.retired || record.inFlight > 0) return
    this.retired.delete(record)
    record.close(new WorkerGoneError(`worker ${record.name} (retired) holds nothing more`))
  }

  take (record, job) {
    record.take(job)
    this.open++
  }

  release (record, job, rendering) {
    record.release(job, rendering)
    if (!record.gone) this.open--
  }

  // Whether `record` is in rotation, free of a suspect, and under its open bound.
  available (record) {
    return !record.draining && !record.benched && record.suspect === null && record.inFlight < record.maxOpen
  }

  // Whether the worker holding a request's session may take it: even draining or retired (what
  // it holds is there), while it has room.
  mayServe (record) {
    if (record.gone || record.benched || record.suspect !== null) return false
    return record.inFlight < record.maxOpen && this.hasRoom()
  }

  canTake (record) {
    if (!this.available(record) || record.renders >= record.cap) return false
    return record.renders === 0 || !record.byCpu || record.onlyAwaiting
  }

  // The worker a replayed request (a suspect) goes to, so that it renders alone (see the top): one
  // holding nothing; with `besideStreams` (it has waited long enough), else one rendering
  // nothing, holding fewest open.
  pickForSuspect ({ besideStreams = false } = {}) {
    if (!this.hasRoom()) return undefined
    const alone = (r) => this.available(r) && r.renders === 0
    return this.pickBy((r) => r.inFlight === 0 && alone(r)) || (besideStreams ? this.fewest(alone) : undefined)
  }

  // The worker the next request goes to, or undefined if none can take one now (or the open
  // requests of all are at their bound): by --balance among workers of K 1. Among workers
  // admitted by CPU, one that holds nothing comes first; then, among
  // those rendering nothing (only streams open), the one holding fewest, so that streams spread
  // and no worker's loop carries them all; then any that may take one.
  pickFree () {
    if (!this.hasRoom()) return undefined
    if (this.byCpu === 0) return this.pickBy((r) => this.canTake(r))
    return this.pickBy((r) => r.inFlight === 0 && this.canTake(r)) ||
      this.fewest((r) => r.renders === 0 && this.canTake(r)) ||
      this.pickBy((r) => this.canTake(r))
  }

  // The worker a long-lived request goes to: one rendering nothing first, then any, holding
  // fewest open requests (HAProxy's leastconn), among those with room for one more.
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

  // Whether some worker could take a request now (pickFree without moving the rr cursor).
  anyFree () {
    return this.hasRoom() && this.records.some((r) => this.canTake(r))
  }

  // Room for one more open request: under --max-open, and a descriptor for its connection to a
  // worker with the pool's reserve kept (past it a request waits for one rather than fail).
  hasRoom () {
    if (this.open >= this.maxOpenTotal) return false
    if (descriptors.hasRoom(1)) return true
    // Idle connections kept for reuse give theirs back first.
    for (const r of this.records) r.connections.closeIdle()
    return false
  }

  // How many requests the workers in rotation can render at once (a benched one is back soon).
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

  // Requests holding render places now, for overload control's pace.
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
