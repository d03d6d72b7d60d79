'use strict'
// Socket.IO with its default transports through the generated HAProxy config (and nginx in
// front of it): every request of a session reaches the worker that opened it, which HAProxy
// learns from the handshake's answer (a stick table of session id → server), so no client gets
// 400 "Session ID unknown". On main's config a poll went to any worker, and most sessions failed.
const t = require('tap')
const path = require('node:path')
const { io } = require('socket.io-client')
const { FIXTURES, waitFor } = require('../helpers')
const { startNginxInFront, onPlatforms, NGINX_WORKER_USER } = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool } = require('../helpers/haproxy-pool')

const APP = path.join(FIXTURES, 'websocket.js')

// `n` clients chat once each; resolves with what they saw.
async function chat (t, url, n) {
  const clients = Array.from({ length: n }, () => io(url, { reconnection: false, forceNew: true }))
  t.teardown(() => clients.forEach((c) => c.close()))
  const errors = []
  clients.forEach((c) => {
    c.on('connect_error', (err) => errors.push(err.message))
    c.on('disconnect', (why) => { if (why !== 'io client disconnect') errors.push(why) })
  })
  const upgraded = () => clients.filter((c) => c.connected && c.io.engine.transport.name === 'websocket').length
  await waitFor(() => upgraded() === n || errors.length > 0, { timeout: 20000, what: 'every client on a websocket' })
    .catch(() => {})
  const pids = await Promise.all(clients.map((c, i) =>
    c.connected ? c.timeout(5000).emitWithAck('chat', `hi ${i}`).catch(() => null) : null))
  return {
    upgraded: upgraded(),
    acked: pids.filter(Boolean).length,
    workers: new Set(pids.filter(Boolean)).size,
    errors
  }
}

async function answered400 (lab) {
  const rows = await lab.client.showStat('pool_streams')
  return rows.filter((r) => r.svname !== 'BACKEND' && r.svname !== 'FRONTEND')
    .reduce((n, r) => n + Number(r.hrsp_4xx || 0), 0)
}

onPlatforms(t, 'HAProxy mode, -n 2: 60 Socket.IO clients with default transports, ' +
  'none unknown to its worker', async (t, platform) => {
  const lab = await startLabHaproxy(t, { workers: 2, platform })
  await startHaproxyPool(t, lab, { workers: 2, app: APP })
  t.same(await chat(t, lab.url, 60), { upgraded: 60, acked: 60, workers: 2, errors: [] },
    'each polled, upgraded and chatted, on both workers')
  t.equal(await answered400(lab), 0, 'no request answered 400 (Session ID unknown)')
  const table = await lab.client.command('show table pool_streams')
  t.match(table, /used:60\b/, 'HAProxy holds a session per client')
})

onPlatforms(t, 'nginx → HAProxy → pool: the same through nginx', { nginx: true }, async (t, platform) => {
  const lab = await startLabHaproxy(t, { workers: 2, nginxUser: NGINX_WORKER_USER, platform })
  await startHaproxyPool(t, lab, { workers: 2, app: APP })
  const { port } = await startNginxInFront(t, lab.dir, { platform })
  t.same(await chat(t, `http://127.0.0.1:${port}`, 30), { upgraded: 30, acked: 30, workers: 2, errors: [] })
  t.equal(await answered400(lab), 0, 'no request answered 400')
})
