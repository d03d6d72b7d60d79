'use strict'

// The pool channel's framing (docs/decisions/0014-worker-channel.md): newline-delimited JSON of at most
// MAX_FRAME bytes over a socketpair at fd CHANNEL_FD ($POOL_CHANNEL_FD), not Node's 'ipc'. Broken framing
// is reported once, never thrown, and all after it dropped.

const net = require('node:net')

const CHANNEL_FD = 3
const CHANNEL_ENV = 'POOL_CHANNEL_FD'
const MAX_FRAME = 1024 * 1024 // bytes, newline included; a pool message is a few hundred
const NEWLINE = 0x0a
const PREVIEW = 60 // characters of a bad frame quoted in the report

// JSON.stringify escapes newlines in strings: the only one is the frame's end.
function encode (message) {
  const frame = JSON.stringify(message) + '\n'
  const size = Buffer.byteLength(frame)
  if (size > MAX_FRAME) {
    throw new Error(`a ${message?.type} message of ${size} bytes exceeds the pool channel's ${MAX_FRAME}-byte frame ` +
      'limit')
  }
  return frame
}

// onFrame(value) for each; onError(problem) once, at the first bad frame, after which all is dropped.
class FrameReader {
  constructor ({ onFrame, onError, maxFrame = MAX_FRAME }) {
    this.onFrame = onFrame
    this.onError = onError
    this.maxFrame = maxFrame
    this.parts = [] // an unfinished frame's bytes (copies: a read's buffer is not kept alive)
    this.size = 0
    this.broken = false
  }

  push (chunk) {
    let start = 0
    while (!this.broken) {
      const end = chunk.indexOf(NEWLINE, start)
      const piece = chunk.subarray(start, end === -1 ? chunk.length : end)
      if (this.size + piece.length + 1 > this.maxFrame) return this.fail(`a frame longer than ${this.maxFrame} bytes`)
      if (end === -1) {
        if (piece.length > 0) this.parts.push(Buffer.from(piece))
        this.size += piece.length
        return
      }
      const frame = this.size === 0 ? piece : Buffer.concat([...this.parts, piece])
      this.parts = []
      this.size = 0
      start = end + 1
      this.deliver(frame)
    }
  }

  deliver (frame) {
    const text = frame.toString('utf8')
    let value
    try {
      value = JSON.parse(text)
    } catch {
      return this.fail('a frame that is not ' +
        `JSON: ${JSON.stringify(text.slice(0, PREVIEW))}${text.length > PREVIEW ? '…' : ''}`)
    }
    this.onFrame(value)
  }

  fail (problem) {
    this.broken = true
    this.parts = []
    this.size = 0
    this.onError(problem)
  }
}

// onMessage(value) for each, onError(problem) once; then read and dropped, so the stream still ends.
// Its errors (ECONNRESET, EPIPE: the peer went) are swallowed; 'close' follows.
function readFrames (stream, { onMessage, onError }) {
  const reader = new FrameReader({ onFrame: onMessage, onError })
  stream.on('data', (chunk) => { if (!reader.broken) reader.push(chunk) })
  stream.on('error', () => {})
  return reader
}

// False when the channel is gone. `done()` once the frame is handed to the system, or the write failed.
function sendFrame (stream, message, done) {
  if (!stream || stream.destroyed || !stream.writable) return false
  stream.write(encode(message), done)
  return true
}

// The supervisor's end of a worker's channel (null for a process forked without one).
function supervisorEnd (child) {
  return child.stdio?.[CHANNEL_FD] ?? null
}

// The worker's end, or null when this process was not forked by a pool.
function workerEnd (env = process.env) {
  const fd = Number(env[CHANNEL_ENV])
  if (!Number.isInteger(fd) || fd < 0) return null
  let socket
  try {
    socket = new net.Socket({ fd, readable: true, writable: true })
  } catch {
    return null // the fd is not open or not a pipe: run as if unsupervised
  }
  return socket
}

module.exports = {
  CHANNEL_FD,
  CHANNEL_ENV,
  MAX_FRAME,
  encode,
  FrameReader,
  readFrames,
  sendFrame,
  supervisorEnd,
  workerEnd
}
