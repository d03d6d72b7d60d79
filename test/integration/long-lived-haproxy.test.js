'use strict'
// Long-lived responses under `pool start --balancer haproxy` (issue 37), on each platform, with
// nginx in front too: streams go to the streams backend and hold no render place, a hang-up
// reaches the app through both, the worker ends a wait past --read-timeout alone. The embedded
// balancer's cases: long-lived.test.js.
const t = require('tap')
const path = require('node:path')
const { FIXTURES, request, waitFor } = require('../helpers')
const { startNginxInFront, onPlatforms, NGINX_WORKER_USER } = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool, allUp } = require('../helpers/haproxy-pool')
const { manyStreams, tally, appClosedAt, hangUpDelays, killed } = require('../helpers/streams')

const APP = path.join(FIXTURES, 'long-lived.js')
const SSE = { accept: 'text/event-stream' }

// On each platform: what HAProxy does with the streams backend (the route by header and path,
// abortonclose from the defaults cutting a stream whose client left) is what a new version can change.
onPlatforms(t, '--balancer haproxy: streams go to the streams backend, 300 of them three times --timeout long on two ' +
  'workers; a hang-up reaches the app; renders beside them', { nginx: true }, async (t, platform) => {
  const lab = await startLabHaproxy(t,
    { platform, workers: 2, nginxUser: NGINX_WORKER_USER, options: { streamRoutes: '/wait', readTimeout: 2000 } })
  const pool = await startHaproxyPool(t, lab, { app: APP, args: ['--timeout', '1s', '--read-timeout', '2s'] })
  await waitFor(allUp(lab.client), { timeout: 10000, what: 'both servers UP' })
  const streams = manyStreams(300, (i) => `${lab.url}/stream?ms=3000&every=100&id=h${i}`, { headers: SSE })
  await waitFor(() => streams.answered === 300, { what: 'the 300 streams under way' })
  const renders = await Promise.all([1, 2, 3, 4].map(() => request(`${lab.url}/render?ms=50`, { timeout: 10000 })))
  t.same(renders.map((r) => r.status), [200, 200, 200, 200], 'renders beside them: each worker\'s render slot is free')
  t.same(tally(await streams), { 200: 300, done: 300, cut: 0 }, 'every stream complete: none cut, none 503')
  t.same(killed(pool), [], 'no worker killed')
  const delays = await hangUpDelays(pool, lab.url, 5, { headers: SSE })
  t.ok(Math.max(...delays) < 100,
    `the app saw each hang-up within ${Math.max(...delays)} ms (${delays.join(', ')}), a token a second`)
  // The worker enforces --read-timeout behind HAProxy: a long wait on a stream route ends alone.
  const waited = await request(`${lab.url}/wait?ms=5000&id=hw`, { timeout: 10000 })
  t.equal(waited.status, 504, 'a wait past --read-timeout: the worker\'s 504, through HAProxy')
  await waitFor(() => appClosedAt(pool.logs, 'hw') !== undefined, { what: 'the app to see it close' })

  // nginx in front: the same streams, and a hang-up through both.
  const { url: front } = await startNginxInFront(t, lab.dir, { platform })
  t.same(tally(await manyStreams(100, (i) => `${front}/stream?ms=2000&every=100&id=n${i}`, { headers: SSE })),
    { 200: 100, done: 100, cut: 0 }, 'nginx → HAProxy → pool: 100 streams complete')
  const through = await hangUpDelays(pool, front, 5, { headers: SSE })
  t.ok(Math.max(...through) < 100,
    `nginx → HAProxy: each hang-up within ${Math.max(...through)} ms (${through.join(', ')})`)
})
