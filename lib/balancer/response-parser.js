'use strict'

// An incremental, strict parser for the HTTP/1.1 responses a worker sends back. The balancer
// talks to its workers over plain keep-alive sockets rather than http.request or http-proxy:
// measured on the same run, a 0 ms request through a minimal http.request proxy took 0.50-0.57
// ms against 0.31-0.36 ms through a socket-based one; at ρ 0.8 the balancer built on
// http.request held each worker 2.0-2.1 ms past its service time, this one 1.6 ms (runs a few
// minutes apart on a shared 2-CPU machine). http-proxy adds another
// ~0.6 ms (the `http-proxy` row of bench/results/balancer.md). It also tells exactly whether a
// request was written when a connection fails, which decides whether it may be redispatched.
//
// Feed it with execute(chunk) and end() (at EOF); it calls, in order:
//   onHead({ statusCode, statusMessage, rawHeaders, keepAlive, hasBody, contentLength })
//   onBody(chunk)*          the body, de-chunked
//   onComplete(keepAlive)   the response is over; keepAlive: the socket may carry another
// and throws a ResponseParseError on anything malformed. 1xx interim responses are skipped.

const MAX_HEAD_BYTES = 64 * 1024
const MAX_CHUNK_LINE_BYTES = 4096
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/
const CRLF = Buffer.from('\r\n')
const HEAD_END = Buffer.from('\r\n\r\n')

class ResponseParseError extends Error {
  constructor (message) {
    super(`malformed response from worker: ${message}`)
    this.code = 'RESPONSE_PARSE'
  }
}

class ResponseParser {
  constructor (handlers) {
    this.handlers = handlers
    this.state = 'idle'
  }

  // Expect a response to a request with this method (a HEAD response has no body).
  expect (method) {
    this.state = 'head'
    this.isHead = method === 'HEAD'
    this.pending = null // bytes of an unfinished head or chunk-size line
    this.remaining = 0
    this.keepAlive = false
  }

  execute (chunk) {
    let data = this.pending ? Buffer.concat([this.pending, chunk]) : chunk
    this.pending = null
    let at = 0
    while (at < data.length) {
      switch (this.state) {
        case 'head': at = this.readHead(data, at); break
        case 'length': at = this.readBody(data, at, 'done'); break
        case 'chunk-size': at = this.readChunkSize(data, at); break
        case 'chunk-data': at = this.readBody(data, at, 'chunk-end'); break
        case 'chunk-end': at = this.readChunkEnd(data, at); break
        case 'trailers': at = this.readTrailers(data, at); break
        case 'eof':
          this.handlers.onBody(at === 0 ? data : data.subarray(at))
          at = data.length
          break
        case 'done':
        case 'idle':
          // Bytes nobody asked for: the connection can no longer be trusted.
          throw new ResponseParseError('data after the end of the response')
      }
      if (this.pending) return
      if (this.state === 'done') this.complete()
    }
    data = null
  }

  // The worker closed its side.
  end () {
    if (this.state === 'eof') {
      this.keepAlive = false
      this.state = 'done'
      this.complete()
      return
    }
    if (this.state !== 'idle') throw new ResponseParseError('connection closed before the response was complete')
  }

  get inProgress () { return this.state !== 'idle' }

  complete () {
    this.state = 'idle'
    this.handlers.onComplete(this.keepAlive)
  }

  // Keep unparsed bytes for the next chunk, within a bound.
  stash (data, at, limit, what) {
    if (data.length - at > limit) throw new ResponseParseError(`${what} longer than ${limit} bytes`)
    this.pending = data.subarray(at)
    return data.length
  }

  readHead (data, at) {
    const end = data.indexOf(HEAD_END, at)
    if (end < 0) return this.stash(data, at, MAX_HEAD_BYTES, 'header section')
    if (end - at > MAX_HEAD_BYTES) throw new ResponseParseError(`header section longer than ${MAX_HEAD_BYTES} bytes`)
    const head = parseHead(data.toString('latin1', at, end))
    const next = end + 4
    if (head.statusCode < 200) {
      if (head.statusCode === 101) throw new ResponseParseError('protocol upgrade is not supported')
      return next // 100 Continue, 103 Early Hints: the real response follows
    }
    this.frame(head)
    this.handlers.onHead(head)
    return next
  }

  // Decide how the body is delimited (RFC 9112 §6.3).
  frame (head) {
    const noBody = this.isHead || head.statusCode === 204 || head.statusCode === 304
    this.keepAlive = head.keepAlive
    head.hasBody = !noBody
    if (noBody) { this.state = 'done'; return }
    if (head.transferEncoding !== undefined) {
      // Transfer-Encoding overrides Content-Length; only chunked has a known end.
      const codings = head.transferEncoding.toLowerCase().split(',').map((s) => s.trim())
      head.contentLength = undefined
      if (codings[codings.length - 1] === 'chunked') {
        this.state = 'chunk-size'
        if (head.sawContentLength) this.keepAlive = false
        return
      }
      this.state = 'eof'
      this.keepAlive = false
      return
    }
    if (head.contentLength !== undefined) {
      this.remaining = head.contentLength
      this.state = this.remaining === 0 ? 'done' : 'length'
      return
    }
    this.state = 'eof'
    this.keepAlive = false
  }

  readBody (data, at, next) {
    const n = Math.min(this.remaining, data.length - at)
    this.handlers.onBody(at === 0 && n === data.length ? data : data.subarray(at, at + n))
    this.remaining -= n
    if (this.remaining === 0) this.state = next
    return at + n
  }

  readChunkSize (data, at) {
    const eol = data.indexOf(CRLF, at)
    if (eol < 0) return this.stash(data, at, MAX_CHUNK_LINE_BYTES, 'chunk-size line')
    const line = data.toString('latin1', at, eol)
    const m = /^([0-9A-Fa-f]{1,12})[ \t]*(;.*)?$/.exec(line)
    if (!m) throw new ResponseParseError(`bad chunk size ${JSON.stringify(line.slice(0, 40))}`)
    this.remaining = parseInt(m[1], 16)
    this.state = this.remaining === 0 ? 'trailers' : 'chunk-data'
    return eol + 2
  }

  readChunkEnd (data, at) {
    if (data.length - at < 2) return this.stash(data, at, 2, 'chunk end')
    if (data[at] !== 13 || data[at + 1] !== 10) throw new ResponseParseError('chunk not followed by CRLF')
    this.state = 'chunk-size'
    return at + 2
  }

  // Trailer fields are read and dropped; an empty line ends the message.
  readTrailers (data, at) {
    const eol = data.indexOf(CRLF, at)
    if (eol < 0) return this.stash(data, at, MAX_HEAD_BYTES, 'trailer section')
    if (eol === at) this.state = 'done'
    return eol + 2
  }
}

function parseHead (text) {
  const lines = text.split('\r\n')
  const status = STATUS_LINE.exec(lines[0])
  if (!status) throw new ResponseParseError(`bad status line ${JSON.stringify(lines[0].slice(0, 60))}`)
  const head = {
    statusCode: Number(status[2]),
    statusMessage: status[3] || '',
    rawHeaders: [],
    keepAlive: status[1] === '1',
    contentLength: undefined,
    sawContentLength: false,
    transferEncoding: undefined,
    hasBody: true
  }
  let connection = ''
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]
    const colon = line.indexOf(':')
    const name = colon > 0 ? line.slice(0, colon) : ''
    if (!TOKEN.test(name)) throw new ResponseParseError(`bad header line ${JSON.stringify(line.slice(0, 60))}`)
    const value = line.slice(colon + 1).trim()
    head.rawHeaders.push(name, value)
    switch (name.length) { // cheap pre-filter before the case-insensitive comparisons
      case 10: if (name.toLowerCase() === 'connection') connection += ',' + value.toLowerCase(); break
      case 14:
        if (name.toLowerCase() === 'content-length') {
          if (!/^\d{1,15}$/.test(value)) throw new ResponseParseError(`bad Content-Length ${JSON.stringify(value)}`)
          const n = Number(value)
          if (head.sawContentLength && n !== head.contentLength) throw new ResponseParseError('conflicting Content-Length headers')
          head.contentLength = n
          head.sawContentLength = true
        }
        break
      case 17:
        if (name.toLowerCase() === 'transfer-encoding') head.transferEncoding = head.transferEncoding === undefined ? value : `${head.transferEncoding}, ${value}`
        break
    }
  }
  if (connection) {
    const tokens = connection.split(',').map((s) => s.trim())
    if (tokens.includes('close')) head.keepAlive = false
    else if (tokens.includes('keep-alive')) head.keepAlive = true
  }
  return head
}

module.exports = { ResponseParser, ResponseParseError, parseHead, MAX_HEAD_BYTES }
