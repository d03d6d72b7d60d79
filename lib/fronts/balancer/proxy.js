'use strict'

// One attempt to forward a buffered request to one worker. The response is read whole when it
// fits in `maxResponseBuffer`, so the worker is free the moment it has answered, however slowly
// the client reads. The attempt settles once, with an outcome:
//
//   { type: 'complete', head, body }      the whole response, in memory; the worker is free
//   { type: 'overflow', head, chunks }    the response outgrew the buffer after `chunks`; the
//                                         worker is still sending: call attempt.stream(res, done)
//   { type: 'failed', failure, error }    failure: refused | died | bad_response |
//                                         broken_response (lib/fronts/balancer/retry.js) | timeout
//
// After 'complete' or a failure other than 'timeout', the worker holds nothing of this request.
// After 'overflow' it is free once stream()'s `done` is called. After 'timeout' it is still
// working on the request: call attempt.discard(done), which reads and drops whatever it still
// sends and calls `done` when it has finished (or its connection died), so that a worker given
// up on gets no new request while it is still rendering the old one.

const { PoolError, codes } = require('../../errors')

class ProxyTimeout extends PoolError {
  constructor (ms) { super(codes.PROXY_TIMEOUT, `no answer within ${ms} ms`) }
}

// Where the bytes of the worker's response go: into a buffer, then (after an overflow) to the
// client, or (after a timeout) nowhere. One object that changes mode, not handlers swapped.
class ResponseSink {
  constructor (attempt) {
    this.attempt = attempt
    this.mode = 'buffer' // → 'stream' | 'discard'
    this.head = null
    this.chunks = []
    this.size = 0
    this.res = null
    this.waitingForDrain = false
    this.ended = false // the worker sent its last byte, or the exchange broke
    this.failure = null // how it broke, if it did
    this.done = null // (failure) => void, in stream and discard modes
  }

  onHead (head) {
    this.head = head
    this.attempt.headArrived()
  }

  onBody (chunk) {
    if (this.mode === 'buffer') return this.buffer(chunk)
    if (this.mode === 'stream') return this.write(chunk)
  }

  buffer (chunk) {
    // After an overflow, what is left of the chunk being parsed still lands here; the
    // exchange is paused, so stream() takes over from the next read.
    this.chunks.push(chunk)
    this.size += chunk.length
    if (this.size > this.attempt.maxResponseBuffer) this.attempt.overflowed()
  }

  write (chunk) {
    const res = this.res
    if (res.destroyed) return // the client left: keep reading so the worker frees up
    if (!res.write(chunk) && !this.waitingForDrain) {
      this.waitingForDrain = true
      this.attempt.exchange.pause()
      res.once('drain', () => {
        this.waitingForDrain = false
        this.attempt.exchange.resume()
      })
    }
  }

  onEnd () {
    this.ended = true
    if (this.mode === 'buffer') return this.attempt.completed()
    if (this.mode === 'stream' && !this.res.destroyed) this.res.end()
    this.finish()
  }

  onError (failure, error) {
    this.ended = true
    this.failure = failure
    if (this.mode === 'buffer') return this.attempt.failed(failure, error)
    this.finish()
  }

  // Leave buffer mode. Returns true if the exchange had already ended (and done was called).
  switchTo (mode, done) {
    this.mode = mode
    this.done = done
    if (!this.ended) return false
    if (mode === 'stream' && !this.failure && !this.res.destroyed) this.res.end()
    this.finish()
    return true
  }

  finish () {
    const done = this.done
    this.done = null
    if (done) done(this.failure)
  }
}

class Attempt {
  constructor (record, { method, head, body }, { maxResponseBuffer, proxyTimeout, reuse }, onSettled) {
    this.maxResponseBuffer = maxResponseBuffer
    this.onSettled = onSettled
    this.settled = false
    this.timer = null
    this.sink = new ResponseSink(this)
    this.exchange = record.connections.request(method, head, body, this.sink, { reuse })
    if (proxyTimeout > 0 && !this.settled) {
      this.timer = setTimeout(() => this.timedOut(proxyTimeout), proxyTimeout)
    }
  }

  // The outcome is delivered on a microtask: the balancer's handling never runs inside the
  // response parser's call, whose errors mean "bad bytes from the worker".
  settle (outcome) {
    if (this.settled) return
    this.settled = true
    clearTimeout(this.timer)
    queueMicrotask(() => this.onSettled(outcome))
  }

  headArrived () { clearTimeout(this.timer) }

  completed () {
    const { head, chunks, size } = this.sink
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)
    this.settle({ type: 'complete', head, body })
  }

  overflowed () {
    if (this.settled) return
    this.exchange.pause()
    this.settle({ type: 'overflow', head: this.sink.head, chunks: this.sink.chunks })
  }

  failed (failure, error) { this.settle({ type: 'failed', failure, error }) }

  timedOut (ms) {
    this.sink.mode = 'discard'
    this.settle({ type: 'failed', failure: 'timeout', error: new ProxyTimeout(ms) })
  }

  // After 'overflow': the rest of the response into `res`, with backpressure both ways.
  // done(failure) is called once, when the worker has sent its last byte (failure null) or the
  // exchange broke (bad_response, broken_response).
  stream (res, done) {
    this.sink.res = res
    if (this.sink.switchTo('stream', done)) return
    // A client gone mid-stream must not leave the worker's socket paused forever.
    res.once('close', () => this.exchange.resume())
    this.exchange.resume()
  }

  // After 'timeout' (or an error of the balancer's own): drop what the worker still sends;
  // done() once it is finished with it.
  discard (done) {
    clearTimeout(this.timer)
    if (this.sink.switchTo('discard', done)) return
    this.exchange.resume()
  }
}

// Starts the attempt; `onSettled(outcome)` is called exactly once. Returns the Attempt.
function forward (request, record, options, onSettled) {
  return new Attempt(record, request, options, onSettled)
}

module.exports = { forward, ProxyTimeout }
