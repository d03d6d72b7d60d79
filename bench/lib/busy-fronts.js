'use strict'

// Fronts each with one worker of its own that reports how long every request held it (the bench
// app with $REPORT_BUSY: from the request's headers to its last byte handed to the kernel), for
// the benches that measure how long a slow client holds a worker (bench/slow-clients.js,
// bench/streaming.js): direct (no front), the embedded balancer, HAProxy from the generated
// config, and nginx → HAProxy from the generated configs.
//
// Resolves { fronts: [{ name, url, worker: { port, busy } }], skipped }, where busy maps a
// request's `id=` query parameter to its worker's report { url, received, finished, busyMs }.

const { forkReady, freePorts } = require('./procs')
const { startGeneratedHaproxy, startGeneratedNginx, has, HAPROXY, NGINX } = require('./stack')

async function reportingWorker () {
  const [port] = await freePorts(1)
  const child = await forkReady('worker.js', { PORT: String(port), REPORT_BUSY: '1' })
  const busy = new Map()
  child.on('message', (m) => { if (m.busy) busy.set(new URLSearchParams(m.busy.url.split('?')[1]).get('id'), m.busy) })
  return { port, busy }
}

async function startBusyFronts () {
  const fronts = []
  const skipped = []
  const direct = await reportingWorker()
  fronts.push({ name: 'direct', url: `http://127.0.0.1:${direct.port}`, worker: direct })
  const viaEmbedded = await reportingWorker()
  const [embeddedPort] = await freePorts(1)
  await forkReady('embedded-front.js', { CONFIG: JSON.stringify({ options: { port: embeddedPort }, workers: [{ slot: 1, port: viaEmbedded.port }] }) })
  fronts.push({ name: 'embedded', url: `http://127.0.0.1:${embeddedPort}`, worker: viaEmbedded })
  if (!has(HAPROXY)) {
    skipped.push({ front: 'haproxy', reason: `${HAPROXY} not found` }, { front: 'nginx-haproxy', reason: `${HAPROXY} not found` })
    return { fronts, skipped }
  }
  const viaHaproxy = await reportingWorker()
  const [hp, hs] = await freePorts(2)
  const haproxy = await startGeneratedHaproxy({ workers: 1, workerPort: viaHaproxy.port, port: hp, statsPort: hs, ready: true })
  fronts.push({ name: 'haproxy', url: haproxy.url, worker: viaHaproxy })
  if (!has(NGINX)) {
    skipped.push({ front: 'nginx-haproxy', reason: `${NGINX} not found` })
    return { fronts, skipped }
  }
  const viaNginx = await reportingWorker()
  const [np, ns, nginxPort] = await freePorts(3)
  const behindNginx = await startGeneratedHaproxy({ workers: 1, workerPort: viaNginx.port, port: np, statsPort: ns, ready: true })
  const nginx = await startGeneratedNginx({ port: nginxPort, haproxySocket: behindNginx.httpSocket })
  fronts.push({ name: 'nginx-haproxy', url: nginx.url, worker: viaNginx })
  return { fronts, skipped }
}

module.exports = { startBusyFronts }
