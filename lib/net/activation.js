'use strict'

// Sockets systemd opened for us (sd_listen_fds(3): fds from 3, LISTEN_FDS/PID/FDNAMES); they outlive a
// restart, connections waiting in the backlog. Matched by FileDescriptorName= (a listener's flag: port,
// stats-port), else the unnamed in order.

const SD_LISTEN_FDS_START = 3
const ENV = ['LISTEN_PID', 'LISTEN_FDS', 'LISTEN_FDNAMES']

class InheritedSockets {
  constructor () {
    this.byFlag = new Map() // flag → fd, once adopted
    this.unnamed = [] // fds without a listener's name, in order
  }

  // Removes the variables, so workers do not take the sockets for theirs. `flags`: listeners that may take
  // an unnamed socket, in order. Returns [{ fd, name }].
  adopt (env = process.env, { pid = process.pid, flags = ['port', 'stats-port'] } = {}) {
    const count = Number(env.LISTEN_FDS)
    const forUs = Number(env.LISTEN_PID) === pid
    const names = (env.LISTEN_FDNAMES ?? '').split(':')
    for (const name of ENV) delete env[name]
    if (!forUs || !Number.isInteger(count) || count < 1) return []
    const adopted = []
    for (let i = 0; i < count; i++) {
      const fd = SD_LISTEN_FDS_START + i
      const name = names[i] ?? ''
      if (flags.includes(name) && !this.byFlag.has(name)) this.byFlag.set(name, fd)
      else this.unnamed.push(fd)
      adopted.push({ fd, name })
    }
    for (const flag of flags) {
      if (!this.byFlag.has(flag) && this.unnamed.length > 0) this.byFlag.set(flag, this.unnamed.shift())
    }
    return adopted
  }

  // The fd for `flag`, once; undefined when none.
  claim (flag) {
    const fd = this.byFlag.get(flag)
    this.byFlag.delete(flag)
    return fd
  }

  get left () { return [...this.byFlag.values(), ...this.unnamed] }
}

const inherited = new InheritedSockets()

module.exports = { inherited, InheritedSockets, SD_LISTEN_FDS_START }
