'use strict'

// HAProxy as bench/lib/haproxy.js configures it (maxconn 1 per server, one backend queue), plus
// the one thing HAProxy has against a standing queue: a `timeout queue` below the clients'
// deadline, so that what it does serve has not waited past it. A fixed limit: HAProxy cannot
// watch the queue's sojourn time or serve newest first.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { config, available } = require('./haproxy')
const { spawnTracked, waitForPort } = require('./procs')

const HAPROXY = process.env.HAPROXY || '/usr/sbin/haproxy'

// The backend's own `timeout queue` overrides the one in `defaults`.
function tunedConfig ({ port, workerPorts, queueTimeoutMs }) {
  return config([{ port, workerPorts }]) + `  timeout queue ${queueTimeoutMs}ms\n`
}

async function startTunedHaproxy (front) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-haproxy-tq-'))
  const cfg = path.join(dir, 'haproxy.cfg')
  fs.writeFileSync(cfg, tunedConfig(front))
  const child = spawnTracked(HAPROXY, ['-f', cfg, '-db', '-q'])
  child.exited.then(() => fs.rmSync(dir, { recursive: true, force: true }))
  await waitForPort(front.port)
  return child
}

module.exports = { startTunedHaproxy, tunedConfig, available }
