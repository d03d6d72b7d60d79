'use strict'

// failures.js's table against the HAProxy configs both generators write: for every way an attempt
// fails, what decide() does with it (for which methods, how often) is what the backends' retry-on,
// disable-l7-retry and retries lines say, so that a change to either side alone fails here.
// Pure: configs as text, no HAProxy (test/generate/haproxy-retries.test.js runs the real one).

const t = require('tap')
const { ATTEMPT_FAILURES, decide, countRetry } = require('../../../lib/fronts/balancer/failures')
const { haproxyConfig } = require('../../../lib/generate/haproxy')
const { edgeConfig } = require('../../../lib/generate/edge')

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'CONNECT', 'TRACE']
const serving = { retries: 3, clientGone: false, stopped: false }
const fresh = (method) => ({ method, redispatches: 0, replayed: false, upgrade: null })

// The methods decide() sends to another worker after `failure`, on a first attempt.
function retriedMethods (failure) {
  return METHODS.filter((method) => decide(failure, fresh(method), serving).action === 'redispatch')
}

// How many times decide() sends one GET on after `failure` again and again, within `retries`.
function retriesOf (failure, retries) {
  const request = fresh('GET')
  let count = 0
  while (count <= retries && decide(failure, request, { ...serving, retries }).action === 'redispatch') {
    countRetry(request, failure)
    count++
  }
  return count
}

// A backend section's retry settings: its retry-on keywords, the methods its disable-l7-retry
// leaves out (null without the line), its retries.
function retrySettings (config, backend) {
  const section = config.split(/\n(?=\S)/).find((s) => s.startsWith(`backend ${backend}\n`))
  if (!section) throw new Error(`no backend ${backend}`)
  const retryOn = /^ {4}retry-on (.+)$/m.exec(section)
  const l7 = /^ {4}http-request disable-l7-retry if (.+)$/m.exec(section)
  return {
    keywords: retryOn ? retryOn[1].split(' ') : [],
    replayed: l7 ? l7[1].split(' ').map((term) => /^!METH_([A-Z]+)$/.exec(term)[1]) : null,
    retries: Number(/^ {4}retries (\d+)$/m.exec(section)[1]),
    redispatch: /^ {4}option redispatch 1$/m.test(section)
  }
}

const configs = {
  'pool config haproxy': {
    config: haproxyConfig({ workers: 2, streamRoutes: '/events' }),
    renders: 'pool',
    streams: 'pool_streams'
  },
  'pool config edge': {
    config: edgeConfig({ hosts: '10.0.0.11:9001,10.0.0.12:9001', agentPort: 9100, retries: 3 }),
    renders: 'fleet',
    streams: 'fleet_streams'
  }
}

for (const [name, { config, renders, streams }] of Object.entries(configs)) {
  t.test(`${name}: every row of the table as decide() applies it`, async (t) => {
    const render = retrySettings(config, renders)
    const stream = retrySettings(config, streams)
    t.ok(render.redispatch && stream.redispatch, 'every retry goes to another server (`option redispatch 1`)')
    const expectedKeywords = new Set()
    for (const [failure, { retryOn }] of Object.entries(ATTEMPT_FAILURES)) {
      const methods = retriedMethods(failure)
      if (methods.length === 0) {
        t.equal(retryOn, null, `${failure}: never retried, no retry-on keyword`)
        continue
      }
      t.ok(render.keywords.includes(retryOn), `${failure}: retried, so ${renders} has retry-on ${retryOn}`)
      expectedKeywords.add(retryOn)
      if (methods.length === METHODS.length) {
        t.ok(stream.keywords.includes(retryOn), `${failure}: any method, so ${streams} retries it too`)
        continue
      }
      t.same(render.replayed, methods, `${failure}: ${renders} replays only ${methods.join(', ')}, as decide() does`)
      t.notOk(stream.keywords.includes(retryOn), `${failure}: ${streams} replays nothing`)
      if (name === 'pool config haproxy') {
        t.equal(render.retries, retriesOf(failure, 10),
          `${failure}: HAProxy's one budget is the number of replays decide() allows`)
      }
    }
    t.same(new Set(render.keywords), expectedKeywords, `${renders}: no retry-on keyword that no row has`)
    t.ok(stream.keywords.every((k) => expectedKeywords.has(k)), `${streams}: no retry-on keyword that no row has`)
    t.equal(stream.replayed, null, `${streams}: no disable-l7-retry, as nothing is replayed there`)
  })
}

t.test('the edge\'s retries are its --retries', async (t) => {
  const { config } = configs['pool config edge']
  t.equal(retrySettings(config, 'fleet').retries, 3)
  t.equal(retrySettings(config, 'fleet_streams').retries, 3)
})
