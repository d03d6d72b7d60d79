'use strict'

// The pool channel: how a worker and its supervisor talk, framed here for both sides (what the
// messages say is the protocol's). Not Node's 'ipc' channel: the app runs in the worker
// and can write anything to any fd it has, and Node's channel parser throws in the parent on bytes
// that are not JSON and buffers a line without end in full. This one is an extra stdio pipe (on
// Unix a socketpair, so one fd carries both directions) at fd CHANNEL_FD in the worker, named
// by $POOL_CHANNEL_FD, carrying newline-delimited JSON frames of at most MAX_FRAME bytes. What
// breaks the framing (a frame that is not JSON, or too long) is reported once, never thrown,
// and the reader then drops everything: it never holds more than MAX_FRAME bytes plus one read.

const net = require('node:net')

const CHANNEL_FD = 3
const CHANNEL_ENV = 'POOL_CHANNEL_FD'
const MAX_FRAME = 1024 * 1024 // bytes, newline included; a pool message is a few hundred
const NEWLINE = 0x0a
const PREVIEW = 60 // characters of a bad frame quoted in the report

// One message as a frame. JSON.stringify escapes every newline inside strings, so the only
// newline is the frame's end.
function encode (message) {
  const frame = JSON.stringify(message) + '\n'
  const size = Buffer.byteLength(frame)
  if (size > MAX_FRAME) {
    throw new Error(`a ${message?.type} message of ${size} bytes exceeds the pool channel's ${MAX_FRAME}-byte frame ` +
      'limit')
  }
  return frame
}

// Splits a byte stream into parsed frames. onFrame(value) for each; onError(problem) once, at
// the first frame that is not JSON or exceeds maxFrame, after which every byte is dropped.
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

// Reads `stream`'s frames: onMessage(value) for each, onError(problem) once when the framing
// breaks. From then on what comes is read and dropped (the peer is about to be dealt with), so
// that the stream still ends when the peer does. A channel errors (ECONNRESET, EPIPE) only as its
// peer goes, and its 'close' follows: no error of it may escape as an uncaught exception.
function readFrames (stream, { onMessage, onError }) {
  const reader = new FrameReader({ onFrame: onMessage, onError })
  stream.on('data', (chunk) => { if (!reader.broken) reader.push(chunk) })
  stream.on('error', () => {})
  return reader
}

// Writes `message` as a frame; false when the channel is gone. `done` (optional) is called once
// the frame is handed to the system, or the write failed.
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
