'use strict'

// The HAProxy agent-check responder: an edge HAProxy in front of several hosts, each running a
// pool, asks this host's agent (`agent-check agent-port N agent-inter T` on the host's server
// line) how many requests it may send here. Each connection gets one line at once, then our
// end: the edge sets the server's maxconn to this host's ready workers, so the edge's one queue
// feeds the whole fleet, a worker per request, as the pool's own front does for one host.
//
// What HAProxy 2.6.12 does with the words we send (the first three are asserted against the
// real one by this module's test, the others were seen by hand):
// - `up`/`down` set the agent's view of the server; `up` alone undoes an earlier `down`.
// - `ready`/`drain`/`maint` set the server's admin state, the same one `set server ... state`
//   sets on the CLI: a `drain` stays until a later line says `ready`, so every `up` says it too.
// - `maxconn:K` sets the server's limit (`slim` in `show stat`), over the config's `maxconn`.
// - A reason follows ` #` and shows in `show stat`'s last_agt.
// - `maxconn:0` means no limit: a host without a ready worker says `down`, never `maxconn:0`.
// - A connection closed without a line, or an agent that does not answer, changes nothing.

const net = require('node:net')
const { poolError, codes } = require('../errors')
const { guardAccept } = require('../net/descriptors')

// A connection HAProxy leaves open after our line (it resets them, as a rule) is cut after this.
const SOCKET_LIFE_MS = 2000
const SERVING = new Set(['ready', 'busy'])
const SILENT = { debug () {}, info () {}, warn () {}, error () {} }

// The line (without its newline) for a `pool.status()`; the first rule that applies wins.
function agentReply (status) {
  const workers = status?.workers ?? []
  const ready = workers.filter((w) => SERVING.has(w.state)).length
  const target = status?.target ?? workers.length
  // Stopping: the edge sends this host nothing new while its running requests finish. A drain
  // rather than a down: the edge reports a down as a failure (its log, `chkdown`).
  if (status?.phase === 'stopping' || status?.phase === 'stopped') return `drain #${status.phase}`
  // Starting, or every worker dead or draining: the host can serve nothing. `down`, because
  // `maxconn:0` would lift the limit instead.
  if (ready === 0) return 'down #no worker ready'
  // Reloading: still `up`, with the limit following the workers as they are replaced; the reason
  // is for whoever reads the edge's stats. Not `drain`: a draining server gets nothing, so its
  // ready workers would idle, and a fleet reloading all at once would answer 503 to everyone.
  if (status?.reload) return `up ready maxconn:${ready} #reloading: ${ready} of ${target} ready`
  // Serving: as many requests at once as there are ready workers.
  return `up ready maxconn:${ready}`
}

class AgentResponder {
  // status(): the pool's status (Pool#status), read for each answer;
  // socketLife: ms, for tests.
  constructor ({ host, port, status, logger = SILENT, socketLife = SOCKET_LIFE_MS, onRefused }) {
    this.host = host
    this.port = port
    this.readStatus = status
    this.logger = logger
    this.socketLife = socketLife
    this.sockets = new Set()
    this.asked = 0 // connections answered: an edge watches this pool (its stop is announced first)
    this.failing = false // status() threw last time: said once at warn, then at debug
    this.server = net.createServer((socket) => this.answer(socket))
    // A listener error after start (out of descriptors, say) is logged, not thrown.
    guardAccept(this.server, { name: 'agent', logger: this.logger, onRefused })
  }

  get address () { return `${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.port}` }
  get url () { return `tcp://${this.address}` }

  start () {
    return new Promise((resolve, reject) => {
      const onError = (err) => reject(listenError(err, this.address))
      this.server.once('error', onError)
      this.server.listen({ host: this.host, port: this.port, exclusive: true }, () => {
        this.server.removeListener('error', onError)
        this.port = this.server.address().port // the port the kernel chose, when asked for 0
        resolve()
      })
    })
  }

  // Stop listening and cut the connections still open: each has had its line already.
  stop () {
    if (!this.server.listening) return Promise.resolve()
    return new Promise((resolve) => {
      this.server.close(() => resolve())
      for (const socket of this.sockets) socket.destroy()
      this.sockets.clear()
    })
  }

  // One line, then our end. Nothing here may throw or leave an error unheard: a broken edge
  // connection must never take the pool down.
  answer (socket) {
    this.asked++
    this.sockets.add(socket)
    const life = setTimeout(() => socket.destroy(), this.socketLife)
    socket.on('close', () => { clearTimeout(life); this.sockets.delete(socket) })
    // HAProxy closes with a reset once it has the line: routine, not worth more than debug.
    socket.on('error', (err) => {
      this.logger.debug({ event: 'agent-connection-error', err, agent: this.address },
        `agent connection: ${err.message}`)
      socket.destroy()
    })
    // What the edge sends (agent-send) is read and dropped: unread bytes at close would make
    // our end reset the connection, possibly before the line is read.
    socket.resume()
    const line = this.reply()
    if (line === null) socket.destroy() // the edge keeps the server as it was
    else socket.end(line + '\n')
  }

  reply () {
    try {
      const line = agentReply(this.readStatus())
      this.failing = false
      return line
    } catch (err) {
      const level = this.failing ? 'debug' : 'warn'
      this.failing = true
      this.logger[level]({ event: 'agent-status-failed', err, agent: this.address },
        `agent ${this.address} could not read the pool's status: ${err.message}`)
      return null
    }
  }
}

// A busy port is PORT_IN_USE; anything else (an address not on this host, a port it may not
// open) is a bad --agent-host or --agent-port.
function listenError (err, address) {
  if (err.code === 'EADDRINUSE') {
    return poolError(codes.PORT_IN_USE, `agent address ${address} is already in use (--agent-port, --agent-host)`,
      { cause: err })
  }
  const why = err.code === 'EACCES'
    ? 'permission denied'
    : err.code === 'EADDRNOTAVAIL'
      ? 'address not available on this host'
      : (err.code || err.message)
  return poolError(codes.BAD_OPTION,
    `cannot listen for the HAProxy agent on ${address} (--agent-host, --agent-port): ${why}`, { cause: err })
}

module.exports = { AgentResponder, agentReply, SOCKET_LIFE_MS }
