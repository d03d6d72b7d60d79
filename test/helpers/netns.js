'use strict'

// A private network of real hosts for one test (or bench) run: Linux network namespaces, made
// here and removed at the end, whatever happens.
//
//   edge namespace                              host namespaces
//   ┌──────────────────────────────┐            ┌─────────────────────────────┐
//   │ lo 127.0.0.1 (edge HAProxy,  │            │ lo 127.0.0.1 (the workers)  │
//   │    load client)              │   veth     │ eth0 10.A.B.11 (front,      │
//   │ br0 10.A.B.1/24 ── vh1 ──────┼────────────┼──      agent)               │
//   │                 ── vh2 ──────┼─── …      └─────────────────────────────┘
//   └──────────────────────────────┘
//
// The hosts sit on one bridge, as machines on a switch: taking a host's port down
// (`partition`) drops its packets silently, so the edge meets a host that no longer answers, not
// one that refuses. Nothing is routed to or from the root namespace: traffic stays inside.
//
// Where namespaces cannot be made (not root, no `ip`, a sandbox), the fallback is distinct
// loopback addresses (127.0.0.2, 127.0.0.3, …) in our own namespace; it cannot partition a host,
// and `skipPartition` says why.

const { spawn, spawnSync } = require('node:child_process')
const { stopChild } = require('../helpers')

const IP = process.env.IP_COMMAND || 'ip'
let runs = 0

// Every namespace still standing, removed on the way out if a run could not do it itself: at
// exit, and on a signal that would end the process without an exit event (a runner's timeout),
// which is then raised again for whatever else listens or for the default action.
const standing = new Set()
function removeStanding () { for (const ns of standing) removeNamespaceSync(ns) }
process.on('exit', removeStanding)
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.once(signal, () => {
    removeStanding()
    process.kill(process.pid, signal)
  })
}

function ip (args) {
  const r = spawnSync(IP, args, { encoding: 'utf8', timeout: 10000 })
  if (r.error) throw new Error(`${IP} ${args.join(' ')}: ${r.error.message}`)
  if (r.status !== 0) throw new Error(`${IP} ${args.join(' ')} failed (${r.status}): ${(r.stderr || '').trim()}`)
  return r.stdout
}

function namespaces () {
  try {
    return ip(['netns', 'list']).split('\n').map((l) => l.split(' ')[0]).filter(Boolean)
  } catch {
    return []
  }
}

// The pids running in `ns`: ours, as the namespace is (see the header).
function pidsIn (ns) {
  try {
    return ip(['netns', 'pids', ns]).split('\n').map(Number).filter((n) => n > 0)
  } catch {
    return []
  }
}

function removeNamespaceSync (ns) {
  for (const pid of pidsIn(ns)) {
    try { process.kill(pid, 'SIGKILL') } catch {}
  }
  spawnSync(IP, ['netns', 'del', ns], { stdio: 'ignore', timeout: 10000 })
  standing.delete(ns)
}

// null when this process can make namespaces, else why not (for a skip message).
function namespaceProblem (probe = `pt${process.pid}probe`) {
  if (process.getuid?.() !== 0) return 'not root'
  try {
    ip(['netns', 'add', probe])
  } catch (err) {
    return err.message.split('\n')[0]
  }
  removeNamespaceSync(probe)
  return null
}

// 10.A.B.0/24, different from run to run (a reader of `ip` output can tell runs apart; the
// namespaces are private, so two runs could not collide anyway).
function subnet () {
  const a = 100 + (process.pid % 100)
  const b = (runs * 37 + Math.floor(Math.random() * 256)) % 256
  return `10.${a}.${b}`
}

// Start `cmd args` inside `ns` (null: here). Returns the child: `ip netns exec` execs the command
// in place, so the child's pid is the command's own and signals reach it directly.
function spawnIn (ns, cmd, args = [], options = {}) {
  return ns ? spawn(IP, ['netns', 'exec', ns, cmd, ...args], options) : spawn(cmd, args, options)
}

function exited (child) {
  return child.exitCode !== null || child.signalCode !== null
}

class Network {
  constructor ({ hosts, prefix }) {
    this.prefix = prefix
    this.children = new Set()
    this.destroyed = false
    this.problem = namespaceProblem(`${prefix}probe`)
    this.mode = this.problem ? 'loopback' : 'netns'
    if (this.mode === 'netns') {
      this.build(hosts)
    } else {
      this.hosts = Array.from({ length: hosts },
        (_, i) => ({ name: `h${i + 1}`, ns: null, address: `127.0.0.${i + 2}` }))
    }
    this.edge = this.mode === 'netns'
      ? { ns: `${prefix}-edge`, address: this.bridgeAddress }
      : { ns: null, address: '127.0.0.1' }
  }

  // A reason to skip what needs a partition, or null when it can be done.
  get skipPartition () {
    return this.problem
      ? `no network namespaces here (${this.problem}): hosts are loopback addresses, which cannot be cut off`
      : null
  }

  build (count) {
    const net = subnet()
    const edge = `${this.prefix}-edge`
    this.bridgeAddress = `${net}.1`
    this.hosts = []
    try {
      this.addNamespace(edge)
      ip(['-n', edge, 'link', 'add', 'br0', 'type', 'bridge', 'forward_delay', '0'])
      ip(['-n', edge, 'addr', 'add', `${net}.1/24`, 'dev', 'br0'])
      ip(['-n', edge, 'link', 'set', 'br0', 'up'])
      for (let i = 1; i <= count; i++) {
        const ns = `${this.prefix}-h${i}`
        const host = { name: `h${i}`, ns, address: `${net}.${10 + i}`, port: `vh${i}` }
        this.addNamespace(ns)
        // Made in the edge namespace with its peer put straight into the host's: no name ever
        // appears in the root namespace.
        ip(['-n', edge, 'link', 'add', host.port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns])
        ip(['-n', edge, 'link', 'set', host.port, 'master', 'br0'])
        ip(['-n', edge, 'link', 'set', host.port, 'up'])
        ip(['-n', ns, 'addr', 'add', `${host.address}/24`, 'dev', 'eth0'])
        ip(['-n', ns, 'link', 'set', 'eth0', 'up'])
        this.hosts.push(host)
      }
    } catch (err) {
      this.destroySync()
      throw err
    }
  }

  addNamespace (ns) {
    ip(['netns', 'add', ns])
    standing.add(ns)
    ip(['-n', ns, 'link', 'set', 'lo', 'up'])
  }

  get namespaces () {
    return this.mode === 'netns' ? [this.edge.ns, ...this.hosts.map((h) => h.ns)] : []
  }

  // `where`: 'edge', a host (object, name 'h2' or 0-based index), or null for here.
  nsOf (where) {
    if (where === null || where === undefined) return null
    if (where === 'edge') return this.edge.ns
    return this.host(where).ns
  }

  // Start a command where `where` says; it is stopped at destroy() if still running.
  spawn (where, cmd, args, options) {
    const child = spawnIn(this.nsOf(where), cmd, args, options)
    this.children.add(child)
    child.once('exit', () => this.children.delete(child))
    return child
  }

  // A host given as its object, its name ('h2') or its 0-based index.
  host (which) {
    const host = typeof which === 'object'
      ? which
      : typeof which === 'number' ? this.hosts[which] : this.hosts.find((h) => h.name === which)
    if (!host) throw new Error(`no host ${which}`)
    return host
  }

  // Cut a host off the network: its port on the bridge goes down, its packets are dropped.
  partition (which) {
    if (this.skipPartition) throw new Error(this.skipPartition)
    ip(['-n', this.edge.ns, 'link', 'set', this.host(which).port, 'down'])
  }

  heal (which) {
    if (this.skipPartition) throw new Error(this.skipPartition)
    ip(['-n', this.edge.ns, 'link', 'set', this.host(which).port, 'up'])
  }

  // Stop what we started (SIGTERM, SIGKILL after `grace`), then remove the namespaces; what
  // still runs in them (a worker that outlived its supervisor) goes with them.
  async destroy ({ grace = 3000 } = {}) {
    if (this.destroyed) return
    await Promise.all([...this.children].map((c) => stopChild(c, { grace })))
    this.destroySync()
  }

  destroySync () {
    this.destroyed = true
    for (const child of this.children) if (!exited(child)) child.kill('SIGKILL')
    for (const ns of [...this.namespaces].reverse()) if (standing.has(ns)) removeNamespaceSync(ns)
  }

  // The namespaces of this run that `ip netns list` still shows (none after destroy()).
  leftovers () {
    return namespaces().filter((ns) => ns.startsWith(`${this.prefix}-`) || ns === `${this.prefix}probe`)
  }
}

// A network of `hosts` hosts and an edge. With `t` (tap), it is removed at the test's teardown.
function createNetwork ({ hosts, t } = {}) {
  const network = new Network({ hosts, prefix: `pt${process.pid}n${++runs}` })
  t?.teardown(() => network.destroy())
  return network
}

module.exports = { createNetwork, namespaceProblem, spawnIn, namespaces }
