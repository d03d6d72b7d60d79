'use strict'
// examples/sse/server.js, unchanged under `pool start`: server-sent events three times --timeout
// long reach the client whole, from both workers, and no worker is killed for them.
const t = require('tap')
const path = require('node:path')
const { ROOT } = require('../helpers')
const { startAppPool, stopLeavingNothing } = require('../helpers/app-pool')
const http = require('node:http')

function events (url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false, headers: { accept: 'text/event-stream' } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { text += d })
      res.on('end',
        () => resolve({
          status: res.statusCode,
          type: res.headers['content-type'],
          events: text.split('\n\n').filter(Boolean)
            .map((e) => JSON.parse(e.split('\n').find((l) => l.startsWith('data: ')).slice(6)))
        }))
    }).on('error', reject)
  })
}

t.test('examples/sse under pool start: streams past --timeout, on both workers', async (t) => {
  const p = await startAppPool(t, path.join(ROOT, 'examples', 'sse', 'server.js'), { args: ['--timeout', '1s'] })
  const got = await events(`${p.url}/events?every=100&count=30`)
  t.equal(got.status, 200)
  t.equal(got.type, 'text/event-stream')
  t.same(got.events.map((e) => e.n), Array.from({ length: 30 }, (_, i) => i + 1), '30 events over 3 s, in order')
  const many = await Promise.all(Array.from({ length: 40 }, () => events(`${p.url}/events?every=100&count=20`)))
  t.same(many.map((m) => m.events.length), Array(40).fill(20), '40 at once, all whole')
  t.same(new Set(many.flatMap((m) => m.events.map((e) => e.pid))).size, 2, 'from both workers')
  t.same(p.child.logs.filter((l) => l.event === 'hung'), [], 'no worker killed')
  await stopLeavingNothing(t, p)
})
