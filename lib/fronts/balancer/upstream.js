'use strict'

// Keep-alive connections from the balancer to one worker, over plain sockets: socket → parser →
// attempt. A failure says how far the attempt got (`failureOf`), which the retry rules decide on.

const net = require('node:net')
const { budget: descriptors } = require('../../net/descriptors')
const { ResponseParser } = require('./response-parser')
const { PoolError, codes } = require('../../errors')

// Idle connections older than this are not reused, well within any keep-alive timeout (workers
// keep 65 s, Node's default is 5 s), or lowered to N − 1 s by a worker's `Keep-Alive: timeout=N`.
const MAX_IDLE_MS = 2000

// A connect that failed for want of this process's own resources: 'local' (failures.js).
const LOCAL_ERRORS = new Set(['EMFILE', 'ENFILE', 'ENOBUFS', 'ENOMEM', 'EADDRNOTAVAIL'])

class WorkerGoneError extends PoolError {
  constructor (message) { super(codes.WORKER_GONE, message) }
}

// One connection, one attempt at a time; the parser's word on a whole response decides reuse
// (exchangeDone). Besides the parser's calls the attempt hears onReadEnd() (one read parsed: act
// now, outside the parser) and onFailed(failure, err) before the response is complete: 'refused'
// (never established), 'died' (closed before a response byte), 'bad_response', 'broken_response'.
class Connection {
  constructor (connections) {
    this.connections = connections
    this.attempt = null
    this.idleSince = 0
    this.maxIdleMs = MAX_IDLE_MS
    this.closed = false
    this.connected = false // the TCP handshake completed: from then on the worker may read what we wrote
    this.received = false // some byte of the current attempt's response came back
    this.badResponse = false
    this.error = null
    this.parser = new ResponseParser(null)
    const socket = this.socket = net.connect({ host: connections.host, port: connections.port })
    descriptors.opened()
    socket.setNoDelay(true)
    socket.once('connect', () => {
      this.connected = true
      connections.onConnect()
    })
    socket.on('data', (chunk) => this.onData(chunk))
    socket.on('end', () => this.onEnd())
    socket.on('error', (err) => { this.error = err })
    socket.on('close', () => this.onClose())
  }

  // The request goes out in one write; its response's parts go to `attempt`.
  send (attempt, method, head, body, upgrade) {
    this.attempt = attempt
    this.received = false
    this.parser.handlers = attempt
    this.parser.expect(method, upgrade)
    const socket = this.socket
    if (body && body.length > 0) {
      socket.cork()
      socket.write(head, 'latin1')
      socket.write(body)
      socket.uncork()
    } else {
      socket.write(head, 'latin1')
    }
  }

  onData (chunk) {
    const attempt = this.attempt
    if (!attempt) return this.socket.destroy() // a worker speaking out of turn
    this.received = true
    try {
      this.parser.execute(chunk)
    } catch (err) {
      return this.refuseResponse(err)
    }
    if (this.parser.completed) this.exchangeDone()
    attempt.onReadEnd()
  }

  // The worker closed its side. That ends a response delimited by the close; anything else is
  // cut short (died, or broken_response), not malformed.
  onEnd () {
    const attempt = this.attempt
    if (!attempt) return
    try {
      this.parser.end()
    } catch (err) {
      return this.socket.destroy(err)
    }
    if (this.parser.completed) this.exchangeDone()
    attempt.onReadEnd()
  }

  // Whatever the parser threw, the bytes on this connection can no longer be trusted: drop it.
  // The attempt fails as a bad response even if the throw was not a ResponseParseError.
  refuseResponse (err) {
    this.badResponse = true
    this.socket.destroy(err)
  }

  onClose () {
    this.closed = true
    this.connections.forget(this)
    const attempt = this.attempt
    if (!attempt) return
    this.attempt = null
    this.parser.handlers = null
    attempt.onFailed(this.failureOf(), this.error || new Error('the worker closed the connection'))
  }

  failureOf () {
    if (this.badResponse) return 'bad_response'
    if (this.received) return 'broken_response'
    // The request is written as soon as it is handed over, so once the connection was
    // established the worker may have read it, whatever our write callback says.
    if (!this.connected && LOCAL_ERRORS.has(this.error?.code)) return 'local'
    return this.connected ? 'died' : 'refused'
  }

  // The parser read a whole response and said whether the connection may carry another: it is
  // kept for a later attempt (a worker's `Keep-Alive: timeout=N` keeps it idle N - 1 s at most),
  // or closed. The attempt hears of it after, in onReadEnd.
  exchangeDone () {
    const { keepAlive, head } = this.parser
    this.parser.completed = false
    this.attempt = null
    this.parser.handlers = null
    const hint = head ? keepAliveHint(head.rawHeaders) : 0
    if (hint) this.maxIdleMs = Math.min(MAX_IDLE_MS, hint * 1000 - 1000)
    if (keepAlive && !this.closed) this.connections.keep(this)
    else this.socket.destroy()
  }

  // The attempt is let go of before its response is whole: the connection goes (reset, so that
  // the worker's server sees it at once, and a request not yet read there is never read).
  abort (attempt) {
    if (this.attempt !== attempt || this.closed) return
    this.attempt = null
    this.parser.handlers = null
    if (typeof this.socket.resetAndDestroy === 'function' && this.connected) this.socket.resetAndDestroy()
    else this.socket.destroy()
  }

  // The worker switched protocols (a 101): the socket is the attempt's to carry on (tunnel.js),
  // no longer its pool's. Its 'error' listener stays until the new owner has its own.
  detach () {
    this.attempt = null
    this.parser.handlers = null
    this.closed = true
    this.connections.forget(this)
    const socket = this.socket
    for (const event of ['data', 'end', 'close']) socket.removeAllListeners(event)
    return socket
  }

  // Back-pressure while a client falls behind (relay.js), from the attempt it carries.
  pause (attempt) { if (this.attempt === attempt) this.socket.pause() }
  resume (attempt) { if (this.attempt === attempt) this.socket.resume() }

  usable (now) {
    return !this.closed && !this.socket.destroyed && now - this.idleSince < this.maxIdleMs
  }
}

function keepAliveHint (rawHeaders) {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].length === 10 && rawHeaders[i].toLowerCase() === 'keep-alive') {
      const m = /timeout=(\d+)/.exec(rawHeaders[i + 1])
      if (m) return Number(m[1])
    }
  }
  return 0
}

// The connections to one worker: at most `maxIdle` kept open between requests. onConnect(): a
// new connection was established.
class ConnectionPool {
  constructor ({ host, port, maxIdle, onConnect = () => {} }) {
    this.host = host
    this.port = port
    this.maxIdle = maxIdle
    this.onConnect = onConnect
    this.idle = [] // most recently used last: reused first, so the others age out
    this.open = new Set() // every connection not closed yet
    this.closed = false
  }

  // Sends `attempt`'s request on an idle connection (when `reuse` allows), or a new one (always
  // for an `upgrade`). Returns the connection.
  send (attempt, method, head, body, { reuse = true, upgrade = false } = {}) {
    const now = performance.now()
    let connection
    while (reuse && !upgrade && (connection = this.idle.pop())) {
      if (connection.usable(now)) break
      connection.socket.destroy()
    }
    if (!connection) {
      connection = new Connection(this)
      this.open.add(connection)
    }
    connection.send(attempt, method, head, body, upgrade)
    return connection
  }

  keep (connection) {
    if (this.closed || this.idle.length >= this.maxIdle) return connection.socket.destroy()
    connection.idleSince = performance.now()
    // It may have been paused for a slow client; the next attempt must read.
    if (connection.socket.isPaused()) connection.socket.resume()
    this.idle.push(connection)
  }

  // Let every idle connection go (descriptors are short).
  closeIdle () {
    for (const connection of this.idle.splice(0)) connection.socket.destroy()
  }

  forget (connection) {
    this.open.delete(connection)
    const i = this.idle.indexOf(connection)
    if (i >= 0) this.idle.splice(i, 1)
  }

  // The worker is gone: fail what is in flight, close everything.
  destroy (reason) {
    this.closed = true
    const err = reason instanceof Error ? reason : new WorkerGoneError(String(reason))
    for (const connection of [...this.open]) connection.socket.destroy(connection.attempt ? err : undefined)
  }
}

module.exports = { Connection, ConnectionPool, WorkerGoneError, MAX_IDLE_MS }
