'use strict'

// A DNS server for a test: Debian's dnsmasq, run in the foreground in one of a fleet's
// namespaces (./netns.js), answering only for the names the test gives it, from a hosts file it
// re-reads on SIGHUP (A records) and from its command line (SRV records: a change restarts it).
// Nothing is forwarded anywhere: it reads no resolv.conf and knows no upstream server.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { waitFor, stopChild } = require('../helpers')

const DNSMASQ = process.env.DNSMASQ || '/usr/sbin/dnsmasq'

// null when dnsmasq can run here, else why not (for a skip message).
function dnsProblem () {
  const r = spawnSync(DNSMASQ, ['--version'], { encoding: 'utf8' })
  if (r.error) return `no dnsmasq (${DNSMASQ}: ${r.error.code}); scripts/setup installs dnsmasq-base`
  return null
}

class DnsServer {
  // net: the test's Network; where: the namespace it listens in ('edge'); address: where the
  // edge reaches it; port: a free UDP and TCP port there.
  constructor ({ net, dir, where = 'edge', address = '127.0.0.1', port }) {
    Object.assign(this, { net, where, address, port })
    this.hostsFile = path.join(dir, 'dns-hosts')
    this.pidFile = path.join(dir, 'dnsmasq.pid')
    this.records = new Map() // name → [address, …]
    this.srv = [] // [name, target, port], …
    this.child = null
  }

  get nameserver () { return `${this.address}:${this.port}` }

  async start () {
    this.writeHosts()
    const args = ['--keep-in-foreground', '--no-resolv', '--no-hosts', `--addn-hosts=${this.hostsFile}`,
      `--listen-address=${this.address}`, '--bind-interfaces', `--port=${this.port}`, '--local-ttl=0',
      `--pid-file=${this.pidFile}`, '--log-facility=-',
      // As root it would drop to nobody, who may not read the hosts file in a private directory.
      ...(process.getuid?.() === 0 ? ['--user=root', '--group=root'] : []),
      ...this.srv.map(([name, target, port]) => `--srv-host=${name},${target},${port}`)]
    const child = this.net.spawn(this.where, DNSMASQ, args, { stdio: ['ignore', 'ignore', 'pipe'] })
    child.output = ''
    child.hostsReads = 0 // its "read FILE - N names" lines: one at the start, one per SIGHUP
    let partial = ''
    child.stderr.setEncoding('utf8').on('data', (d) => {
      child.output = (child.output + d).slice(-4000)
      const lines = (partial + d).split('\n')
      partial = lines.pop()
      child.hostsReads += lines.filter((l) => l.includes(`read ${this.hostsFile} - `)).length
    })
    this.child = child
    await waitFor(() => {
      if (child.exitCode !== null) throw new Error(`dnsmasq exited (${child.exitCode}): ${child.output}`)
      return /started, version/.test(child.output) && fs.existsSync(this.pidFile)
    }, { timeout: 5000, what: 'dnsmasq to start' })
  }

  // `name` answers A records for `addresses` from now on (none: NOERROR without an answer).
  async set (name, addresses) {
    this.records.set(name, addresses)
    this.writeHosts()
    const reads = this.child.hostsReads
    this.child.kill('SIGHUP')
    await waitFor(() => this.child.hostsReads > reads, { timeout: 5000, what: 'dnsmasq to re-read its hosts file' })
  }

  // SRV records, [[name, target, port], …]: dnsmasq takes them on its command line only.
  async setSrv (records) {
    this.srv = records
    await this.stop()
    await this.start()
  }

  writeHosts () {
    const lines = []
    for (const [name, addresses] of this.records) for (const a of addresses) lines.push(`${a} ${name}`)
    fs.writeFileSync(this.hostsFile, lines.join('\n') + '\n', { mode: 0o644 })
  }

  // DNS unreachable: the server is gone (queries time out).
  async stop () {
    if (this.child) await stopChild(this.child)
    this.child = null
  }
}

module.exports = { DnsServer, dnsProblem, DNSMASQ }
