'use strict'

// One attempt to forward a buffered request to one worker. The response is read whole when it
// fits in `maxResponseBuffer`, so the worker is free the moment it has answered, however slowly
// the client reads. The outcome says how far the attempt got, which decides whether it may be
// retried:
//
//   { type: 'complete', head, body }      the whole response, in memory
//   { type: 'overflow', head, chunks, exchange }
//                                         the response outgrew the buffer after `chunks`; the
//                                         exchange is paused and must be streamed (streamTo)
//   { type: 'error', stage, error }       stage 'connect': the request was not written
//                                         (refused, reset before the write): safe elsewhere.
//                                         'sent': written, no response byte came back.
//                                         'response': the response broke off midway.
//                                         'timeout': no answer within proxyTimeout.

class ProxyTimeout extends Error {
  constructor (ms) { super(`no answer within ${ms} ms`); this.code = 'PROXY_TIMEOUT' }
}

function forward ({ method, head, body }, record, { maxResponseBuffer, proxyTimeout }) {
  return new Promise((resolve) => {
    let settled = false
    let timer = null
    let timedOut = false
    let responseHead = null
    const chunks = []
    let size = 0
    const settle = (outcome) => {
      if (settled) return
      settled = true
      if (timer) clearTimeout(timer)
      resolve(outcome)
    }
    const exchange = record.connections.request(method, head, body, {
      onHead (h) {
        responseHead = h
        if (timer) { clearTimeout(timer); timer = null }
      },
      onBody (chunk) {
        // After an overflow, what is left of the chunk being parsed still lands here; the
        // socket is paused, so streamTo() takes over from the next read.
        chunks.push(chunk)
        size += chunk.length
        if (size > maxResponseBuffer && !settled) {
          exchange.pause()
          settle({ type: 'overflow', head: responseHead, chunks, exchange })
        }
      },
      onEnd () {
        const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)
        settle({ type: 'complete', head: responseHead, body })
      },
      onError (stage, error) {
        settle({ type: 'error', stage: timedOut ? 'timeout' : stage, error })
      }
    })
    if (proxyTimeout > 0) {
      timer = setTimeout(() => {
        timedOut = true
        exchange.abort(new ProxyTimeout(proxyTimeout))
      }, proxyTimeout)
    }
  })
}

// Stream the rest of an overflowing response into `res`, with backpressure both ways.
// done(error) is called once, when the worker has sent its last byte or the exchange broke.
function streamTo (exchange, res, done) {
  let finished = false
  const finish = (err) => {
    if (finished) return
    finished = true
    done(err)
  }
  exchange.handlers = {
    onHead () {},
    onBody (chunk) {
      if (res.destroyed) return // the client left: keep reading so the worker frees up
      if (!res.write(chunk)) {
        exchange.pause()
        res.once('drain', () => exchange.resume())
      }
    },
    onEnd () {
      if (!res.destroyed) res.end()
      finish(null)
    },
    onError (stage, error) { finish(error) }
  }
  // The response may have ended (or broken) in the very read that overflowed the buffer.
  if (exchange.state === 'complete') return exchange.handlers.onEnd()
  if (exchange.state === 'failed') return finish(exchange.error)
  // A client gone mid-stream must not leave the worker's socket paused forever.
  res.once('close', () => exchange.resume())
  exchange.resume()
}

module.exports = { forward, streamTo, ProxyTimeout }
