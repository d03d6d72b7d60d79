'use strict'

// An incremental, strict parser for the HTTP/1.1 responses of workers, spoken to over plain
// sockets (why: docs/decisions/0013-socket-level-proxy.md). Feed it execute(chunk) and end() (EOF);
// it calls onInterim(head)* (checked 1xx), onHead(head), onBody(chunk)* (de-chunked),
// onComplete(keepAlive), or onUpgrade(head, rest) for a 101 to an upgrade (expect()), then takes
// nothing more. It throws ResponseParseError on anything malformed, and refuses every call after.
// head: { statusCode, statusMessage, rawHeaders (values trimmed), keepAlive (final in onComplete),
//   hasBody (false for HEAD, 204, 304), contentLength (undefined if absent, overridden by
//   Transfer-Encoding, or on a 204), sawContentLength, transferEncoding, dropLength (do not pass
//   Content-Length on) }.
// What passes can go to the client unchanged: llhttp and res.writeHead accept it, and where RFC 9112
// leaves a choice the stricter of llhttp and HAProxy wins (response-parser-diff.test.js):
// - CRLF only: a bare CR or LF in a head, chunk-size or trailer line is refused.
// - status line `HTTP/1.[01] NNN` (100-599), then SP and a reason, or nothing.
// - field lines: token, colon at once, no control characters, no obs-fold.
// - one Content-Length of digits (equal duplicates refused, as llhttp). Transfer-Encoding: no empty
//   element, chunked at most once; chunked last frames the body, else it runs to close. With
//   Content-Length or on HTTP/1.0 it wins and the connection is not reused (RFC 9112 §6.1, §6.3).
// - chunk-size: hex, then only token/quoted-string extensions; trailers as field lines, no framing.
// - bytes after a response are never parsed: keepAlive false, dropped with the connection.

const { PoolError, codes } = require('../../errors')

const MAX_HEAD_BYTES = 64 * 1024
const MAX_CHUNK_LINE_BYTES = 4096
const CRLF = Buffer.from('\r\n')
const HEAD_END = Buffer.from('\r\n\r\n')

// In latin1, "not a control character" is exactly field-content (RFC 9110 §5.5). Sticky (/y)
// expressions read the head line by line.
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

  // Expect a response to `method` (HEAD: no body), one that may be a 101 if `upgrade`.
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

  end () {
    if (this.state === 'eof') return this.complete(false)
    if (this.state !== 'idle') {
      this.state = 'failed'
      throw new ResponseParseError('connection closed before the response was complete')
    }
  }

  get inProgress () { return this.state !== 'idle' }

  // Bytes after the response (a body on HEAD or 204, a short Content-Length) go with the connection.
  complete (moreBytes) {
    if (moreBytes) this.keepAlive = false
    this.state = 'idle'
    this.completed = true
    this.handlers.onComplete(this.keepAlive)
  }

  // Keep an unfinished line for the next chunk. `room`: its longest, terminator excluded, so where
  // the bytes are cut never changes what is refused.
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

  // Body delimiting (RFC 9112 §6.3) and connection reuse.
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
  // TE with Content-Length, or on HTTP/1.0, is how smuggling starts (RFC 9112 §6.1, §6.3): then close.
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

// A tab anywhere in Transfer-Encoding is refused (llhttp and HAProxy read `chunked\t` differently).
function readTransferEncoding (head, raw, value) {
  if (raw.includes('\t')) throw new ResponseParseError(`tab in Transfer-Encoding ${quote(raw)}`)
  head.transferEncoding = head.transferEncoding === undefined ? value : `${head.transferEncoding}, ${value}`
}

// Only the last coding decides (RFC 9112 §6.3).
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

// A 1xx with framing fields (RFC 9110 §8.6, RFC 9112 §6.1) or a close makes the stream ambiguous.
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
  // Framing fields in trailers (RFC 9110 §6.5.1).
  if (name === 'content-length' || name === 'transfer-encoding') throw new ResponseParseError(`${field[1]} in trailers`)
}

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

function quote (text) { return JSON.stringify(text.slice(0, 60)) }

function quoteLine (text, at) {
  const eol = text.indexOf('\r\n', at)
  return quote(text.slice(at, eol < 0 ? text.length : eol))
}

module.exports = { ResponseParser, ResponseParseError, parseHead, MAX_HEAD_BYTES }
