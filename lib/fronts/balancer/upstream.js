'use strict'

// Keep-alive connections from the balancer to one worker, and the exchange of one request and
// its response over one of them. Plain sockets: the request goes out in a single write, the
// response is read by response-parser.js, and when something fails the exchange says how far it
// got (see `failure` below), which is what retry's decide() decides on.

const net = require('node:net')
const { ResponseParser } = require('./response-parser')
const { PoolError, codes } = require('../../errors')

// Idle connections older than this are not reused: well within any server's keep-alive timeout
// (the pool's workers keep 65 s, Node's default is 5 s), so that a GET is rarely written on a
// connection the worker is closing at that very moment (it would be retried, at a cost). A
// shorter `Keep-Alive: timeout=N` from the worker lowers it to N - 1 s. Other methods never
// reuse a connection (retry's rule).
const MAX_IDLE_MS = 2000

class WorkerGoneError extends PoolError {
  constructor (message) { super(codes.WORKER_GONE, message) }
}

class Connection {
  constructor (pool) {
    this.pool = pool
    this.exchange = null
    this.idleSince = 0
    this.maxIdleMs = MAX_IDLE_MS
    this.closed = false
    this.connected = false // the TCP handshake completed: from then on the worker may read what we wrote
    this.badResponse = false
    this.error = null
    this.parser = new ResponseParser(this)
    const socket = this.socket = net.connect({ host: pool.host, port: pool.port })
    socket.setNoDelay(true)
    socket.once('connect', () => {
      this.connected = true
      pool.onConnect()
    })
    socket.on('data', (chunk) => this.onData(chunk))
    socket.on('end', () => this.onEnd())
    socket.on('error', (err) => { this.error = err })
    socket.on('close', () => this.onClose())
  }

  onData (chunk) {
    const exchange = this.exchange
    if (!exchange) return this.socket.destroy() // a worker speaking out of turn
    exchange.received = true
    try {
      this.parser.execute(chunk)
    } catch (err) {
      return this.refuseResponse(err)
    }
    // Everything this read brought is parsed: the exchange passes it on as one piece. (If it
    // completed, it already has, and the connection may carry the next exchange by now.)
    if (this.exchange === exchange) exchange.onReadEnd()
  }

  // The worker closed its side. That ends a response delimited by the close; anything else is
  // cut short (died, or broken_response), not malformed.
  onEnd () {
    if (!this.exchange) return
    try {
      this.parser.end()
    } catch (err) {
      this.socket.destroy(err)
    }
  }

  // Whatever the parser threw, the bytes on this connection can no longer be trusted: drop it.
  // The exchange fails as a bad response even if the throw was not a ResponseParseError.
  refuseResponse (err) {
    this.badResponse = true
    this.socket.destroy(err)
  }

  onClose () {
    this.closed = true
    this.pool.forget(this)
    if (this.exchange) this.exchange.fail(this.error || new Error('the worker closed the connection'))
  }

  // Parser callbacks, forwarded to the current exchange.
  onInterim (head) { this.exchange.handlers.onInterim(head) }
  onHead (head) { this.exchange.onHead(head) }
  onBody (chunk) { this.exchange.onBody(chunk) }
  onComplete (keepAlive) {
    const exchange = this.exchange
    this.exchange = null
    if (keepAlive && !this.closed) this.pool.keep(this)
    else this.socket.destroy()
    exchange.onComplete()
  }

  usable (now) {
    return !this.closed && !this.socket.destroyed && now - this.idleSince < this.maxIdleMs
  }
}

// One request/response. handlers: onInterim(head) (a 1xx), onHead(head), onBody(chunk),
// onReadEnd() (all that one read from the socket brought has been passed on), onEnd(),
// onError(failure, err) with failure (what retry's decide() reads):
//   'refused'          the connection never got established: the worker saw nothing
//   'died'             established, closed or reset before any byte of a response
//   'bad_response'     the worker's bytes are not a valid response (ResponseParseError)
//   'broken_response'  a response (valid so far) broke off midway
// Exactly one of onEnd/onError is called.
class Exchange {
  constructor (connection, handlers) {
    this.connection = connection
    this.handlers = handlers
    this.received = false // some byte of a response came back
    this.state = 'open' // then 'complete' or 'failed'
    this.error = null
  }

  get finished () { return this.state !== 'open' }

  send (method, head, body) {
    const { socket, parser } = this.connection
    parser.expect(method)
    if (body && body.length > 0) {
      socket.cork()
      socket.write(head, 'latin1')
      socket.write(body)
      socket.uncork()
    } else {
      socket.write(head, 'latin1')
    }
  }

  onHead (head) {
    const hint = keepAliveHint(head.rawHeaders)
    if (hint) this.connection.maxIdleMs = Math.min(MAX_IDLE_MS, hint * 1000 - 1000)
    this.handlers.onHead(head)
  }

  onBody (chunk) { this.handlers.onBody(chunk) }

  onReadEnd () { this.handlers.onReadEnd() }

  onComplete () {
    this.state = 'complete'
    this.connection.pool.active.delete(this)
    this.handlers.onEnd()
  }

  fail (err) {
    if (this.finished) return
    this.state = 'failed'
    this.error = err
    this.connection.pool.active.delete(this)
    this.handlers.onError(this.failureOf(err), err)
  }

  failureOf (err) { // eslint-disable-line n/handle-callback-err -- not a callback: it names the failure from the attempt's own state
    if (this.connection.badResponse) return 'bad_response'
    if (this.received) return 'broken_response'
    // The request is written as soon as it is handed over, so once the connection was
    // established the worker may have read it, whatever our write callback says.
    return this.connection.connected ? 'died' : 'refused'
  }

  // Back-pressure while a client falls behind (proxy.js). Only while this exchange owns the
  // connection: a listener left over from it must not resume the next request's reads.
  pause () { if (this.connection.exchange === this) this.connection.socket.pause() }
  resume () { if (this.connection.exchange === this) this.connection.socket.resume() }

  abort (err) { this.connection.socket.destroy(err) }
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
    this.active = new Set()
    this.closed = false
  }

  // Start a request on an idle connection (when `reuse` allows), or a new one.
  request (method, head, body, handlers, { reuse = true } = {}) {
    const now = Date.now()
    let connection
    while (reuse && (connection = this.idle.pop())) {
      if (connection.usable(now)) break
      connection.socket.destroy()
    }
    if (!connection) connection = new Connection(this)
    const exchange = new Exchange(connection, handlers)
    connection.exchange = exchange
    this.active.add(exchange)
    exchange.send(method, head, body)
    return exchange
  }

  keep (connection) {
    if (this.closed || this.idle.length >= this.maxIdle) return connection.socket.destroy()
    connection.idleSince = Date.now()
    // It may have been paused for a slow client; the next exchange must read.
    if (connection.socket.isPaused()) connection.socket.resume()
    this.idle.push(connection)
  }

  forget (connection) {
    const i = this.idle.indexOf(connection)
    if (i >= 0) this.idle.splice(i, 1)
  }

  // The worker is gone: fail what is in flight, close everything.
  destroy (reason) {
    this.closed = true
    for (const connection of this.idle.splice(0)) connection.socket.destroy()
    const err = reason instanceof Error ? reason : new WorkerGoneError(String(reason))
    for (const exchange of [...this.active]) exchange.connection.socket.destroy(err)
  }
}

module.exports = { ConnectionPool, WorkerGoneError, MAX_IDLE_MS }
