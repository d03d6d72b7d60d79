'use strict'

// Request buffering, nginx-style: the whole body is read from the client before a worker is
// taken, so a client uploading slowly costs the balancer memory, never a worker's time.

const { PoolError, codes } = require('../errors')

class BodyTooLarge extends PoolError {
  constructor (limit) {
    super(codes.BODY_TOO_LARGE, `request body larger than ${limit} bytes`)
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

// The body the request announces is over `limit`: refused before a byte of it is read.
function declaredTooLarge (req, limit) {
  const declared = req.headers['content-length']
  return declared !== undefined && Number(declared) > limit
}

// Resolves with the body (a Buffer, or null when the request has none); rejects with
// BodyTooLarge (the rest of the body is left unread: answer and close) or ClientAborted.
function readBody (req, limit) {
  if (!hasBody(req)) return Promise.resolve(null)
  if (declaredTooLarge(req, limit)) return Promise.reject(new BodyTooLarge(limit))
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    const cleanup = () => {
      req.removeListener('data', onData)
      req.removeListener('end', onEnd)
      req.removeListener('close', onClose)
      req.removeListener('error', onClose)
    }
    const onData = (chunk) => {
      size += chunk.length
      if (size > limit) {
        cleanup()
        req.pause()
        reject(new BodyTooLarge(limit))
        return
      }
      chunks.push(chunk)
    }
    const onEnd = () => {
      cleanup()
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size))
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

module.exports = { readBody, hasBody, declaredTooLarge, BodyTooLarge, ClientAborted }
