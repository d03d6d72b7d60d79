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
//   onInterim(head)*        each 1xx interim response (103 Early Hints), once checked, to
//                           handlers that have it: one with framing fields, closing the
//                           connection or upgrading it is refused
//   onHead(head)            the final response's head
//   onBody(chunk)*          the body, de-chunked
//   onComplete(keepAlive)   the response is over; keepAlive: the socket may carry another.
//                           The parser's word: `completed` and `keepAlive` say the same to the
//                           connection that reads it, which decides on reuse
//   onUpgrade(head, rest)   instead of onHead, for a request that asked to upgrade (expect()):
//                           a 101; `rest` is what followed its head, in the new protocol, and
//                           the parser takes nothing more
// and throws a ResponseParseError on anything malformed; after that it refuses every call.
//
// head: { statusCode, statusMessage, rawHeaders: [name, value, ...] (the worker's spelling,
//   values without surrounding whitespace), keepAlive (as known once the head is read; the
//   onComplete argument is final), hasBody (false for HEAD, 204, 304), contentLength (the
//   Content-Length value; undefined if there is none, if Transfer-Encoding overrides it, or on
//   a 204; kept for HEAD and 304, where it tells the size a GET would have), sawContentLength,
//   transferEncoding (the joined values, or undefined), dropLength (true: the worker's
//   Content-Length must not be passed on, on a 204 or overridden by Transfer-Encoding) }
//
// What passes is what the balancer can hand to the client unchanged: everything here is also
// accepted by Node's own parser (llhttp) and by res.writeHead, and where RFC 9112 leaves a
// choice the stricter of llhttp and HAProxy is followed
// (test/fronts/balancer/response-parser-diff.test.js compares it with llhttp on generated
// responses):
// - lines end in CRLF; a bare CR or LF anywhere in a head, chunk-size or trailer line is refused
//   (llhttp refuses them too; HAProxy takes a bare LF as a line end).
// - status line: `HTTP/1.0` or `HTTP/1.1`, one SP, a code 100-599, then SP and a reason of
//   HTAB / SP / VCHAR / obs-text, or nothing at all (`HTTP/1.1 200` is taken, as both do).
// - field lines: a token, a colon at once (no whitespace before it), a value of HTAB / SP /
//   VCHAR / obs-text; no NUL, DEL or other control character; no obs-fold.
// - Content-Length: digits only, one field (even two equal ones, or `5, 5`, are refused, as
//   llhttp does; HAProxy would merge equal ones). Transfer-Encoding: no empty element, chunked
//   at most once (as HAProxy); chunked last frames the body, any other last coding means the
//   body runs until the worker closes (as both do for a response). With Content-Length too,
//   or on HTTP/1.0, Transfer-Encoding wins and the connection is not reused (RFC 9112 §6.1,
//   §6.3; HAProxy does the same, llhttp refuses the pair).
// - chunk-size lines: hex digits, then only `;name` or `;name=value` extensions (token or
//   quoted-string), no whitespace (llhttp); trailer lines as field lines, and no
//   Content-Length or Transfer-Encoding among them.
// - bytes after the end of a response are never parsed: the response completes with
//   keepAlive false and they go with the connection (HAProxy drops such a server connection).

const { PoolError, codes } = require('../../errors')

const MAX_HEAD_BYTES = 64 * 1024
const MAX_CHUNK_LINE_BYTES = 4096
const CRLF = Buffer.from('\r\n')
const HEAD_END = Buffer.from('\r\n\r\n')

// In a latin1 string every character is at most \xff, so "not a control character" is exactly
// the field-content alphabet (RFC 9110 §5.5): HTAB, SP, VCHAR, obs-text. The head is read line
// by line with sticky (/y) expressions, each line ending in CRLF or at the end of the head.
const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+"
const STATUS_LINE = /HTTP\/1\.([01]) ([1-5]\d\d)(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?(?:\r\n|$)/y
// The value group starts on a non-blank so that the leading blanks are matched one way only.
const FIELD_LINE = new RegExp(`(${TOKEN}):[\\t ]*((?:[^\\x00-\\x20\\x7f][^\\x00-\\x08\\x0a-\\x1f\\x7f]*)?)(?:\\r\\n|$)`,
  'y')
const CONTENT_LENGTH = /^\d{1,15} *$/
const QUOTED_STRING = '"(?:[\\t !#-\\[\\]-~\\x80-\\xff]|\\\\[\\t -~\\x80-\\xff])*"'
const CHUNK_LINE = new RegExp(`^([0-9A-Fa-f]{1,12})(?:;${TOKEN}(?:=(?:${TOKEN}|${QUOTED_STRING}))?)*$`)

class ResponseParseError extends PoolError {
  constructor (message) {
    super(codes.BAD_RESPONSE, `malformed response from worker: ${message}`)
  }
}

class ResponseParser {
  constructor (handlers) {
    this.handlers = handlers
    this.state = 'idle'
  }

  // Expect a response to a request with this method (a HEAD response has no body), and one that
  // may switch protocols when the request asked to `upgrade`.
  expect (method, upgrade = false) {
    this.state = 'head'
    this.isHead = method === 'HEAD'
    this.upgrade = upgrade
    this.pending = null // bytes of an unfinished head, chunk-size or trailer line
    this.remaining = 0
    this.trailerBytes = 0
    this.keepAlive = false
    this.completed = false // a whole response was read (until the next expect())
    this.head = null // the final response's head, once read
  }

  execute (chunk) {
    const data = this.pending ? Buffer.concat([this.pending, chunk]) : chunk
    this.pending = null
    let at = 0
    try {
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
          case 'failed': throw new ResponseParseError('data after a malformed response')
          case 'upgraded': throw new ResponseParseError('data after a protocol upgrade')
          default: // 'idle': bytes nobody asked for, the connection can no longer be trusted
            throw new ResponseParseError('data when no response was expected')
        }
        if (this.pending || this.state === 'upgraded') return
        if (this.state === 'done') return this.complete(at < data.length)
      }
    } catch (err) {
      this.state = 'failed'
      this.pending = null
      throw err
    }
  }

  // The worker closed its side.
  end () {
    if (this.state === 'eof') return this.complete(false)
    if (this.state !== 'idle') {
      this.state = 'failed'
      throw new ResponseParseError('connection closed before the response was complete')
    }
  }

  get inProgress () { return this.state !== 'idle' }

  // Bytes after the end of the response (a body sent with a HEAD or 204 answer, a
  // Content-Length shorter than the body...) are never read as the next response: they are
  // dropped with the connection.
  complete (moreBytes) {
    if (moreBytes) this.keepAlive = false
    this.state = 'idle'
    this.completed = true
    this.handlers.onComplete(this.keepAlive)
  }

  // Keep the bytes of an unfinished line or head for the next chunk. `room`: how long the
  // finished one may be, without its terminator (of which all but the last byte may be here
  // already); so where the bytes are cut never changes what is refused.
  stash (data, at, room, terminator, what) {
    if (data.length - at > room + terminator - 1) throw new ResponseParseError(`${what} too long`)
    this.pending = data.subarray(at)
    return data.length
  }

  readHead (data, at) {
    const end = data.indexOf(HEAD_END, at)
    if (end < 0) return this.stash(data, at, MAX_HEAD_BYTES, 4, 'header section')
    if (end - at > MAX_HEAD_BYTES) throw new ResponseParseError('header section too long')
    const head = parseHead(data.toString('latin1', at, end))
    const next = end + 4
    if (head.statusCode === 101 && this.upgrade) {
      this.state = 'upgraded'
      this.handlers.onUpgrade(head, data.subarray(next))
      return data.length
    }
    if (head.statusCode < 200) {
      checkInterim(head)
      if (this.handlers.onInterim) this.handlers.onInterim(head)
      return next // 100 Continue, 103 Early Hints: the real response follows
    }
    this.frame(head)
    this.head = head
    this.handlers.onHead(head)
    return next
  }

  // Decide how the body is delimited (RFC 9112 §6.3) and whether the connection may be reused.
  frame (head) {
    const { statusCode } = head
    let keepAlive = head.keepAlive
    let state = 'eof'
    if (head.transferEncoding !== undefined) {
      if (lastCodingIsChunked(head.transferEncoding)) state = 'chunk-size'
      head.contentLength = undefined
      head.dropLength = true
    } else if (head.contentLength !== undefined) {
      state = head.contentLength === 0 ? 'done' : 'length'
    }
    if (statusCode === 204) {
      // A 204 that announces a body: what follows it must not be read as the next response.
      if (head.transferEncoding !== undefined || head.contentLength > 0) keepAlive = false
      head.contentLength = undefined
      head.dropLength = true // RFC 9110 §8.6: never sent with a 204
    }
    head.hasBody = !(this.isHead || statusCode === 204 || statusCode === 304)
    if (!head.hasBody) state = 'done'
    else if (state === 'eof') keepAlive = false
    this.remaining = head.contentLength || 0
    this.state = state
    head.keepAlive = this.keepAlive = keepAlive
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
    if (eol < 0) return this.stash(data, at, MAX_CHUNK_LINE_BYTES, 2, 'chunk-size line')
    if (eol - at > MAX_CHUNK_LINE_BYTES) throw new ResponseParseError('chunk-size line too long')
    const line = data.toString('latin1', at, eol)
    const m = CHUNK_LINE.exec(line)
    if (!m) throw new ResponseParseError(`bad chunk-size line ${quote(line)}`)
    this.remaining = parseInt(m[1], 16)
    this.state = this.remaining === 0 ? 'trailers' : 'chunk-data'
    return eol + 2
  }

  readChunkEnd (data, at) {
    if (data.length - at < 2) return this.stash(data, at, 0, 2, 'chunk end')
    if (data[at] !== 13 || data[at + 1] !== 10) throw new ResponseParseError('chunk not followed by CRLF')
    this.state = 'chunk-size'
    return at + 2
  }

  // Trailer fields are checked and dropped; an empty line ends the message.
  readTrailers (data, at) {
    const eol = data.indexOf(CRLF, at)
    if (eol < 0) return this.stash(data, at, MAX_HEAD_BYTES - this.trailerBytes, 2, 'trailer section')
    if (eol === at) {
      this.state = 'done'
      return eol + 2
    }
    this.trailerBytes += eol - at
    if (this.trailerBytes > MAX_HEAD_BYTES) throw new ResponseParseError('trailer section too long')
    checkTrailerLine(data.toString('latin1', at, eol))
    return eol + 2
  }
}

// The head without its final CRLFCRLF, as latin1 text: one character per byte.
function parseHead (text) {
  STATUS_LINE.lastIndex = 0
  const status = STATUS_LINE.exec(text)
  if (!status) throw new ResponseParseError(`bad status line ${quoteLine(text, 0)}`)
  const head = {
    statusCode: Number(status[2]),
    statusMessage: status[3] || '',
    rawHeaders: [],
    keepAlive: status[1] === '1',
    hasBody: true,
    contentLength: undefined,
    sawContentLength: false,
    transferEncoding: undefined,
    dropLength: false
  }
  let connection = ''
  for (let at = STATUS_LINE.lastIndex; at < text.length; at = FIELD_LINE.lastIndex) {
    FIELD_LINE.lastIndex = at
    const field = FIELD_LINE.exec(text)
    if (!field) throw new ResponseParseError(`bad header line ${quoteLine(text, at)}`)
    const name = field[1]
    const value = trimTrailingBlanks(field[2])
    head.rawHeaders.push(name, value)
    switch (name.length) { // cheap pre-filter before the case-insensitive comparisons
      case 10: if (name.toLowerCase() === 'connection') connection += ',' + value; break
      case 14: if (name.toLowerCase() === 'content-length') readContentLength(head, field[2]); break
      case 17: if (name.toLowerCase() === 'transfer-encoding') readTransferEncoding(head, field[2], value); break
    }
  }
  if (connection) {
    const tokens = listElements(connection)
    if (tokens.includes('close')) head.keepAlive = false
    else if (tokens.includes('keep-alive')) head.keepAlive = true
  }
  // RFC 9112 §6.1, §6.3: Transfer-Encoding with Content-Length, or in an HTTP/1.0 message, is
  // how request smuggling and response splitting start: read this one, then close.
  if (head.transferEncoding !== undefined && (head.sawContentLength || status[1] === '0')) head.keepAlive = false
  return head
}

// `raw` still has its trailing blanks: llhttp takes spaces after the digits but not a tab.
function readContentLength (head, raw) {
  if (head.sawContentLength) throw new ResponseParseError('more than one Content-Length')
  if (!CONTENT_LENGTH.test(raw)) throw new ResponseParseError(`bad Content-Length ${quote(raw)}`)
  head.contentLength = parseInt(raw, 10)
  head.sawContentLength = true
}

// llhttp does not take `chunked` followed by a tab as chunked, HAProxy does: a tab anywhere in
// the value is refused rather than read one way or the other.
function readTransferEncoding (head, raw, value) {
  if (raw.includes('\t')) throw new ResponseParseError(`tab in Transfer-Encoding ${quote(raw)}`)
  head.transferEncoding = head.transferEncoding === undefined ? value : `${head.transferEncoding}, ${value}`
}

// Only the last transfer coding decides (RFC 9112 §6.3): the body of a response whose last
// coding is not chunked runs until the connection closes.
function lastCodingIsChunked (transferEncoding) {
  const codings = listElements(transferEncoding)
  let chunked = 0
  for (const coding of codings) {
    if (coding === '') throw new ResponseParseError(`empty transfer coding in ${quote(transferEncoding)}`)
    if (coding === 'chunked') chunked++
  }
  if (chunked > 1) throw new ResponseParseError('chunked applied more than once')
  return codings[codings.length - 1] === 'chunked'
}

// A 1xx response has no body and is followed by the final one on the same connection (RFC
// 9110 §15.2): framing fields on it (which RFC 9110 §8.6 and RFC 9112 §6.1 forbid) or a close
// (which llhttp then applies) make the rest of the stream ambiguous.
function checkInterim (head) {
  if (head.statusCode === 101) throw new ResponseParseError('a 101 to a request that asked for no upgrade')
  if (head.sawContentLength || head.transferEncoding !== undefined) {
    throw new ResponseParseError(`Content-Length or Transfer-Encoding in a ${head.statusCode} response`)
  }
  if (!head.keepAlive) throw new ResponseParseError(`a ${head.statusCode} response that closes the connection`)
}

function checkTrailerLine (line) {
  FIELD_LINE.lastIndex = 0
  const field = FIELD_LINE.exec(line)
  if (!field) throw new ResponseParseError(`bad trailer line ${quote(line)}`)
  const name = field[1].toLowerCase()
  // Framing fields in trailers (RFC 9110 §6.5.1) could only confuse a later reader.
  if (name === 'content-length' || name === 'transfer-encoding') throw new ResponseParseError(`${field[1]} in trailers`)
}

// A comma-separated list, lowercased, its elements without surrounding blanks.
function listElements (value) {
  return value.toLowerCase().split(',').map(trimBlanks)
}

function trimBlanks (s) {
  let start = 0
  while (start < s.length && isBlank(s.charCodeAt(start))) start++
  return trimTrailingBlanks(start === 0 ? s : s.slice(start))
}

// Only SP and HTAB: String#trim would also take obs-text such as \xa0 off a value.
function trimTrailingBlanks (s) {
  let end = s.length
  while (end > 0 && isBlank(s.charCodeAt(end - 1))) end--
  return end === s.length ? s : s.slice(0, end)
}

function isBlank (c) { return c === 32 || c === 9 }

// For error messages: the start of the offending text, control characters escaped.
function quote (text) { return JSON.stringify(text.slice(0, 60)) }

function quoteLine (text, at) {
  const eol = text.indexOf('\r\n', at)
  return quote(text.slice(at, eol < 0 ? text.length : eol))
}

module.exports = { ResponseParser, ResponseParseError, parseHead, MAX_HEAD_BYTES }
