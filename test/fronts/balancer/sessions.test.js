'use strict'
// Socket.IO sessions in the balancer (sessions.js): which requests are Engine.IO's, the id
// learned from a handshake's answer, the worker a later request goes to, and the bounds.
const t = require('tap')
const { Sessions, engineRequest } = require('../../../lib/fronts/balancer/sessions')

t.test('Engine.IO requests: a handshake, or its session id; any other request is none', async (t) => {
  t.equal(engineRequest('/socket.io/?EIO=4&transport=polling&t=PZ1'), 'open')
  t.equal(engineRequest('/socket.io/?EIO=4&transport=polling&sid=Ab_-9z'), 'Ab_-9z')
  t.equal(engineRequest('/chat/?sid=x1&EIO=4&transport=websocket'), 'x1', 'any path, any order')
  t.equal(engineRequest('/socket.io/?EIO=4&transport=polling&sid=a%2Db'), 'a-b')
  t.equal(engineRequest('/page?sid=x1'), null, 'a sid alone is not Engine.IO')
  t.equal(engineRequest('/page?xEIO=4&mytransport=polling'), null, 'Engine.IO\'s parameters by their exact names')
  t.equal(engineRequest('/page?EIO=4&transport=carrier-pigeon'), null, 'and its transports')
  t.equal(engineRequest('/socket.io/'), null)
})

t.test('a handshake answer names the session; later requests go to its worker while it is there', async (t) => {
  const sessions = new Sessions()
  const one = { gone: false }
  const two = { gone: false }
  t.equal(sessions.learn(Buffer.from('0{"sid":"S1","upgrades":["websocket"],"pingInterval":25000}'), one), true)
  t.equal(sessions.learn(Buffer.from('96:0{"sid":"S2","upgrades":[]}'), two), true, 'Engine.IO 3 framing too')
  t.equal(sessions.workerOf('S1'), one)
  t.equal(sessions.workerOf('S2'), two)
  t.equal(sessions.learn(Buffer.from('0{"pingInterval'), one), false, 'the id may come in the next bytes')
  t.equal(sessions.learn(Buffer.alloc(300, 'x'), one), true, 'but no further than the first 256')
  two.gone = true
  t.equal(sessions.workerOf('S2'), undefined, 'a worker gone takes its sessions')
  sessions.forget(one)
  t.equal(sessions.workerOf('S1'), undefined)
  t.equal(sessions.size, 0)
})

t.test('at most `max` sessions: the least recently used goes first', async (t) => {
  const sessions = new Sessions({ max: 2 })
  const w = { gone: false }
  sessions.learn(Buffer.from('0{"sid":"a"}'), w)
  sessions.learn(Buffer.from('0{"sid":"b"}'), w)
  sessions.workerOf('a') // a used again: b is the oldest
  sessions.learn(Buffer.from('0{"sid":"c"}'), w)
  t.same([sessions.workerOf('a'), sessions.workerOf('b'), sessions.workerOf('c')], [w, undefined, w])
})
