'use strict'

// What the parts that hold thousands of connections at once (bench/streams.js,
// bench/websocket.js) need of the machine: the descriptors this process may open (and a way to
// raise them, inherited by every process it starts), and the ephemeral ports left free.

const fs = require('node:fs')
const { spawnSync } = require('node:child_process')

// { soft, hard } RLIMIT_NOFILE of this process.
function openFilesLimit () {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'))
  const n = (x) => (x === 'unlimited' ? Infinity : Number(x))
  return m ? { soft: n(m[1]), hard: n(m[2]) } : { soft: 0, hard: 0 }
}

// Raises this process's RLIMIT_NOFILE, soft and hard, to `want` with `prlimit --pid` (util-linux;
// raising the hard limit needs CAP_SYS_RESOURCE), so that what it starts inherits it with no
// change to how the shared helpers start them; null once done, else why not.
function raiseOpenFiles (want) {
  if (openFilesLimit().soft >= want) return null
  const r = spawnSync('prlimit', ['--pid', String(process.pid), `--nofile=${want}:${want}`], { encoding: 'utf8' })
  if (openFilesLimit().soft >= want) return null
  return r.error ? r.error.message : (r.stderr || '').trim().split('\n')[0] || `prlimit exited ${r.status}`
}

// Descriptors the busiest process of a front holds with `connections` open: a relay (the
// embedded balancer, HAProxy, an nginx worker) two a connection, a worker one for each of its
// share, plus some spare.
const RELAYS = ['relay', 'embedded', 'haproxy', 'nginx-haproxy']
const SPARE_FDS = 200
function descriptorsNeeded (front, connections, workers) {
  if (RELAYS.includes(front)) return 2 * connections + SPARE_FDS
  return (front === 'direct' ? connections : Math.ceil(connections / workers)) + SPARE_FDS
}

// Local ports of the ephemeral range that a TCP socket holds now (any state, TIME_WAIT too).
function ephemeralPorts () {
  const [lo, hi] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
  const used = new Set()
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = ''
    try { text = fs.readFileSync(file, 'latin1') } catch { continue }
    for (const line of text.split('\n').slice(1)) {
      const local = line.trim().split(/\s+/)[1]
      if (!local) continue
      const port = parseInt(local.slice(local.lastIndexOf(':') + 1), 16)
      if (port >= lo && port <= hi) used.add(port)
    }
  }
  return { lo, hi, used: used.size, free: hi - lo + 1 - used.size }
}

module.exports = { openFilesLimit, raiseOpenFiles, ephemeralPorts, descriptorsNeeded, RELAYS, SPARE_FDS }
