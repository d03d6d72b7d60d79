'use strict'

// Telling systemd how the pool is doing, for a unit of Type=notify (sd_notify(3)): READY=1 once
// the first workers are ready (systemd counts the unit started then, and starts what waits for
// it), STATUS=… as the number of serving workers changes (`systemctl status` shows it), and
// STOPPING=1 when a stop begins.
//
// NOTIFY_SOCKET is a unix datagram socket, and Node has no unix datagrams. The messages go
// through systemd's own `systemd-notify`, one process at a time, in order: it waits until
// systemd has read each message before it exits (it is run without --no-block), so systemd can
// still tell which unit sent it, but
// it sends as itself, a process of the unit other than the main one, so the unit needs
// NotifyAccess=all (`pool config systemd` writes it). The costs: a short process per message
// (so STATUS is sent only when its text changes, and the latest text replaces one not sent
// yet), and any process of the unit, the app's too, may notify systemd.

const { spawn } = require('node:child_process')

const COMMAND = 'systemd-notify'
const SILENT = { debug () {}, info () {}, warn () {} }

class ServiceNotifier {
  // socket: NOTIFY_SOCKET's value; command: the systemd-notify to run.
  constructor ({ socket, logger = SILENT, command = COMMAND }) {
    this.socket = socket
    this.logger = logger
    this.command = command
    this.queue = [] // messages not sent yet, in order: [{ FIELD: value }]
    this.sending = null // the promise of the one being sent
    this.lastStatus = null
    this.broken = false // systemd-notify could not run: said once, then nothing more is tried
  }

  // The notifier for this process, or null when no service manager listens. NOTIFY_SOCKET is
  // taken out of `env`: it is the supervisor's, and an app in a worker must not speak for it.
  static fromEnv (env = process.env, options = {}) {
    const socket = env.NOTIFY_SOCKET
    delete env.NOTIFY_SOCKET
    return socket ? new ServiceNotifier({ socket, ...options }) : null
  }

  ready (status) { this.send({ READY: 1, ...(status ? { STATUS: status } : {}) }, status) }
  stopping (status = 'stopping: finishing running requests') { this.send({ STOPPING: 1, STATUS: status }, status) }

  // STATUS=text, only when it says something new. A text waiting to be sent is replaced.
  status (text) {
    if (text === this.lastStatus) return
    const waiting = this.queue.find((m) => Object.keys(m).length === 1 && 'STATUS' in m)
    if (waiting) waiting.STATUS = text
    else this.queue.push({ STATUS: text })
    this.lastStatus = text
    this.next()
  }

  send (fields, status) {
    if (status !== undefined) this.lastStatus = status
    this.queue.push(fields)
    this.next()
  }

  next () {
    if (this.sending || this.broken || this.queue.length === 0) return
    const fields = this.queue.shift()
    this.sending = this.run(fields).finally(() => {
      this.sending = null
      this.next()
    })
  }

  run (fields) {
    const args = Object.entries(fields).map(([k, v]) => `${k}=${v}`)
    return new Promise((resolve) => {
      let child
      try {
        child = spawn(this.command, args,
          { env: { ...process.env, NOTIFY_SOCKET: this.socket }, stdio: ['ignore', 'ignore', 'pipe'] })
      } catch (err) {
        return resolve(this.failed(err.message))
      }
      let stderr = ''
      child.stderr.setEncoding('utf8').on('data', (d) => { stderr = (stderr + d).slice(-500) })
      child.once('error',
        (err) => resolve(this.failed(err.code === 'ENOENT' ? `${this.command} not found` : err.message)))
      child.once('exit', (code) => {
        if (code === 0) this.logger.debug({ event: 'systemd-notified', fields: args }, `systemd told ${args.join(' ')}`)
        else {
          this.logger.warn({ event: 'systemd-notify-failed', code, fields: args },
            `${this.command} ${args.join(' ')} failed (${code}): ${stderr.trim()}`)
        }
        resolve()
      })
    })
  }

  failed (why) {
    this.broken = true
    this.queue.length = 0
    this.logger.warn({ event: 'systemd-notify-failed' },
      `cannot tell systemd how the pool is doing (NOTIFY_SOCKET is set): ${why}; a Type=notify unit will time out ` +
        'waiting for READY=1')
  }

  // Resolves once every message asked for was sent (or given up), waiting at most `ms`.
  idle (ms = 2000) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms)
      const check = () => {
        if (!this.sending && (this.queue.length === 0 || this.broken)) { clearTimeout(timer); return resolve() }
        this.sending.then(check)
      }
      check()
    })
  }
}

module.exports = { ServiceNotifier }
