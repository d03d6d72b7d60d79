'use strict'

// What Node's own HTTP client (llhttp, strict mode: no insecureHTTPParser) makes of given
// response bytes, through the supported route: a net server on 127.0.0.1 writes the bytes and
// closes, a real http.request reads them. Used as the reference by
// test/fronts/balancer/response-parser-diff.test.js.

const net = require('node:net')
const http = require('node:http')

// Start the server. Returns { parse(bytes, method) -> Promise<verdict>, close() }.
// verdict: { accepted, statusCode, statusMessage, rawHeaders, body (Buffer), error, errorAfter }
//   accepted: a final response was read to its end with no error on the way (1xx interim
//     responses are skipped, as the balancer's parser does);
//   error: why not; errorAfter: an error about bytes after the complete response.
async function startOracle () {
  const cases = new Map()
  let nextId = 0
  const server = net.createServer((socket) => {
    let request = ''
    socket.on('error', () => {}) // the client may give up first
    socket.on('data', (d) => {
      request += d.toString('latin1')
      if (!request.includes('\r\n\r\n')) return
      const id = Number(/^[A-Z]+ \/(\d+) /.exec(request)[1])
      socket.end(cases.get(id))
    })
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const { port } = server.address()

  function parse (bytes, method = 'GET') {
    const id = nextId++
    cases.set(id, bytes)
    return new Promise((resolve) => {
      const verdict = {
        accepted: false,
        statusCode: 0,
        statusMessage: '',
        rawHeaders: [],
        body: null,
        error: null,
        errorAfter: null
      }
      const body = []
      let res = null
      const onError = (err) => {
        const what = `${err.code || 'error'}: ${err.reason || err.message}`
        if (res && res.complete) verdict.errorAfter = verdict.errorAfter || what
        else verdict.error = verdict.error || what
      }
      const req = http.request({ host: '127.0.0.1', port, path: `/${id}`, method, agent: false })
      req.on('response', (r) => {
        res = r
        verdict.statusCode = r.statusCode
        verdict.statusMessage = r.statusMessage
        verdict.rawHeaders = r.rawHeaders
        r.on('data', (chunk) => body.push(chunk))
        r.on('error', onError)
        r.on('aborted', () => onError({ code: 'aborted', message: 'response aborted' }))
      })
      req.on('error', onError)
      // Settle once the request and the response (if any) are both closed: every body chunk
      // and error has been emitted by then.
      const settle = () => {
        if (!req.destroyed || (res && !res.destroyed) || verdict.body) return
        cases.delete(id)
        verdict.body = Buffer.concat(body)
        verdict.accepted = res !== null && res.complete && verdict.error === null
        if (!verdict.accepted && verdict.error === null) verdict.error = res ? 'response incomplete' : 'no response'
        resolve(verdict)
      }
      // Bounded: the server always closes, so this only fires if something is badly wrong.
      const timer = setTimeout(() => { verdict.error = 'no verdict within 10 s'; req.destroy() }, 10000)
      req.on('close', () => { clearTimeout(timer); setImmediate(settle) })
      req.on('response', (r) => r.on('close', () => setImmediate(settle)))
      req.end()
    })
  }

  return { parse, close: () => new Promise((resolve) => server.close(resolve)) }
}

module.exports = { startOracle }
