'use strict'

// Sockets a service manager opened for us (systemd socket activation, sd_listen_fds(3)): it
// listens on the pool's ports itself and hands the sockets over at exec, as file descriptors 3,
// 4, … (LISTEN_FDS of them, LISTEN_PID naming the process they are for, LISTEN_FDNAMES their
// names). The sockets outlive the pool: while it restarts, connections wait in the kernel's
// backlog instead of being refused, and the next pool accepts them.
//
// Which socket is which: by name (the .socket unit's FileDescriptorName=port, =stats-port, the
// flag of the listener), else in order, the first unnamed one for --port (the embedded
// balancer), the next for --stats-port. A listener claims them by its flag.

const SD_LISTEN_FDS_START = 3
const ENV = ['LISTEN_PID', 'LISTEN_FDS', 'LISTEN_FDNAMES']

class InheritedSockets {
  constructor () {
    this.byFlag = new Map() // flag → fd, once adopted
    this.unnamed = [] // fds without a listener's name, in order
  }

  // Read the environment once, for this process, and take the variables out of it: the workers
  // (and their apps) must not believe the sockets are theirs. `flags`: the listeners that may
  // take an unnamed socket, in order. Returns [{ fd, name }] adopted.
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

  // The socket for the listener of `flag` ('port', 'stats-port'), once; undefined when none.
  claim (flag) {
    const fd = this.byFlag.get(flag)
    this.byFlag.delete(flag)
    return fd
  }

  // Sockets handed over that no listener claimed (more than the pool listens on).
  get left () { return [...this.byFlag.values(), ...this.unnamed] }
}

// The process's inherited sockets: `pool start` adopts them.
const inherited = new InheritedSockets()

module.exports = { inherited, InheritedSockets, SD_LISTEN_FDS_START }
