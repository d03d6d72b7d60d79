'use strict'

// A fleet for one test file: hosts in network namespaces (./netns.js), each running `pool start
// --agent-port` with test/fixtures/fleet-app.js, an edge HAProxy in the edge's namespace, and a
// closed-loop load client beside it (test/fixtures/fleet-load.js). Without namespaces (not
// root), the hosts are loopback addresses 127.0.0.2, 127.0.0.3, …
//
// Everything started here is stopped, and every namespace removed, at the test's teardown.

const fs = require('node:fs')
const path = require('node:path')
const { onJsonLines, FIXTURES, BIN, cleanEnv, freePorts, waitFor, tempDir, parseJsonLines } = require('../helpers')
const { SYSTEM } = require('./haproxy')
const { createNetwork } = require('./netns')
const { HaproxyClient } = require('../../lib/haproxy/client')

const APP = path.join(FIXTURES, 'fleet-app.js')
const LOAD = path.join(FIXTURES, 'fleet-load.js')

class Fleet {
  constructor ({ net, dir, ports, platform }) {
    this.net = net
    this.dir = dir
    this.platform = platform // whose haproxy the edge runs
    this.ports = ports // front, agent, edge, stats, worker (the first of the workers')
    this.pools = new Map() // host name → its `pool start` child
    this.edge = null
    this.client = null
  }

  get mode () { return this.net.mode }
  host (h) { return this.net.host(h) }
  controlOf (h) { return path.join(this.dir, `${this.host(h).name}.sock`) }
  frontOf (h) { return `${this.host(h).address}:${this.ports.front}` }

  // `pool start` on host `h`, in its namespace, with JSON logs; resolves once it logged `started`.
  // `args`: more flags. The child keeps its access-log lines (`requests`) and its last output.
  async startHost (h, { workers = 2, args = [] } = {}) {
    const host = this.host(h)
    const { front, agent, worker } = this.ports
    const flags = [BIN, 'start', APP, '-n', String(workers), '--host', host.address, '--port', String(front),
      '--agent-port', String(agent), '--worker-port', String(worker),
      // In a namespace the host has its own 127.0.0.1; on loopback, its own address.
      '--worker-host', this.mode === 'netns' ? '127.0.0.1' : host.address,
      '--control', this.controlOf(host), '--stats-port', '0', '--log-format', 'json',
      '--timeout', '10s', '--graceful-timeout', '10s', ...args]
    const child = this.net.spawn(host, process.execPath, flags,
      { env: cleanEnv({ FLEET_HOST: host.name }), stdio: ['ignore', 'pipe', 'pipe'] })
    child.output = '' // the last lines, for an error message
    child.requests = [] // the host balancer's access-log lines
    child.logs = [] // every other JSON line
    child.started = false
    child.stdout.on('data', (d) => { child.output = (child.output + d).slice(-6000) })
    onJsonLines(child.stdout, (rec) => {
      if (rec.event === 'request') return child.requests.push(rec)
      child.logs.push(rec)
      if (rec.event === 'started') child.started = true
    })
    child.stderr.setEncoding('utf8').on('data', (d) => { child.output = (child.output + d).slice(-6000) })
    child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
    this.pools.set(host.name, child)
    await waitFor(() => {
      if (child.exitCode !== null) throw new Error(`pool on ${host.name} exited: ${child.output}`)
      return child.started
    }, { timeout: 15000, what: `the pool on ${host.name} to start` })
    return child
  }

  pool (h) { return this.pools.get(this.host(h).name) }

  // SIGKILL host `h`'s pool; resolves once the edge shows it DOWN: { row, ms }, its edge row
  // then and the ms since the kill.
  async killHost (h, { timeout = 8000 } = {}) {
    const pool = this.pool(h)
    const killedAt = Date.now()
    pool.kill('SIGKILL')
    await pool.exited
    const row = await this.edgeShows(h, { state: 'down' }, { timeout })
    return { row, ms: Date.now() - killedAt }
  }

  // An edge HAProxy on `cfg` (text), in the edge's namespace; resolves once its runtime socket
  // (the config's first `stats socket`) answers at level admin. The first one started is the
  // fleet's edge (edgeServers, edgeShows, startLoad); more may run beside it.
  async startEdge (cfg, { name = 'edge' } = {}) {
    const file = path.join(this.dir, `${name}.cfg`)
    fs.writeFileSync(file, cfg)
    const edge = this.net.spawn('edge', this.platform.haproxy, ['-db', '-f', file],
      { stdio: ['ignore', 'ignore', 'pipe'] })
    edge.output = ''
    edge.stderr.setEncoding('utf8').on('data', (d) => { edge.output = (edge.output + d).slice(-4000) })
    const client = new HaproxyClient({ socket: /^\s*stats socket (\S+)/m.exec(cfg)[1], timeout: 1000 })
    await waitFor(async () => {
      if (edge.exitCode !== null) throw new Error(`the edge haproxy exited: ${edge.output}`)
      return (await client.level()) === 'admin'
    }, { timeout: 5000, what: 'the edge\'s runtime socket' })
    if (!this.client) Object.assign(this, { edge, client })
    return { edge, client }
  }

  // The edge's servers of `backend`, by the host whose address each sends to (hosts it does not
  // send to are missing): { h1: row, … }, each row `show stat`'s with `state`.
  async edgeServers (backend = 'fleet') {
    const servers = Object.values(await this.client.servers(backend))
    const out = {}
    for (const h of this.net.hosts) {
      const row = servers.find((s) => s.addr === this.frontOf(h))
      if (row) out[h.name] = row
    }
    return out
  }

  // Until the edge's server for `h` matches `want` ({ state, slim }, or a function of the row).
  edgeShows (h, want, { timeout = 8000, backend = 'fleet' } = {}) {
    const name = this.host(h).name
    const ok = typeof want === 'function' ? want : (s) => Object.entries(want).every(([k, v]) => s[k] === v)
    return waitFor(async () => {
      const s = (await this.edgeServers(backend))[name]
      return s && ok(s) && s
    },
    {
      timeout,
      interval: 50,
      what: `the edge to show ${name} ${typeof want === 'function' ? want.toString() : JSON.stringify(want)}`
    })
  }

  // The load client in the edge's namespace, through the edge. `stop()` asks it to send no
  // more; `done` resolves with its requests as { start, end, status, host }.
  startLoad ({ maxMs, count = 3000, timeout = 15000, concurrency = 8, ms = [10, 40] }) {
    const options = { url: `http://127.0.0.1:${this.ports.edge}`, concurrency, count, maxMs, timeout, ms }
    const child = this.net.spawn('edge', process.execPath, [LOAD, JSON.stringify(options)],
      { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8').on('data', (d) => { out += d })
    child.stderr.setEncoding('utf8').on('data', (d) => { err += d })
    const done = new Promise((resolve, reject) => child.once('exit', () => {
      const requests = loadResults(out)
      if (!requests) return reject(new Error(`the load client ended without results: ${err.slice(-2000)}`))
      resolve(requests)
    }))
    const started = waitFor(() => out.includes('"event":"started"'),
      { timeout: 5000, what: 'the load client to start' })
    started.catch(() => {}) // awaited where it matters; `done` says the rest
    return { started, done, stop: () => child.kill('SIGTERM') }
  }
}

// A fleet of `hosts` hosts, removed at `t`'s teardown; its edge runs `platform`'s haproxy.
async function createFleet (t, { hosts, platform = SYSTEM }) {
  const net = createNetwork({ hosts, t })
  const dir = tempDir(t, 'pool-fleet-', { openToOthers: true })
  const [front, agent, edge, stats, worker] = await freePorts(8)
  return new Fleet({ net, dir, ports: { front, agent, edge, stats, worker }, platform })
}

// The requests of a load client (test/fixtures/fleet-load.js) from its stdout `out`, as
// { start, end, status, host }; null when it printed no `done` line.
function loadResults (out) {
  const done = parseJsonLines(out).find((l) => l.event === 'done')
  return done ? done.requests.map(([start, end, status, host]) => ({ start, end, status, host })) : null
}

// Failed requests (anything but 200), the first two of them, and the 200s by host.
function summary (requests) {
  const failed = requests.filter((r) => r.status !== 200)
  const byHost = {}
  for (const r of requests) if (r.status === 200) byHost[r.host] = (byHost[r.host] || 0) + 1
  return {
    total: requests.length,
    failed: failed.length,
    failures: failed.slice(0, 2).map((r) => `${r.status} ${String(r.host).slice(0, 60)}`),
    byHost
  }
}

module.exports = { createFleet, summary, loadResults, APP, LOAD }
