'use strict'

// Seeded generation of HTTP/1.1 responses as a worker might send them, and of mutations of
// them, for test/fronts/balancer/response-parser-diff.test.js. Everything is a latin1 string (one
// character per byte) until the caller makes a Buffer of it. Case `i` of seed `s` is always the
// same.

// xorshift32, seeded through a 32-bit mix so that neighbouring seeds diverge at once.
function prng (seed) {
  let x = mix32(seed) || 1
  return function next () {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) / 4294967296
  }
}

function mix32 (n) {
  n = Math.imul(n ^ (n >>> 16), 0x45d9f3b)
  n = Math.imul(n ^ (n >>> 16), 0x45d9f3b)
  return (n ^ (n >>> 16)) >>> 0
}

function caseRng (seed, index) { return prng(mix32(seed) ^ mix32(index + 0x9e3779b9)) }

const int = (rng, lo, hi) => lo + Math.floor(rng() * (hi - lo + 1)) // inclusive
const pick = (rng, xs) => xs[Math.floor(rng() * xs.length)]
const chance = (rng, p) => rng() < p

const TCHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
const NAMES = ['Content-Type', 'Date', 'ETag', 'Cache-Control', 'Set-Cookie', 'Set-Cookie', 'Vary', 'X-Powered-By',
  'Keep-Alive', 'Location', 'X-Request-Id', 'Server', 'Link']
const VALUES = ['text/html; charset=utf-8', 'W/"4d2-abc"', 'no-cache, private', 'a=1; Path=/; HttpOnly', 'timeout=5',
  'Accept-Encoding', 'Express', '/next?x=1', '', 'caf\xe9', 'a\tb', '"quoted, with comma"']
const REASONS = ['OK', 'OK', 'Not Found', 'Created', '', 'No Content', 'Not Modified', 'x\ty', 'caf\xe9 cr\xe8me',
  ' lead', 'trail ', 'A-B_c.d']
const STATUSES = [200, 200, 200, 201, 202, 204, 206, 301, 302, 304, 400, 404, 410, 418, 500, 503, 599]

function token (rng, max = 12) {
  let s = ''
  for (let n = int(rng, 1, max); n > 0; n--) s += pick(rng, TCHARS)
  return s
}

// A field value: VCHAR, obs-text, inner SP/HTAB; sometimes blanks around it.
function fieldValue (rng) {
  let v = chance(rng, 0.5) ? pick(rng, VALUES) : ''
  for (let n = int(rng, 0, 10); n > 0; n--) {
    const r = rng()
    v += r < 0.8
      ? String.fromCharCode(int(rng, 0x21, 0x7e))
      : r < 0.9 ? String.fromCharCode(int(rng, 0x80, 0xff)) : pick(rng, [' ', '\t'])
  }
  const pad = () => (chance(rng, 0.2) ? pick(rng, [' ', '  ', '\t', ' \t']) : '')
  return pad() + v + pad()
}

function bodyBytes (rng, max) {
  let s = ''
  for (let n = int(rng, 0, max); n > 0; n--) {
    s += chance(rng, 0.15)
      ? pick(rng, ['\r', '\n', '\r\n', '0\r\n\r\n', 'HTTP/1.1 200 OK\r\n', '\x00'])
      : String.fromCharCode(int(rng, 0, 255))
  }
  return s
}

function hexSize (rng, n) {
  const hex = n.toString(16)
  const cased = chance(rng, 0.3) ? hex.toUpperCase() : hex
  return (chance(rng, 0.1) ? '0'.repeat(int(rng, 1, 3)) : '') + cased
}

function chunkExtensions (rng) {
  if (!chance(rng, 0.25)) return ''
  let ext = ''
  for (let n = int(rng, 1, 3); n > 0; n--) {
    ext += ';' + token(rng, 6)
    const r = rng()
    if (r < 0.4) ext += '=' + token(rng, 6)
    else if (r < 0.6) ext += '="' + pick(rng, ['x y', 'a\\"b', '', 'caf\xe9', 'semi;colon']) + '"'
  }
  return ext
}

// A well-formed response: { text, method }. Framing by Content-Length, chunked (extensions,
// trailers), the end of the connection, or none (HEAD, 204, 304); sometimes 1xx first.
function validResponse (rng) {
  const method = chance(rng, 0.12) ? 'HEAD' : 'GET'
  const version = chance(rng, 0.15) ? '1.0' : '1.1'
  const status = pick(rng, STATUSES)
  const reason = pick(rng, REASONS)
  let text = ''
  if (chance(rng, 0.08)) {
    text += pick(rng, [
      'HTTP/1.1 100 Continue\r\n\r\n',
      'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n',
      'HTTP/1.1 102\r\n\r\n'
    ])
  }
  text += `HTTP/${version} ${status}` + (reason === '' && chance(rng, 0.5) ? '' : ` ${reason}`) + '\r\n'

  const fields = []
  for (let n = int(rng, 0, 8); n > 0; n--) {
    fields.push([chance(rng, 0.7) ? pick(rng, NAMES) : token(rng), fieldValue(rng)])
  }
  if (chance(rng, 0.25)) {
    fields.push(['Connection', pick(rng, ['close', 'keep-alive', 'Keep-Alive', 'close, x-foo', ' keep-alive '])])
  }

  const noBody = method === 'HEAD' || status === 204 || status === 304
  const framing = pick(rng, ['length', 'length', 'chunked', 'chunked', 'close', 'other-coding'])
  const body = bodyBytes(rng, 40)
  let payload = ''
  if (framing === 'length') {
    fields.push(['Content-Length', (chance(rng, 0.1) ? '0' : '') + body.length + (chance(rng, 0.1) ? ' ' : '')])
    payload = body
  } else if (framing === 'chunked') {
    fields.push(['Transfer-Encoding', pick(rng, ['chunked', 'chunked', 'Chunked', 'gzip, chunked', 'gzip,chunked'])])
    for (let at = 0; at < body.length;) {
      const size = Math.min(body.length - at, int(rng, 1, 16))
      payload += hexSize(rng, size) + chunkExtensions(rng) + '\r\n' + body.slice(at, at + size) + '\r\n'
      at += size
    }
    payload += hexSize(rng, 0) + chunkExtensions(rng) + '\r\n'
    for (let n = chance(rng, 0.3) ? int(rng, 1, 2) : 0; n > 0; n--) payload += `${token(rng)}: ${fieldValue(rng)}\r\n`
    payload += '\r\n'
  } else if (framing === 'other-coding') {
    fields.push(['Transfer-Encoding', pick(rng, ['gzip', 'chunked, gzip', 'identity'])])
    payload = body
  } else {
    payload = body // until the connection closes
  }
  // The framing field goes anywhere among the others.
  const framingField = framing === 'close' ? null : fields.pop()
  if (framingField) fields.splice(int(rng, 0, fields.length), 0, framingField)
  for (const [name, value] of fields) text += `${name}:${chance(rng, 0.8) ? ' ' : ''}${value}\r\n`
  text += '\r\n'
  if (!noBody) text += payload
  return { text, method }
}

const INTERESTING = ['\x00', '\x01', '\x07', '\x0b', '\x0c', '\x1f', '\x7f', '\x80', '\xa0', '\xff', '\t', ' ', '\r',
  '\n', '\r\n', '\n\n', '\r\n\r\n', ':', ';', ',', '"', '\\', '=', '0', '9', 'a', 'F', 'g', '-', '+', '/']
const EXTRA_FIELDS = [
  'Content-Length: 0', 'Content-Length: 1', 'Content-Length: 5', 'Content-Length: 5, 5', 'Content-Length: 05',
  'Content-Length: -1', 'Content-Length:  3 ', 'Content-Length: 3\t', 'Content-Length: 1e3',
  'Content-Length: 99999999999999999999',
  'Transfer-Encoding: chunked', 'Transfer-Encoding: chunked, chunked', 'Transfer-Encoding: gzip',
  'Transfer-Encoding: chunked,',
  'Transfer-Encoding: chunked\t', 'Transfer-Encoding: ', 'Transfer-Encoding: xchunked', 'Connection: close',
  'Connection: keep-alive',
  'X: a\x01b', 'X : y', ' folded', '\tfolded', 'X:\x7f', 'Upgrade: websocket'
]

// Mutate a response: 1-3 byte-level or line-level changes.
function mutate (rng, text) {
  for (let n = int(rng, 1, 3); n > 0; n--) {
    const at = int(rng, 0, text.length)
    const headEnd = text.indexOf('\r\n\r\n')
    const inHead = headEnd < 0 ? at : int(rng, 0, headEnd + 2) // most mutations aim at the head
    switch (int(rng, 0, 9)) {
      case 0: text = text.slice(0, inHead) + String.fromCharCode(int(rng, 0, 255)) + text.slice(inHead + 1); break
      case 1: text = text.slice(0, inHead) + pick(rng, INTERESTING) + text.slice(inHead + 1); break
      case 2: text = text.slice(0, inHead) + pick(rng, INTERESTING) + text.slice(inHead); break
      case 3: text = text.slice(0, inHead) + text.slice(inHead + int(rng, 1, 4)); break
      case 4: text = text.slice(0, at); break // truncated
      case 5: text = replaceNth(rng, text, '\r\n', pick(rng, ['\n', '\r', '\r\r\n', '\n\r', '\r\n ', '\r\n\t'])); break
      case 6: text = replaceNth(rng, text, ':', pick(rng, [' :', '\t:', '::', ': \x00'])); break
      case 7: text = insertLine(rng, text, pick(rng, EXTRA_FIELDS)); break
      case 8: text = duplicateLine(rng, text); break
      case 9: text = text.slice(0, at) + pick(rng, INTERESTING) + text.slice(at); break
    }
  }
  return text
}

function replaceNth (rng, text, what, by) {
  const positions = []
  for (let i = text.indexOf(what); i >= 0; i = text.indexOf(what, i + 1)) positions.push(i)
  if (positions.length === 0) return text
  const i = pick(rng, positions)
  return text.slice(0, i) + by + text.slice(i + what.length)
}

function lineStarts (text) {
  const end = text.indexOf('\r\n\r\n')
  const starts = []
  for (let i = text.indexOf('\r\n'); i >= 0 && (end < 0 || i <= end); i = text.indexOf('\r\n', i + 2)) {
    starts.push(i + 2)
  }
  return starts
}

function insertLine (rng, text, line) {
  const starts = lineStarts(text)
  if (starts.length === 0) return text
  const at = pick(rng, starts)
  return text.slice(0, at) + line + '\r\n' + text.slice(at)
}

function duplicateLine (rng, text) {
  const starts = lineStarts(text)
  if (starts.length < 2) return text
  const from = pick(rng, starts.slice(0, -1))
  const to = text.indexOf('\r\n', from) + 2
  return text.slice(0, to) + text.slice(from, to) + text.slice(to)
}

// Case `index` of `seed`: a valid response, mutated three times in four.
function generateCase (seed, index) {
  const rng = caseRng(seed, index)
  const { text, method } = validResponse(rng)
  const mutated = chance(rng, 0.75)
  return { text: mutated ? mutate(rng, text) : text, method, mutated, rng }
}

module.exports = { caseRng, generateCase, validResponse, mutate, int }
