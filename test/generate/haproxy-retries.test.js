'use strict'

// The generated HAProxy config's retries (lib/generate/haproxy.js, `retry-on conn-failure
// empty-response`, `retries 1`, `option redispatch 1`, `disable-l7-retry` for all but GET and
// HEAD), against the real HAProxy (Debian 12's and Debian 13's) and a real pool (`--balancer haproxy`):
//   a GET whose worker is SIGKILLed mid-request is answered by another worker;
//   a POST in the same situation is not replayed: 502, and the app saw it once;
//   a GET that kills every worker it reaches kills two, and the client gets a 502;
//   a refused connection is still retried on another worker, whatever the method.

const t = require('tap')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { request, sleep, waitFor, readJsonLines } = require('../helpers')
const { onPlatforms } = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool, allUp } = require('../helpers/haproxy-pool')

// The app the pool runs, written to the test's temp dir. Every request is appended to HIT_LOG
// (synchronously, so that the line survives a SIGKILL) before anything else happens to it.
//   /hold?ms=N  answers after blocking N ms       /kill  SIGKILLs its own worker
const APP = `'use strict'
const fs = require('node:fs')
const cell = new Int32Array(new SharedArrayBuffer(4))
module.exports = (req, res) => {
  const url = new URL(req.url, 'http://x')
  const hit = { pid: process.pid, method: req.method, path: url.pathname }
  fs.appendFileSync(process.env.HIT_LOG, JSON.stringify(hit) + '\\n')
  if (url.pathname === '/kill') process.kill(process.pid, 'SIGKILL')
  if (url.pathname === '/hold') Atomics.wait(cell, 0, 0, Number(url.searchParams.get('ms')) || 0)
  req.resume()
  req.on('end', () => res.end(JSON.stringify({ pid: process.pid })))
}
`

// HAProxy from the generated config (`edit` may change it) and a pool of `workers` running APP.
async function startStack (t, { workers, edit, platform }) {
  const lab = await startLabHaproxy(t, { workers, edit, platform })
  const app = path.join(lab.dir, 'app.js')
  fs.writeFileSync(app, APP)
  const hitLog = path.join(lab.dir, 'hits.log')
  fs.writeFileSync(hitLog, '')
  const pool = await startHaproxyPool(t, lab, { workers, app, env: { HIT_LOG: hitLog } })
  await waitFor(allUp(lab.client), { timeout: 5000, what: 'every server UP' })
  const hits = () => readJsonLines(hitLog)
  const killedWorkers = () => pool.logs.filter((l) => l.event === 'exit' && l.signal === 'SIGKILL').map((l) => l.pid)
  return { lab, pool, hits, killedWorkers }
}

// A request sent through HAProxy while its worker is SIGKILLed once the app has it.
async function killMidRequest (stack, method) {
  const answer = request(`${stack.lab.url}/hold?ms=1000`,
    { method, headers: { 'content-type': 'text/plain' }, body: method === 'POST' ? 'order=1' : undefined })
  const first = await waitFor(() => stack.hits()[0], { timeout: 5000, interval: 2, what: 'the request at a worker' })
  process.kill(first.pid, 'SIGKILL')
  return { first, response: await answer }
}

onPlatforms(t, 'a GET whose worker is SIGKILLed mid-request is answered by another worker', async (t, platform) => {
  const stack = await startStack(t, { platform, workers: 2 })
  const { first, response } = await killMidRequest(stack, 'GET')
  t.equal(response.status, 200, 'the client gets 200')
  const answeredBy = JSON.parse(response.body).pid
  t.not(answeredBy, first.pid, 'from another worker')
  t.same(stack.hits().map((h) => h.pid), [first.pid, answeredBy],
    'the GET reached the killed worker, then the one that answered')
  await waitFor(() => stack.killedWorkers().includes(first.pid), { timeout: 5000, what: 'the pool saw the kill' })
})

onPlatforms(t, 'a POST whose worker is SIGKILLed mid-request is not replayed', async (t, platform) => {
  const stack = await startStack(t, { platform, workers: 2 })
  const { first, response } = await killMidRequest(stack, 'POST')
  t.equal(response.status, 502, 'the client gets 502')
  await sleep(300) // a replay, if there were one, would have reached a worker by now
  t.same(stack.hits(), [{ pid: first.pid, method: 'POST', path: '/hold' }],
    'the app saw the POST once, in the killed worker')
})

onPlatforms(t, 'a GET that kills every worker it reaches kills two of them, and gets a 502', async (t, platform) => {
  const stack = await startStack(t, { platform, workers: 4 })
  const response = await request(`${stack.lab.url}/kill`)
  t.equal(response.status, 502, 'the client gets 502')
  await sleep(300) // a third try, if there were one, would have reached a worker by now
  const reached = stack.hits().map((h) => h.pid)
  t.equal(reached.length, 2, 'it was tried twice: once, then one replay')
  t.equal(new Set(reached).size, 2, 'on two different workers')
  await waitFor(() => stack.killedWorkers().length === 2, { timeout: 5000, what: 'two worker exits' })
  t.same(stack.killedWorkers().sort(), [...reached].sort(), 'those two, and no other, were killed')

  // Why `retries 1`: HAProxy counts a replay as a retry, so the retry budget is also the replay
  // budget; with `retries 3` the same GET went on killing (measured by hand: four of four workers
  // in most runs, not in every one, so it is not asserted here).
})

// Two in-process HTTP servers as the workers, set READY by hand; worker1's port then refuses
// connections while HAProxy still has it READY (as in the ms before the pool's MAINT).
onPlatforms(t, 'a refused connection is retried on another worker, for a POST too', async (t, platform) => {
  const lab = await startLabHaproxy(t,
    { platform, workers: 2, edit: (cfg) => cfg.replace('check inter 2s', 'check inter 60s') })
  const seen = []
  const servers = []
  for (let i = 0; i < 2; i++) {
    const server = http.createServer((req, res) => {
      seen.push(`${req.method} worker${i + 1}`)
      req.resume()
      req.on('end', () => res.end('ok'))
    })
    await new Promise((resolve) => server.listen(lab.workerPort + i, '127.0.0.1', resolve))
    t.teardown(() => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
    servers.push(server)
    await lab.client.setServerState('pool', `worker${i + 1}`, 'ready')
  }
  await new Promise((resolve) => servers[0].close(resolve))
  const post = await request(`${lab.url}/order`, { method: 'POST', body: 'order=1' })
  t.equal(post.status, 200, 'the POST is answered')
  t.same(seen, ['POST worker2'], 'by worker2, the only one that got it')
  t.equal((await lab.client.servers('pool')).worker1.wredis, 1, 'HAProxy redispatched it from worker1')
})
