'use strict'

// The worker-response parser of the embedded balancer, fed byte by byte and in one piece.

const t = require('tap')
const { ResponseParser } = require('../lib/balancer/response-parser')

// Parse `text` (fed in pieces of `step` bytes) as the answer to `method`.
function parse (text, { method = 'GET', step = Infinity, end = false } = {}) {
  const out = { head: null, body: '', complete: 0, keepAlive: null }
  const parser = new ResponseParser({
    onHead (h) { out.head = h },
    onBody (c) { out.body += c.toString('latin1') },
    onComplete (keepAlive) { out.complete++; out.keepAlive = keepAlive }
  })
  parser.expect(method)
  const data = Buffer.from(text, 'latin1')
  const size = Math.min(step, data.length)
  for (let i = 0; i < data.length; i += size) parser.execute(data.subarray(i, i + size))
  if (end) parser.end()
  return out
}

const both = (t, text, opts, check) => {
  for (const step of [Infinity, 1, 7]) check(parse(text, { ...opts, step }), `step ${step}`)
}

t.test('Content-Length body, keep-alive, raw header spelling kept', async (t) => {
  both(t, 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nhello', {}, (r, s) => {
    t.equal(r.head.statusCode, 200, s)
    t.equal(r.head.statusMessage, 'OK')
    t.same(r.head.rawHeaders, ['Content-Type', 'text/plain', 'Content-Length', '5', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2'])
    t.equal(r.body, 'hello')
    t.equal(r.complete, 1)
    t.equal(r.keepAlive, true)
  })
})

t.test('chunked body with extensions and trailers', async (t) => {
  both(t, 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n', {}, (r, s) => {
    t.equal(r.body, 'hello world', s)
    t.equal(r.complete, 1)
    t.equal(r.keepAlive, true)
    t.equal(r.head.contentLength, undefined)
  })
})

t.test('no body: HEAD, 204, 304; interim 1xx skipped', async (t) => {
  const head = parse('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n', { method: 'HEAD' })
  t.equal(head.complete, 1)
  t.equal(head.head.hasBody, false)
  t.equal(head.head.contentLength, 1000)
  t.equal(parse('HTTP/1.1 204 No Content\r\n\r\n').complete, 1)
  t.equal(parse('HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n').complete, 1)
  both(t, 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok', {}, (r, s) => {
    t.equal(r.head.statusCode, 201, s)
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

t.test('malformed responses throw', async (t) => {
  const bad = {
    'bad status line': 'HTTP/2 200 OK\r\n\r\n',
    'space before colon is not a token': 'HTTP/1.1 200 OK\r\nX-Bad : y\r\nContent-Length: 0\r\n\r\n',
    'obs-fold': 'HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 0\r\n\r\n',
    'conflicting lengths': 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx',
    'bad length': 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n',
    'bad chunk size': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    'chunk without CRLF': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxyz',
    'bytes after the response': 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1',
    upgrade: 'HTTP/1.1 101 Switching Protocols\r\n\r\n'
  }
  for (const [what, text] of Object.entries(bad)) t.throws(() => parse(text), { code: 'RESPONSE_PARSE' }, what)
  t.throws(() => parse('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort', { end: true }), { code: 'RESPONSE_PARSE' }, 'truncated')
  t.throws(() => parse('HTTP/1.1 200 OK\r\nX: ' + 'a'.repeat(70 * 1024)), { code: 'RESPONSE_PARSE' }, 'head too large')
})

t.test('Transfer-Encoding wins over Content-Length, and the connection is not reused', async (t) => {
  const r = parse('HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n')
  t.equal(r.body, 'ok')
  t.equal(r.keepAlive, false)
})
