'use strict'

// The balancer's response parser against Node's own (llhttp, read through a real http.request
// from a real socket: test/helpers/llhttp-oracle.js), on generated and mutated responses
// (test/helpers/response-gen.js). For every case:
// - our parser either refuses it (ResponseParseError, nothing else) or reads exactly what
//   Node reads: status code, reason, header names and values, body bytes;
// - it never accepts what Node refuses, with one deliberate exception: Transfer-Encoding
//   together with Content-Length, which llhttp refuses and we read as RFC 9112 §6.3 says
//   (Transfer-Encoding wins), on a connection that is then not reused (as HAProxy does);
// - it reads the same whatever the pieces the bytes arrive in;
// - what it accepts can be handed to res.writeHead as is (the pool crash this guards against).
// Where we refuse what Node accepts we are stricter on purpose
// (lib/fronts/balancer/response-parser.js lists how: reason and value characters, one SP after the
// version, codes 100-599, HTTP/1.0-1.1 only, no leading empty line, no whitespace in chunk-size
// lines, Content-Length once, no empty or doubled transfer coding, no framing fields in
// trailers...). Node also caps a head at 16 KB where we allow 64 KB; the generated heads stay far
// below both.
//
// Replay: PARSER_DIFF_SEED=<seed> (printed first) reruns the same cases; PARSER_DIFF_CASE=<n>
// runs only case n.

const t = require('tap')
const http = require('node:http')
const { ResponseParser, ResponseParseError } = require('../../../lib/fronts/balancer/response-parser')
const { codes } = require('../../../lib/errors')
const { startOracle } = require('../../helpers/llhttp-oracle')
const { generateCase, validResponse, mutate, caseRng, int } = require('../../helpers/response-gen')

const SEED = process.env.PARSER_DIFF_SEED !== undefined ? Number(process.env.PARSER_DIFF_SEED) : Date.now() % 2147483647
const ONLY = process.env.PARSER_DIFF_CASE !== undefined ? Number(process.env.PARSER_DIFF_CASE) : null
const CASES = 3000
const ALWAYS = 400 // cases run whatever the clock says; the rest stop at the time budget
const BUDGET_MS = 15000
const CONCURRENCY = 8
const MAX_REPORTED = 10

// Our parser over `pieces`, driven as upstream.js drives it: bytes that arrive after the
// response completed are not fed (the connection has no exchange then and is dropped), end()
// when the worker closes.
function ours (pieces, method) {
  const out = { accepted: false, error: null, foreign: null, head: null, body: [], keepAlive: null, leftover: false }
  const parser = new ResponseParser({
    onHead (head) { out.head = head },
    onBody (chunk) { out.body.push(Buffer.from(chunk)) },
    onComplete (keepAlive) { out.accepted = true; out.keepAlive = keepAlive }
  })
  parser.expect(method)
  try {
    for (const piece of pieces) {
      if (out.accepted) {
        if (piece.length > 0) out.leftover = true
        continue
      }
      parser.execute(piece)
    }
    if (!out.accepted) parser.end()
  } catch (err) {
    out.accepted = false
    if (err instanceof ResponseParseError && err.code === codes.BAD_RESPONSE) out.error = err.message
    else out.foreign = err
  }
  out.body = Buffer.concat(out.body)
  out.reusable = out.accepted && out.keepAlive && !out.leftover
  return out
}

// What must not depend on how the bytes were cut.
function summary (r) {
  if (r.foreign) return `threw ${r.foreign.stack}`
  if (!r.accepted) return 'refused'
  const { statusCode, statusMessage, rawHeaders, hasBody, dropLength } = r.head
  return JSON.stringify({
    statusCode,
    statusMessage,
    rawHeaders,
    hasBody,
    dropLength,
    body: r.body.toString('latin1'),
    reusable: r.reusable
  })
}

function splitsOf (bytes, rng, everyPosition) {
  const variants = [[bytes], Array.from(bytes, (b) => Buffer.from([b]))]
  if (everyPosition) {
    for (let i = 1; i < bytes.length; i++) variants.push([bytes.subarray(0, i), bytes.subarray(i)])
  } else {
    for (let n = 0; n < 3; n++) {
      const a = int(rng, 0, bytes.length)
      const b = int(rng, a, bytes.length)
      variants.push([bytes.subarray(0, a), bytes.subarray(a, b), bytes.subarray(b)])
    }
  }
  return variants
}

// Would res.writeHead take this head as it is?
function writeHeadError (head) {
  const res = new http.ServerResponse({ method: 'GET', httpVersionMajor: 1, httpVersionMinor: 1, headers: {} })
  try {
    res.writeHead(head.statusCode, head.statusMessage, head.rawHeaders)
    return null
  } catch (err) {
    return err.code || err.message
  }
}

function describe (label, { index, text, method }, details) {
  return `${label}: seed ${SEED} case ${index} (PARSER_DIFF_SEED=${SEED} PARSER_DIFF_CASE=${index}), ` +
    `${method} ${JSON.stringify(text)}\n${details}`
}

// Check our verdicts on one case, alone and against Node's. Returns the outcome's category,
// or a failure description.
function judge (c, node) {
  const bytes = Buffer.from(c.text, 'latin1')
  const variants = splitsOf(bytes, c.rng, !c.mutated && bytes.length <= 2000)
  const whole = ours(variants[0], c.method)
  const expected = summary(whole)
  for (const pieces of variants) {
    const r = ours(pieces, c.method)
    if (r.foreign) {
      const detail = `pieces ${pieces.map((p) => p.length)}: ${r.foreign.stack}`
      return { failure: describe('threw something else than a ResponseParseError', c, detail) }
    }
    const got = summary(r)
    if (got !== expected) {
      const detail = `pieces ${pieces.map((p) => p.length)}:\n  ${got}\nwhole:\n  ${expected}`
      return { failure: describe('read differently depending on the pieces', c, detail) }
    }
  }
  if (!whole.accepted) return { category: node.accepted ? 'stricter' : 'both refuse' }

  const refusedByWriteHead = writeHeadError(whole.head)
  if (refusedByWriteHead) return { failure: describe('accepted a head res.writeHead refuses', c, refusedByWriteHead) }

  if (!node.accepted) {
    const bothFramings = whole.head.sawContentLength && whole.head.transferEncoding !== undefined
    if (bothFramings && /Content-Length/.test(node.error) && /Transfer-Encoding/.test(node.error)) {
      if (whole.reusable) {
        return { failure: describe('Transfer-Encoding with Content-Length left the connection reusable', c, expected) }
      }
      return { category: 'Transfer-Encoding with Content-Length (deliberate)' }
    }
    return { failure: describe('accepted what Node refuses', c, `ours: ${expected}\nNode: ${node.error}`) }
  }
  const theirs = JSON.stringify({
    statusCode: node.statusCode,
    statusMessage: node.statusMessage,
    rawHeaders: node.rawHeaders,
    body: node.body.toString('latin1')
  })
  const mine = JSON.stringify({
    statusCode: whole.head.statusCode,
    statusMessage: whole.head.statusMessage,
    rawHeaders: whole.head.rawHeaders,
    body: whole.body.toString('latin1')
  })
  if (mine !== theirs) return { failure: describe('read differently from Node', c, `ours: ${mine}\nNode: ${theirs}`) }
  // Node tripped over bytes after the response: we must not read them as the next one.
  if (node.errorAfter && whole.reusable) {
    return { failure: describe('bytes after the response left the connection reusable', c, `Node: ${node.errorAfter}`) }
  }
  return { category: 'same' }
}

t.test('generated responses: refused, or read exactly as Node reads them', async (t) => {
  t.comment(`seed ${SEED} (replay with PARSER_DIFF_SEED=${SEED})`)
  const oracle = await startOracle()
  t.teardown(() => oracle.close())
  const counts = {}
  const failures = []
  const started = Date.now()
  const indexes = ONLY !== null ? [ONLY] : Array.from({ length: CASES }, (_, i) => i)
  let ran = 0
  for (let i = 0; i < indexes.length; i += CONCURRENCY) {
    if (i >= ALWAYS && Date.now() - started > BUDGET_MS) break
    const batch = indexes.slice(i, i + CONCURRENCY).map((index) => ({ index, ...generateCase(SEED, index) }))
    const verdicts = await Promise.all(batch.map((c) => oracle.parse(Buffer.from(c.text, 'latin1'), c.method)))
    batch.forEach((c, k) => {
      const { category, failure } = judge(c, verdicts[k])
      if (failure) failures.push(failure)
      else counts[category] = (counts[category] || 0) + 1
    })
    ran += batch.length
  }
  t.comment(`${ran} cases in ${Date.now() - started} ms: ${JSON.stringify(counts)}`)
  for (const failure of failures.slice(0, MAX_REPORTED)) t.fail(failure)
  t.equal(failures.length, 0, `no case broke the rules (${failures.length} did)`)
  if (ONLY === null) {
    // The generator must exercise both sides, or the comparison proves nothing.
    t.ok(counts.same > ran / 10, 'many cases were read the same by both parsers')
    t.ok(counts['both refuse'] > ran / 10, 'many cases were refused by both parsers')
  }
})

t.test('any bytes, in any pieces: a ResponseParseError or a response, never another exception', async (t) => {
  const seed = SEED + 1
  const started = Date.now()
  const failures = []
  const indexes = ONLY !== null ? [ONLY] : Array.from({ length: 20000 }, (_, i) => i)
  let ran = 0
  for (const index of indexes) {
    if (index >= 2000 && Date.now() - started > BUDGET_MS / 2) break
    const c = { index, ...crashCase(seed, index) }
    const bytes = Buffer.from(c.text, 'latin1')
    const expected = summary(ours([bytes], c.method))
    for (const pieces of splitsOf(bytes, c.rng, false)) {
      const r = ours(pieces, c.method)
      if (r.foreign) failures.push(describe('threw something else than a ResponseParseError', c, r.foreign.stack))
      else if (summary(r) !== expected) {
        failures.push(describe('read differently depending on the pieces', c, `${summary(r)}\nwhole: ${expected}`))
      } else continue
      break
    }
    ran++
  }
  t.comment(`${ran} cases in ${Date.now() - started} ms`)
  for (const failure of failures.slice(0, MAX_REPORTED)) t.fail(failure)
  t.equal(failures.length, 0, 'every case was refused cleanly or read the same in any pieces')
})

// Far more damage than the differential cases get: these only have to be refused cleanly.
function crashCase (seed, index) {
  const rng = caseRng(seed, index)
  let { text, method } = validResponse(rng)
  for (let n = int(rng, 1, 8); n > 0; n--) text = mutate(rng, text)
  if (int(rng, 0, 9) === 0) {
    text = Array.from({ length: int(rng, 1, 200) }, () => String.fromCharCode(int(rng, 0, 255))).join('')
  }
  return { text, method, mutated: true, rng }
}
