'use strict'

// A real HAProxy for comparison, configured the way the design uses it: `maxconn 1` per
// server, one backend queue, `option redispatch`, `retries 3`. The config goes to a temp dir
// that is removed afterwards. One thread, like the embedded balancer's one event loop.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { spawnTracked, waitForPort } = require('./procs')

const HAPROXY = process.env.HAPROXY || '/usr/sbin/haproxy'

function available () {
  return spawnSync(HAPROXY, ['-v'], { stdio: 'ignore' }).status === 0
}

// fronts: [{ port, workerPorts }]
function config (fronts) {
  const lines = [
    'global',
    '  maxconn 4096',
    '  nbthread 1',
    'defaults',
    '  mode http',
    '  timeout connect 5s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout queue 20s',
    '  option redispatch',
    '  retries 3'
  ]
  fronts.forEach((f, i) => {
    lines.push(`frontend fe${i}`, `  bind 127.0.0.1:${f.port}`, `  default_backend be${i}`)
    lines.push(`backend be${i}`, '  balance first')
    f.workerPorts.forEach((p, j) => lines.push(`  server w${j + 1} 127.0.0.1:${p} maxconn 1`))
  })
  return lines.join('\n') + '\n'
}

async function startHaproxy (fronts) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-bench-haproxy-'))
  const cfg = path.join(dir, 'haproxy.cfg')
  fs.writeFileSync(cfg, config(fronts))
  const child = spawnTracked(HAPROXY, ['-f', cfg, '-db', '-q'])
  child.exited.then(() => fs.rmSync(dir, { recursive: true, force: true }))
  await Promise.all(fronts.map((f) => waitForPort(f.port)))
  return child
}

module.exports = { startHaproxy, available, config }
