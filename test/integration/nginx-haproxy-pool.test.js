'use strict'

// The production topology end to end: nginx → HAProxy (unix socket) → pool, all from the
// generated configs, serving the SSR demo; on Debian 12's nginx and HAProxy and on Debian 13's.

const t = require('tap')
const path = require('node:path')
const { ROOT, request, waitFor } = require('../helpers')
const { startNginxInFront, onPlatforms, NGINX_WORKER_USER } = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool, allUp } = require('../helpers/haproxy-pool')

onPlatforms(t, 'nginx → HAProxy → pool serves the demo page; ' +
  '/ping is nginx\'s', { nginx: true }, async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2, nginxUser: NGINX_WORKER_USER })
  const pool = await startHaproxyPool(t, lab, { workers: 2, app: path.join(ROOT, 'examples/ssr/server.js') })
  await waitFor(allUp(lab.client), { timeout: 3000, what: 'both servers UP' })

  const { url } = await startNginxInFront(t, lab.dir, { platform })

  const before = (await lab.client.showStat('pool')).find((r) => r.svname === 'BACKEND').stot
  const ping = await request(`${url}/ping`)
  t.equal(ping.status, 200)
  t.equal(ping.body, 'pong\n', '/ping is answered by nginx')
  t.equal((await lab.client.showStat('pool')).find((r) => r.svname === 'BACKEND').stot, before,
    '…without reaching HAProxy\'s backend')

  const page = await request(`${url}/`)
  t.equal(page.status, 200)
  t.match(page.headers['content-type'], /text\/html/)
  t.match(page.body, /<main class="catalogue">/, 'the catalogue page, rendered by a worker')
  t.match(page.body, /Search the catalogue/)
  const after = (await lab.client.servers('pool'))
  t.ok(after.worker1.stot + after.worker2.stot >= 1, 'HAProxy sent it to one of the pool\'s servers')
  t.notOk(pool.logs.some((l) => l.level >= 40), 'nothing went wrong in the pool')
})
