'use strict'

// The client-facing server (lib/fronts/balancer/server.js): Node's check of its connections'
// timeouts runs only while connections are open, on one timer however many connections come
// and go (a client may open one per request), and still cuts a slow client off.

const t = require('tap')
const net = require('node:net')
const http = require('node:http')
const { createFrontServer } = require('../../../lib/fronts/balancer/server')

const timerKey = (server) => Object.getOwnPropertySymbols(server)
  .find((s) => s.description === 'http.server.connectionsCheckingInterval')

// One request on a connection of its own, over once the connection has closed.
function oneRequest (port) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      res.resume()
      res.on('end', () => res.socket.once('close', resolve))
    })
    req.on('error', reject)
  })
}

async function listening (t, opts = {}) {
  const server = createFrontServer({ headersTimeout: 500, requestTimeout: 1000, keepAliveTimeout: 1000, ...opts }, {
    onRequest: (req, res) => res.end('ok'),
    onCheckContinue: (req, res) => res.end('ok'),
    onConnect: (req, socket) => socket.destroy()
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve) }))
  return server
}

t.test('one timer for connections that come and go, stopped once none is open', async (t) => {
  const started = []
  const setIntervalBefore = global.setInterval
  global.setInterval = function (fn, ms, ...rest) {
    started.push(ms)
    return setIntervalBefore(fn, ms, ...rest)
  }
  t.teardown(() => { global.setInterval = setIntervalBefore })
  const server = await listening(t)
  const key = timerKey(server)
  t.ok(key, 'Node keeps its check where the server looks for it')
  t.equal(server[key], null, 'no connection: no timer')
  const from = Date.now()
  for (let i = 0; i < 20; i++) await oneRequest(server.address().port)
  // Each stop takes a check (one a second) finding no connection open: on a slow machine the
  // timer may have stopped and started again between two connections, never once for each.
  const most = 1 + Math.floor((Date.now() - from) / 1000)
  t.ok(started.length <= most && most < 20,
    `20 connections one after the other: ${started.length} timer(s) started (at most ${most})`)
  const until = Date.now() + 3000
  while (server[key] !== null && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(server[key], null, 'stopped by the first check that found no connection open: an idle server sleeps')
  await oneRequest(server.address().port)
  t.equal(started.length, 2, 'a connection after that starts it again')
})

t.test('a client that never finishes its head is still cut off', async (t) => {
  const server = await listening(t)
  const socket = net.connect(server.address().port, '127.0.0.1')
  let answer = ''
  socket.on('data', (d) => { answer += d })
  socket.write('GET / HTTP/1.1\r\nHost: x\r\n') // and never the blank line
  await new Promise((resolve) => socket.on('close', resolve))
  t.match(answer, /^HTTP\/1\.1 408/, 'answered 408 by the timeout check')
})
