'use strict'

// The worker-response parser of the embedded balancer, fed in one piece, byte by byte and cut
// at every position: what it reads, and what it refuses (a ResponseParseError, which the
// balancer turns into a 502 and a dropped connection).
// test/fronts/balancer/response-parser-diff.test.js compares it with Node's own parser on generated
// responses.

const t = require('tap')
const http = require('node:http')
const { ResponseParser, ResponseParseError, MAX_HEAD_BYTES } = require('../../../lib/fronts/balancer/response-parser')
const { codes } = require('../../../lib/errors')

// Parse `text` (latin1, fed in pieces of `step` bytes, or cut at `cuts`) as the answer to
// `method`; end() at the end when `end`. Pieces that arrive after onComplete are not fed: the
// balancer has no exchange for them then and drops the connection (upstream.js).
function parse (text, { method = 'GET', step = Infinity, cuts = null, end = false } = {}) {
  const out = { head: null, body: '', complete: 0, keepAlive: null, heads: 0, interim: [] }
  const parser = new ResponseParser({
    onInterim (h) { out.interim.push(h) },
    onHead (h) { out.head = h; out.heads++ },
    onBody (c) { out.body += c.toString('latin1') },
    onComplete (keepAlive) { out.complete++; out.keepAlive = keepAlive }
  })
  parser.expect(method)
  const data = Buffer.from(text, 'latin1')
  const bounds = cuts || []
  if (!cuts) for (let i = Math.min(step, data.length); i < data.length; i += step) bounds.push(i)
  let from = 0
  for (const to of [...bounds, data.length]) {
    if (out.complete === 0) parser.execute(data.subarray(from, to))
    from = to
  }
  if (end && out.complete === 0) parser.end()
  return out
}

const steps = (t, text, opts, check) => {
  for (const step of [Infinity, 1, 7]) check(parse(text, { ...opts, step }), `step ${step}`)
}

// Refused with a ResponseParseError: nothing else (a TypeError, say) would do.
function refused (t, text, what, opts = {}) {
  let error = null
  try {
    parse(text, { end: true, ...opts })
  } catch (err) {
    error = err
  }
  if (!error) return t.fail(`${what}: accepted ${JSON.stringify(text.slice(0, 80))}`)
  t.ok(error instanceof ResponseParseError && error.code === codes.BAD_RESPONSE, what, { error: error.stack })
}

const ok = (body = 'ok') => `Content-Length: ${body.length}\r\n\r\n${body}`

t.test('Content-Length body, keep-alive, raw header spelling kept', async (t) => {
  steps(t, 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nSet-Cookie: a=1\r\nSet-Cookie: ' +
    'b=2\r\n\r\nhello', {}, (r, s) => {
    t.equal(r.head.statusCode, 200, s)
    t.equal(r.head.statusMessage, 'OK')
    t.same(r.head.rawHeaders,
      ['Content-Type', 'text/plain', 'Content-Length', '5', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2'])
    t.equal(r.body, 'hello')
    t.equal(r.complete, 1)
    t.equal(r.keepAlive, true)
    t.equal(r.head.dropLength, false)
  })
})

t.test('chunked body with extensions and trailers', async (t) => {
  steps(t, 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: ' +
    '1\r\n\r\n', {}, (r, s) => {
    t.equal(r.body, 'hello world', s)
    t.equal(r.complete, 1)
    t.equal(r.keepAlive, true)
    t.equal(r.head.contentLength, undefined)
    t.equal(r.head.dropLength, true, 'a Content-Length must not be passed on')
  })
})

t.test('no body: HEAD, 204, 304; interim 1xx skipped', async (t) => {
  const head = parse('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n', { method: 'HEAD' })
  t.equal(head.complete, 1)
  t.equal(head.head.hasBody, false)
  t.equal(head.head.contentLength, 1000)
  t.equal(parse('HTTP/1.1 204 No Content\r\n\r\n').complete, 1)
  t.equal(parse('HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n').complete, 1)
  steps(t, 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: ' +
    '</a.css>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok', {}, (r, s) => {
    t.equal(r.head.statusCode, 201, s)
    t.equal(r.heads, 1, 'interim heads are not passed on as the response')
    t.same(r.interim.map((h) => [h.statusCode, h.rawHeaders]), [[100, []], [103, ['Link', '</a.css>']]],
      'but to onInterim, in order')
    t.equal(r.body, 'ok')
  })
})

t.test('Connection: close, HTTP/1.0, and a body delimited by the end of the connection', async (t) => {
  t.equal(parse('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n').keepAlive, false)
  t.equal(parse('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n').keepAlive, false)
  t.equal(parse('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n').keepAlive, true)
  const eof = parse('HTTP/1.1 200 OK\r\n\r\nuntil the end', { end: true })
  t.equal(eof.body, 'until the end')
  t.equal(eof.complete, 1)
  t.equal(eof.keepAlive, false)
})

t.test('status line: HTTP/1.x SP 3DIGIT (100-599), then SP and a reason of HTAB / SP / VCHAR / obs-text', async (t) => {
  const reasons = {
    'HTTP/1.1 200 OK': 'OK',
    'HTTP/1.1 200': '', // no SP before an empty reason: llhttp and HAProxy take it too
    'HTTP/1.1 200 ': '',
    'HTTP/1.1 200  OK ': ' OK ', // the reason is kept byte for byte, as Node reads it
    'HTTP/1.1 200 O\tK': 'O\tK',
    'HTTP/1.1 200 caf\xe9': 'caf\xe9',
    'HTTP/1.1 599 Whatever': 'Whatever',
    'HTTP/1.0 404 Not Found': 'Not Found'
  }
  for (const [line, reason] of Object.entries(reasons)) {
    const r = parse(`${line}\r\n${ok()}`)
    t.equal(r.head.statusMessage, reason, JSON.stringify(line))
    t.equal(r.body, 'ok')
  }
  const bad = {
    'control character in the reason (\\x01)': 'HTTP/1.1 200 O\x01K',
    'BEL in the reason': 'HTTP/1.1 200 O\x07K',
    'NUL in the reason': 'HTTP/1.1 200 O\x00K',
    'DEL in the reason': 'HTTP/1.1 200 O\x7fK',
    'bare CR in the reason': 'HTTP/1.1 200 O\rK',
    'bare LF in the reason': 'HTTP/1.1 200 O\nK',
    'status 099': 'HTTP/1.1 099 OK',
    'status 600': 'HTTP/1.1 600 OK',
    'status 999': 'HTTP/1.1 999 OK',
    'four digits': 'HTTP/1.1 2000 OK',
    'two digits': 'HTTP/1.1 20 OK',
    'two SP after the version': 'HTTP/1.1  200 OK',
    'HTAB after the version': 'HTTP/1.1\t200 OK',
    'HTTP/1.2': 'HTTP/1.2 200 OK',
    'HTTP/2': 'HTTP/2 200 OK',
    'HTTP/2.0': 'HTTP/2.0 200 OK',
    'HTTP/0.9': 'HTTP/0.9 200 OK',
    'lower-case version': 'http/1.1 200 OK',
    'leading empty line': '\r\nHTTP/1.1 200 OK',
    'leading space': ' HTTP/1.1 200 OK'
  }
  for (const [what, line] of Object.entries(bad)) refused(t, `${line}\r\n${ok()}`, what)
})

t.test('field names: a token, the colon right after it', async (t) => {
  const r = parse(`HTTP/1.1 200 OK\r\nX!#$%&'*+-.^_\`|~09az: 1\r\n${ok()}`)
  t.same(r.head.rawHeaders.slice(0, 2), ["X!#$%&'*+-.^_`|~09az", '1'], 'every tchar')
  const bad = {
    'SP before the colon': 'X-Bad : y',
    'HTAB before the colon': 'X-Bad\t: y',
    'empty name': ': y',
    'no colon': 'X-Bad',
    'obs-text in the name': 'X-B\xe9d: y',
    'a separator in the name': 'X(Bad): y',
    'obs-fold (SP)': 'X-A: 1\r\n  folded',
    'obs-fold (HTAB)': 'X-A: 1\r\n\tfolded',
    'NUL in the name': 'X\x00: y'
  }
  for (const [what, lines] of Object.entries(bad)) refused(t, `HTTP/1.1 200 OK\r\n${lines}\r\n${ok()}`, what)
})

t.test('field values: VCHAR, obs-text, inner SP and HTAB; no control character', async (t) => {
  const values = {
    'a b\tc': 'a b\tc',
    '  padded \t ': 'padded',
    '\tcaf\xe9 \xa0': 'caf\xe9 \xa0', // only SP and HTAB are trimmed: \xa0 is obs-text, kept
    '': '',
    ' ': '',
    '"quoted, list", x=1': '"quoted, list", x=1'
  }
  for (const [raw, value] of Object.entries(values)) {
    const r = parse(`HTTP/1.1 200 OK\r\nX-V:${raw}\r\n${ok()}`)
    t.same(r.head.rawHeaders.slice(0, 2), ['X-V', value], JSON.stringify(raw))
  }
  for (const c of ['\x00', '\x01', '\x07', '\x08', '\x0b', '\x0c', '\x1b', '\x1f', '\x7f', '\r', '\n']) {
    refused(t, `HTTP/1.1 200 OK\r\nX-V: a${c}b\r\n${ok()}`, `value with ${JSON.stringify(c)}`)
    refused(t, `HTTP/1.1 200 OK\r\nX-V: ab${c}\r\n${ok()}`, `value ending with ${JSON.stringify(c)}`)
  }
})

t.test('every byte in a reason or a value: refused, or accepted by res.writeHead ' +
  '(a control character used to crash the pool)', async (t) => {
  let accepted = 0
  for (let byte = 0; byte < 256; byte++) {
    const c = String.fromCharCode(byte)
    for (const text of [`HTTP/1.1 200 O${c}K\r\n${ok()}`, `HTTP/1.1 200 OK\r\nX-V: a${c}b\r\n${ok()}`]) {
      let head
      try {
        head = parse(text).head
      } catch (err) {
        if (!(err instanceof ResponseParseError)) t.fail(`byte ${byte}: ${err.stack}`)
        continue
      }
      const res = new http.ServerResponse({ method: 'GET', httpVersionMajor: 1, httpVersionMinor: 1, headers: {} })
      try {
        res.writeHead(head.statusCode, head.statusMessage, head.rawHeaders)
        accepted++
      } catch (err) {
        t.fail(`byte ${byte} accepted by the parser, refused by res.writeHead: ${err.code} ${JSON.stringify(text)}`)
      }
    }
  }
  // HTAB, SP, VCHAR (0x21-0x7e) and obs-text (0x80-0xff): 2 + 94 + 128 bytes, in both places.
  t.equal(accepted, 2 * 224, 'every byte of field-content is accepted, every other one refused')
})

t.test('lines end in CRLF: a bare LF or CR is refused wherever it ends a line', async (t) => {
  const bad = {
    'LF after the status line': 'HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok',
    'LF after a field line': 'HTTP/1.1 200 OK\r\nX: 1\nContent-Length: 2\r\n\r\nok',
    'LF for the empty line': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok',
    'LF only': 'HTTP/1.1 200 OK\nContent-Length: 2\n\nok',
    'CR only': 'HTTP/1.1 200 OK\rContent-Length: 2\r\r\n\r\nok',
    'LF after a chunk size': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n',
    'LF after chunk data': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\n0\r\n\r\n',
    'LF after the last chunk': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\n',
    'LF after a trailer': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n\r\n'
  }
  for (const [what, text] of Object.entries(bad)) refused(t, text, what)
})

t.test('Content-Length: digits only, and only one', async (t) => {
  for (const [raw, n] of [['5', 5], ['005', 5], ['5  ', 5], ['0', 0], ['123456789012345', 123456789012345]]) {
    const r = parse(`HTTP/1.1 200 OK\r\nContent-Length: ${raw}\r\n\r\n${'x'.repeat(Math.min(n, 5))}`)
    t.equal(r.head.contentLength, n, JSON.stringify(raw))
  }
  const bad = {
    negative: 'Content-Length: -1',
    plus: 'Content-Length: +5',
    hex: 'Content-Length: 0x5',
    'inner space': 'Content-Length: 5 5',
    empty: 'Content-Length: ',
    'trailing HTAB (llhttp refuses it)': 'Content-Length: 5\t',
    'sixteen digits': 'Content-Length: 1234567890123456',
    'a list of equal values': 'Content-Length: 5, 5',
    'two equal fields': 'Content-Length: 5\r\nContent-Length: 5',
    'two different fields': 'Content-Length: 5\r\nContent-Length: 6',
    decimal: 'Content-Length: 5.0'
  }
  for (const [what, field] of Object.entries(bad)) refused(t, `HTTP/1.1 200 OK\r\n${field}\r\n\r\nhello`, what)
})

t.test('Transfer-Encoding: chunked last frames the body; otherwise the body runs until close', async (t) => {
  for (const te of ['chunked', 'CHUNKED', 'gzip, chunked', 'gzip,chunked', 'gzip , chunked ']) {
    steps(t, `HTTP/1.1 200 OK\r\nTransfer-Encoding: ${te}\r\n\r\n2\r\nok\r\n0\r\n\r\n`, {}, (r, s) => {
      t.equal(r.body, 'ok', `${te} ${s}`)
      t.equal(r.keepAlive, true)
    })
  }
  t.equal(parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n')
    .body, 'ok', 'over two fields')
  for (const te of ['gzip', 'chunked, gzip', 'identity', 'chunked;q=1']) {
    const r = parse(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${te}\r\n\r\n2\r\nok\r\n0\r\n\r\n`, { end: true })
    t.equal(r.body, '2\r\nok\r\n0\r\n\r\n', `${te}: read until close`)
    t.equal(r.keepAlive, false)
  }
  const bad = {
    empty: 'Transfer-Encoding: ',
    'empty element': 'Transfer-Encoding: chunked,',
    'empty first element': 'Transfer-Encoding: , chunked',
    'chunked twice': 'Transfer-Encoding: chunked, chunked',
    'chunked in two fields': 'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked',
    'HTAB after chunked (llhttp would not see chunked, HAProxy would)': 'Transfer-Encoding: chunked\t',
    'HTAB inside': 'Transfer-Encoding: gzip,\tchunked'
  }
  for (const [what, field] of Object.entries(bad)) {
    refused(t, `HTTP/1.1 200 OK\r\n${field}\r\n\r\n2\r\nok\r\n0\r\n\r\n`, what)
  }
})

t.test('Transfer-Encoding wins over Content-Length, and the connection is not reused', async (t) => {
  steps(t, 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: ' +
    'chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n', {}, (r, s) => {
    t.equal(r.body, 'ok', s)
    t.equal(r.keepAlive, false)
    t.equal(r.head.keepAlive, false)
    t.equal(r.head.contentLength, undefined)
    t.equal(r.head.sawContentLength, true)
    t.equal(r.head.dropLength, true, 'the Content-Length must not be passed on')
  })
  const r = parse('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n')
  t.equal(r.body, 'ok')
  t.equal(r.keepAlive, false, 'Transfer-Encoding on HTTP/1.0: read, then close (RFC 9112 §6.1)')
})

t.test('chunk-size lines: hex digits and token or quoted-string extensions, nothing else', async (t) => {
  const lines = ['2', '02', '000000000002', 'A;b', '2;a=b', '2;a="x y"', '2;a="q\\"uote"', '2;a="caf\xe9"',
    '2;a;b=c;d="e"']
  for (const line of lines) {
    const size = parseInt(line, 16)
    const data = 'x'.repeat(size)
    const r = parse(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${line}\r\n${data}\r\n0;last\r\n\r\n`)
    t.equal(r.body, data, JSON.stringify(line))
  }
  const bad = {
    'SP after the size': '2 ',
    'HTAB after the size': '2\t',
    'SP before an extension': '2 ;a=b',
    'SP around =': '2;a = b',
    'empty extension': '2;',
    'empty value': '2;a=',
    'control character in an extension': '2;a=\x01',
    'NUL in an extension': '2;a\x00',
    'control character in a quoted value': '2;a="x\x01"',
    'bare CR in an extension': '2;a\rb',
    'unterminated quoted value': '2;a="x',
    'bytes after a quoted value': '2;a="x"y',
    'obs-text outside quotes': '2;a=\xe9',
    '0x prefix': '0x2',
    'negative size': '-2',
    'no size': '',
    'thirteen hex digits': '0000000000002'
  }
  for (const [what, line] of Object.entries(bad)) {
    refused(t, `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${line}\r\nok\r\n0\r\n\r\n`, what)
  }
  refused(t, 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxyz', 'chunk data not followed by CRLF')
  refused(t, `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;${'a'.repeat(5000)}\r\nx\r\n0\r\n\r\n`,
    'chunk-size line too long')
})

t.test('trailer lines are checked like field lines, then dropped', async (t) => {
  const r = parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\nX-U:\t2 \r\n\r\n')
  t.equal(r.body, 'ok')
  t.equal(r.complete, 1)
  t.notOk(r.head.rawHeaders.includes('X-T'), 'trailers are not added to the head')
  const bad = {
    'control character': 'X-T: a\x01',
    NUL: 'X-T: \x00',
    'bad name': 'X T: 1',
    'no colon': 'hello',
    'obs-fold': 'X-T: 1\r\n 2',
    'bare CR': 'X-T: 1\r2',
    'Content-Length (llhttp refuses it)': 'Content-Length: 5',
    'Transfer-Encoding': 'Transfer-Encoding: chunked'
  }
  for (const [what, lines] of Object.entries(bad)) {
    refused(t, `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n${lines}\r\n\r\n`, what)
  }
  const many = `X-T: ${'a'.repeat(1000)}\r\n`.repeat(Math.ceil(MAX_HEAD_BYTES / 1000) + 1)
  refused(t, `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n${many}\r\n`, 'trailer section too large')
})

t.test('interim responses: checked, and refused if they carry framing or close the connection', async (t) => {
  const bad = {
    'upgrade (101)': 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\n\r\n',
    'Content-Length on a 100': 'HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n',
    'Transfer-Encoding on a 103': 'HTTP/1.1 103 Early Hints\r\nTransfer-Encoding: chunked\r\n\r\n',
    'Connection: close on a 100 (llhttp then refuses the rest)': 'HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\n',
    'an HTTP/1.0 100 without keep-alive': 'HTTP/1.0 100 Continue\r\n\r\n',
    'a control character in a 103': 'HTTP/1.1 103 Early Hints\r\nLink: \x01\r\n\r\n'
  }
  for (const [what, interim] of Object.entries(bad)) refused(t, `${interim}HTTP/1.1 200 OK\r\n${ok()}`, what)
  refused(t, 'HTTP/1.1 100 Continue\r\n\r\n', 'only an interim response, then the connection closes')
})

t.test('no-body responses: nothing after them is ever read as the next response', async (t) => {
  steps(t, 'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n', {}, (r, s) => {
    t.equal(r.complete, 1, s)
    t.equal(r.head.hasBody, false)
    t.equal(r.keepAlive, false, 'a 204 announcing a body: the connection is not reused')
    t.equal(r.head.dropLength, true, 'and its Content-Length is not passed on (RFC 9110 §8.6)')
    t.equal(r.head.contentLength, undefined, 'nor taken as a length')
  })
  const te204 = parse('HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n')
  t.equal(te204.keepAlive, false, '204 with Transfer-Encoding: not reused')
  t.equal(te204.head.dropLength, true)
  const zero204 = parse('HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n')
  t.equal(zero204.keepAlive, true, '204 with Content-Length: 0 announces nothing more')
  t.equal(zero204.head.dropLength, true, 'but its Content-Length is still not passed on')
  const plain204 = parse('HTTP/1.1 204 No Content\r\n\r\n')
  t.equal(plain204.keepAlive, true)

  const r304 = parse('HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n')
  t.equal(r304.keepAlive, true, 'a 304 may carry the Content-Length a 200 would have')
  t.equal(r304.head.dropLength, false, 'and it is passed on')
  t.equal(r304.head.contentLength, 5)
  const head = parse('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n', { method: 'HEAD' })
  t.equal(head.keepAlive, true, 'so may a HEAD response')
  t.equal(head.head.dropLength, false)

  const extra = {
    '204 with a body': ['HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello', 'GET'],
    '204 with a chunked body': ['HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 'GET'],
    '304 with a body': ['HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nhello', 'GET'],
    'HEAD answered with a body': ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello', 'HEAD'],
    'HEAD answered with a whole second response': ['HTTP/1.1 200 OK\r\nContent-Length: ' +
      '5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', 'HEAD']
  }
  for (const [what, [text, method]] of Object.entries(extra)) {
    const r = parse(text, { method })
    t.equal(r.complete, 1, `${what}: the response completes once`)
    t.equal(r.heads, 1, `${what}: one head`)
    t.equal(r.body, '', `${what}: nothing read as its body`)
    t.equal(r.keepAlive, false, `${what}: the connection is not reused`)
  }
})

t.test('bytes after the end of a response with a body: the response completes, the connection goes', async (t) => {
  const r = parse('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')
  t.equal(r.body, 'x')
  t.equal(r.complete, 1)
  t.equal(r.heads, 1, 'the bytes after it are not read as a response')
  t.equal(r.keepAlive, false)
  const chunked = parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n\r\n')
  t.equal(chunked.body, 'x')
  t.equal(chunked.keepAlive, false)
})

t.test('the parser refuses bytes nobody asked for, and stays refused after an error', async (t) => {
  const parser = new ResponseParser({ onHead () {}, onBody () {}, onComplete () {} })
  t.throws(() => parser.execute(Buffer.from('HTTP/1.1 200 OK\r\n\r\n')), { code: codes.BAD_RESPONSE }, 'no expect()')
  parser.expect('GET')
  t.throws(() => parser.execute(Buffer.from('HTTP/1.1 200 O\x01K\r\n\r\n')), { code: codes.BAD_RESPONSE })
  t.throws(() => parser.execute(Buffer.from(`HTTP/1.1 200 OK\r\n${ok()}`)), { code: codes.BAD_RESPONSE },
    'no more after a refusal')
  t.throws(() => parser.end(), { code: codes.BAD_RESPONSE })
  t.equal(parser.inProgress, true)
  parser.expect('GET') // a new exchange (on a new connection, in the balancer)
  t.doesNotThrow(() => parser.execute(Buffer.from(`HTTP/1.1 200 OK\r\n${ok()}`)))
  t.equal(parser.inProgress, false)
})

t.test('size limits do not depend on how the bytes are cut', async (t) => {
  const headOf = (size) => {
    const start = 'HTTP/1.1 200 OK\r\nX: '
    return start + 'a'.repeat(size - start.length) + '\r\n\r\n'
  }
  for (const step of [Infinity, 1000, 4093]) {
    t.equal(parse(headOf(MAX_HEAD_BYTES), { step, end: true }).complete, 1,
      `a head of ${MAX_HEAD_BYTES} bytes, step ${step}`)
    refused(t, headOf(MAX_HEAD_BYTES + 1), `a head of ${MAX_HEAD_BYTES + 1} bytes, step ${step}`, { step })
  }
  const chunkOf = (size) =>
    `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;${'a'.repeat(size - 2)}\r\nx\r\n0\r\n\r\n`
  for (const step of [Infinity, 1, 100]) {
    t.equal(parse(chunkOf(4096), { step }).body, 'x', `a chunk-size line of 4096 bytes, step ${step}`)
    refused(t, chunkOf(4097), `a chunk-size line of 4097 bytes, step ${step}`, { step })
  }
})

t.test('sizes and truncation', async (t) => {
  refused(t, 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort', 'truncated body')
  refused(t, 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel', 'truncated chunk')
  refused(t, 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n', 'truncated head')
  refused(t, 'HTTP/1.1 200 OK\r\nX: ' + 'a'.repeat(70 * 1024), 'head too large, unfinished', { end: false })
  refused(t, 'HTTP/1.1 200 OK\r\nX: ' + 'a'.repeat(70 * 1024) + '\r\n\r\n', 'head too large, finished')
})

t.test('valid responses read the same cut at every position', async (t) => {
  const cases = [
    ['GET', 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nSet-Cookie: a=1\r\n\r\nhello'],
    ['GET',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, ' +
        'chunked\r\n\r\n5;a="x;y"\r\nhello\r\nA\r\n0123456789\r\n0;z\r\nX-T: 1\r\n\r\n'],
    ['GET',
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: ' +
        '</a.css>\r\n\r\nHTTP/1.1 201\r\nContent-Length: 2\r\n\r\nok'],
    ['GET', 'HTTP/1.0 200 OK\r\nX-A:\t caf\xe9 \r\n\r\nuntil \r\n\r\n the end'],
    ['HEAD', 'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n'],
    ['GET', 'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello']
  ]
  for (const [method, text] of cases) {
    const whole = parse(text, { method, end: true })
    const expected = JSON.stringify({ ...whole, head: { ...whole.head } })
    let same = 0
    for (let i = 0; i <= text.length; i++) {
      for (const cuts of [[i], [i, Math.min(text.length, i + 3)]]) {
        const r = parse(text, { method, cuts, end: true })
        if (JSON.stringify({ ...r, head: { ...r.head } }) === expected) same++
        else t.fail(`${JSON.stringify(text)} cut at ${cuts}: ${JSON.stringify(r)}`)
      }
    }
    t.equal(same, 2 * (text.length + 1), `${JSON.stringify(text.slice(0, 40))}...: same at every cut`)
    t.equal(whole.complete, 1)
  }
})

t.test('a 101: the handler takes the socket when the request asked to upgrade; refused when it did not', async (t) => {
  const upgraded = []
  const parser = new ResponseParser({
    onUpgrade: (head, rest) => upgraded.push({ head, rest: rest.toString('latin1') })
  })
  parser.expect('GET', true)
  const answer = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello'
  for (let cut = 1; cut < answer.length; cut++) { // however the bytes are cut, one upgrade
    upgraded.length = 0
    parser.expect('GET', true)
    parser.execute(Buffer.from(answer.slice(0, cut), 'latin1'))
    if (upgraded.length === 0) parser.execute(Buffer.from(answer.slice(cut), 'latin1'))
    t.equal(upgraded.length, 1)
  }
  t.equal(upgraded[0].head.statusCode, 101)
  t.same(upgraded[0].head.rawHeaders, ['Upgrade', 'websocket', 'Connection', 'Upgrade'])
  t.throws(() => parser.execute(Buffer.from('more')), /data after a protocol upgrade/,
    'nothing more is parsed after it')
  const whole = new ResponseParser({ onUpgrade: (head, rest) => upgraded.push({ rest: rest.toString('latin1') }) })
  whole.expect('GET', true)
  whole.execute(Buffer.from(answer, 'latin1'))
  t.equal(upgraded.pop().rest, '\x81\x05hello', 'what followed the 101 is handed over')
  const plain = new ResponseParser({ onHead () {}, onBody () {}, onComplete () {} })
  plain.expect('GET')
  t.throws(() => plain.execute(Buffer.from(answer, 'latin1')), /a 101 to a request that asked for no upgrade/)
})
