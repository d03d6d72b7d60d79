'use strict'

// Request buffering, nginx-style: the whole body is read from the client before a worker is
// taken, so a client uploading slowly costs the balancer memory, never a worker's time. That
// memory is bounded twice: per request (--max-body), decided from Content-Length before a byte
// is read when the request declares one, and over all requests (--body-budget,
// body-budget.js), on which a body holds its bytes as they arrive: a client that announces a
// large body and sends nothing holds nothing.

const { PoolError, codes } = require('../../errors')

class BodyTooLarge extends PoolError {
  constructor (limit) {
    super(codes.BODY_TOO_LARGE, `request body larger than ${limit} bytes`)
  }
}

class BodyOverBudget extends PoolError {
  constructor () {
    super(codes.BODY_OVER_BUDGET, 'the request bodies held would exceed the body budget')
  }
}

class ClientAborted extends PoolError {
  constructor () {
    super(codes.CLIENT_ABORTED, 'client closed the connection while sending its request')
  }
}

// A request without Content-Length or Transfer-Encoding has no body (RFC 9112 §6.3).
function hasBody (req) {
  const len = req.headers['content-length']
  return (len !== undefined && len !== '0') || req.headers['transfer-encoding'] !== undefined
}

// The body's length as the request declares it, or null (chunked: known only at its end).
// Node's parser has already refused a malformed or conflicting Content-Length, and never hands
// on more body than it declares.
function declaredLength (req) {
  if (req.headers['transfer-encoding'] !== undefined) return null
  const declared = req.headers['content-length']
  return declared === undefined ? 0 : Number(declared)
}

// The body the request announces is over `limit`: refused before a byte of it is read.
function declaredTooLarge (req, limit) {
  const declared = declaredLength(req)
  return declared !== null && declared > limit
}

// Collects a body whose length is declared into one buffer of that length: no list of chunks
// and no copy of them all at the end (which would hold the body twice), and one allocation the
// allocator can hand back whole. The buffer is allocated when the first bytes arrive, never
// for a length only announced, and is not zero-filled: the system gives it memory page by page
// as the bytes are written, so what it costs grows with what was received, which is what its
// hold on the budget counts.
class DeclaredBody {
  constructor (length, hold) {
    this.length = length
    this.hold = hold
    this.buffer = null
    this.size = 0
  }

  add (chunk) {
    if (this.hold && !this.hold.grow(chunk.length)) return new BodyOverBudget()
    if (this.buffer === null && chunk.length === this.length) {
      this.buffer = chunk // all of it in one piece: kept as it is
    } else {
      if (this.buffer === null) this.buffer = Buffer.allocUnsafeSlow(this.length)
      chunk.copy(this.buffer, this.size)
    }
    this.size += chunk.length
    return null
  }

  result () { return this.buffer }
}

// Collects a chunked body, each chunk counted against `limit` (its length is known only at its
// end); as a declared body, held on the budget as it comes.
class ChunkedBody {
  constructor (limit, hold) {
    this.limit = limit
    this.hold = hold
    this.chunks = []
    this.size = 0
  }

  add (chunk) {
    this.size += chunk.length
    if (this.size > this.limit) return new BodyTooLarge(this.limit)
    if (this.hold && !this.hold.grow(chunk.length)) return new BodyOverBudget()
    this.chunks.push(chunk)
    return null
  }

  result () {
    const chunks = this.chunks
    this.chunks = null
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, this.size)
  }
}

// Resolves with the body (a Buffer) of `req`, which has one (hasBody) declared within `limit`
// (declaredTooLarge: judged by the caller before a byte is read); rejects with BodyTooLarge or
// BodyOverBudget (the rest of the body is left unread: answer and close), or ClientAborted.
// `hold`: the request's hold on the body budget, grown by each chunk received.
function readBody (req, { limit, hold = null }) {
  const declared = declaredLength(req)
  const body = declared === null ? new ChunkedBody(limit, hold) : new DeclaredBody(declared, hold)
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      req.removeListener('data', onData)
      req.removeListener('end', onEnd)
      req.removeListener('close', onClose)
      req.removeListener('error', onClose)
    }
    const onData = (chunk) => {
      const refusal = body.add(chunk)
      if (!refusal) return
      cleanup()
      req.pause()
      reject(refusal)
    }
    const onEnd = () => {
      cleanup()
      resolve(body.result())
    }
    const onClose = () => {
      if (req.complete) return // 'end' comes (or came) with the body
      cleanup()
      reject(new ClientAborted())
    }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('close', onClose)
    req.on('error', onClose)
  })
}

module.exports = { readBody, hasBody, declaredLength, declaredTooLarge, BodyTooLarge, BodyOverBudget, ClientAborted }
