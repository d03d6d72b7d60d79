'use strict'

// A client for HAProxy's runtime API (the `stats socket`): one command per connection (no session to go
// stale across a reload), one at a time in order, so `drain` then `maint` never apply reversed.

const net = require('node:net')
const { poolError, codes } = require('../errors')
const { parseStat, serverState } = require('./stat')
const { parseServersState } = require('./servers-state')

const STATES = ['ready', 'drain', 'maint']
// Names as HAProxy accepts them; this also keeps `;` and newlines (another command) out.
const NAME = /^[A-Za-z0-9_.:-]+$/
const TCP_ADDRESS = /^(?:ipv4@|tcp@)?(\[[^\]]+\]|[^/:@]+):(\d+)$/

// 'host:port', 'ipv4@host:port' or '[::1]:port' → TCP; anything else is a unix socket path,
// optionally written 'unix@PATH' as in haproxy.cfg.
function parseAddress (socket) {
  if (typeof socket !== 'string' || socket === '') {
    throw poolError(codes.BAD_OPTION,
      `the HAProxy socket must be a unix socket path or host:port (got ${JSON.stringify(socket)})`)
  }
  const tcp = TCP_ADDRESS.exec(socket)
  if (tcp) return { host: tcp[1].replace(/^\[|\]$/g, ''), port: Number(tcp[2]), label: socket }
  const path = socket.replace(/^unix[@:]/, '')
  return { path, label: path }
}

function checkName (what, name) {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw poolError(codes.BAD_OPTION,
      `${JSON.stringify(name)} is not a valid HAProxy ${what} name (letters, digits, '-', '_', '.', ':')`)
  }
}

class HaproxyClient {
  constructor ({ socket, timeout = 2000 } = {}) {
    this.address = parseAddress(socket)
    this.socket = this.address.label
    this.timeout = timeout
    this._tail = Promise.resolve()
  }

  // Run one command; resolves with HAProxy's raw reply. Rejects only when HAProxy could not be
  // reached or did not answer in time: replies that report an error are for the caller to read.
  command (cmd, { timeout = this.timeout } = {}) {
    const run = () => this._exchange(cmd, timeout)
    const result = this._tail.then(run, run)
    this._tail = result.catch(() => {})
    return result
  }

  _exchange (cmd, timeout) {
    const { path, host, port } = this.address
    return new Promise((resolve, reject) => {
      const chunks = []
      const conn = path ? net.createConnection({ path }) : net.createConnection({ host, port })
      const timer = setTimeout(() => conn.destroy(this._timeoutError(cmd, timeout)), timeout)
      conn.on('connect', () => conn.write(cmd + '\n'))
      conn.on('data', (chunk) => chunks.push(chunk))
      conn.on('error', (err) => { clearTimeout(timer); reject(this._connectError(err)) })
      conn.on('close', (hadError) => {
        clearTimeout(timer)
        if (!hadError) resolve(Buffer.concat(chunks).toString('utf8'))
      })
    })
  }

  // `set server BE/SRV state ready|drain|maint`. HAProxy answers a bare newline on success.
  // `backend` may be a list: the same server of each gets the state, in one command line (HAProxy
  // runs each, whatever the others answer; every error is reported).
  async setServerState (backend, server, state) {
    if (!STATES.includes(state)) {
      throw new TypeError(`state must be one of ${STATES.join(', ')} (got ${JSON.stringify(state)})`)
    }
    const backends = [].concat(backend)
    for (const b of backends) checkName('backend', b)
    checkName('server', server)
    const cmds = backends.map((b) => `set server ${b}/${server} state ${state}`)
    const reply = await this.command(cmds.join('; '))
    this._checkReply(reply, { backend: backends[0], server, cmd: cmds.join('; ') })
  }

  // `show stat` rows of one proxy, or of all without an argument.
  async showStat (backend) {
    if (backend !== undefined) checkName('backend', backend)
    const cmd = backend === undefined ? 'show stat' : `show stat ${backend} -1 -1`
    const reply = await this.command(cmd)
    if (!reply.startsWith('# ')) this._checkReply(reply, { backend, cmd })
    return parseStat(reply)
  }

  // svname → { admin: 'maint'|'drain'|'ready', op, adminBits, addr, port } (servers-state.js).
  async serversState (backend) {
    checkName('backend', backend)
    const cmd = `show servers state ${backend}`
    const reply = await this.command(cmd)
    const servers = parseServersState(reply)
    if (servers === null) {
      this._checkReply(reply.trim() === '' ? `unexpected empty reply to "${cmd}"` : reply, { backend, cmd })
    }
    return servers
  }

  // svname → that server's `show stat` row, plus `state` ('ready', 'drain', 'maint', 'down').
  async servers (backend) {
    const rows = await this._backendRows(backend)
    const out = {}
    for (const row of rows) {
      if (row.svname === 'BACKEND' || row.svname === 'FRONTEND') continue
      out[row.svname] = { ...row, state: serverState(row.status) }
    }
    return out
  }

  // Check that `backend` exists and holds every server in `serverNames`, and that the socket
  // is at `level admin`. Resolves with servers(backend); otherwise throws a PoolError that names
  // everything missing (details: { backend, missing }).
  async verify (backend, serverNames = []) {
    const servers = await this.servers(backend)
    const missing = serverNames.filter((name) => !(name in servers))
    if (missing.length > 0) {
      throw poolError(codes.HAPROXY_NO_SERVER,
        `HAProxy backend '${backend}' (socket ${this.socket}) has no ` +
          `server${missing.length > 1 ? 's' : ''} ${listNames(missing)}: ` +
          `the pool needs ${describeNames(serverNames)}; add them (\`pool config haproxy -n ${serverNames.length}\` ` +
          'prints a matching config)',
        { details: { backend, missing } })
    }
    await this.requireAdmin()
    return servers
  }

  // 'admin', 'operator' or 'user': the level of the socket we talk to.
  async level () {
    const reply = await this.command('show cli level')
    return reply.trim()
  }

  async requireAdmin () {
    const level = await this.level()
    if (level !== 'admin') throw this._levelError(`its level is '${level}'`)
  }

  // `show info` as an object ({ Pid, Uptime_sec, Version, ... }): a new Pid or a smaller
  // Uptime_sec means HAProxy was restarted or reloaded and forgot runtime server states.
  async info () {
    const reply = await this.command('show info')
    const out = {}
    for (const line of reply.split('\n')) {
      const at = line.indexOf(': ')
      if (at > 0) out[line.slice(0, at)] = toInfoValue(line.slice(at + 2))
    }
    if (out.Pid === undefined) this._checkReply(reply, { cmd: 'show info' })
    return out
  }

  async _backendRows (backend) {
    const rows = await this.showStat(backend)
    if (!rows.some((r) => r.svname === 'BACKEND')) {
      throw this._noBackend(backend, `'${backend}' is a frontend, not a backend`)
    }
    return rows
  }

  // Turn a reply that reports an error into a PoolError naming what the pool asked for.
  _checkReply (reply, { backend, server, cmd }) {
    const text = reply.trim()
    if (text === '') return
    if (text.startsWith('Permission denied')) throw this._levelError(`it refused "${cmd}"`)
    if (text.startsWith('No such backend') || text.startsWith('No such proxy') ||
      text.startsWith("Can't find backend")) {
      throw this._noBackend(backend)
    }
    if (text.startsWith('No such server')) {
      throw poolError(codes.HAPROXY_NO_SERVER,
        `HAProxy backend '${backend}' has no server '${server}' (socket ${this.socket})`,
        { details: { backend, missing: [server] } })
    }
    throw poolError(codes.HAPROXY_COMMAND, `HAProxy refused "${cmd}" on ${this.socket}: ${text.split('\n')[0]}`,
      { details: { cmd, reply: text } })
  }

  _noBackend (backend, why) {
    return poolError(codes.HAPROXY_NO_BACKEND,
      `HAProxy has no backend '${backend}' (socket ${this.socket})${why ? ` (${why})` : ''}; check --haproxy-backend ` +
        'and the config\'s \'backend\' section',
      { details: { backend } })
  }

  _levelError (why) {
    return poolError(codes.HAPROXY_LEVEL,
      `HAProxy socket ${this.socket} is not at level admin (${why}); declare it as "stats socket ${this.socket} mode ` +
        '600 level admin"',
      { details: { socket: this.socket } })
  }

  _timeoutError (cmd, timeout) {
    return poolError(codes.HAPROXY_SOCKET, `HAProxy did not answer "${cmd}" on ${this.socket} within ${timeout} ms`,
      { details: { socket: this.socket, reason: 'timeout' } })
  }

  _connectError (err) {
    if (err.code === 'POOL_E_HAPROXY_SOCKET') return err // our own timeout
    const where = this.socket
    const opts = { cause: err, details: { socket: where, reason: err.code } }
    switch (err.code) {
      case 'ENOENT':
        return poolError(codes.HAPROXY_SOCKET,
          `HAProxy socket ${where} does not exist: is HAProxy running with "stats socket ${where} mode 600 level ` +
            'admin"?', opts)
      case 'EACCES':
      case 'EPERM':
        return poolError(codes.HAPROXY_PERMISSION,
          `permission denied on HAProxy socket ${where}: this process (uid ${process.getuid?.()}) may not open it; ` +
            `give it the socket ("stats socket ${where} mode 600 level admin user <pool's user>") or run the pool as ` +
            'that user', opts)
      case 'ECONNREFUSED':
        return poolError(codes.HAPROXY_SOCKET, this.address.path
          ? `nothing listens on HAProxy socket ${where} (HAProxy stopped and left the file, or it is not a socket)`
          : `nothing listens on HAProxy runtime API address ${where}`, opts)
      default:
        return poolError(codes.HAPROXY_SOCKET, `cannot reach HAProxy socket ${where}: ${err.code || err.message}`, opts)
    }
  }
}

function listNames (names) {
  return names.map((n) => `'${n}'`).join(', ')
}

// 'worker1'..'worker15' → "worker1..worker15 (15 servers)"; short lists are spelled out.
function describeNames (names) {
  if (names.length <= 3) return listNames(names)
  return `${names[0]}..${names[names.length - 1]} (${names.length} servers)`
}

function toInfoValue (value) {
  return /^-?\d+$/.test(value) ? Number(value) : value
}

module.exports = { HaproxyClient, parseAddress, STATES }
