'use strict'

// The pool's names in HAProxy, for the generated config and the runtime API alike: the backend, its
// long-lived requests' backend (the same servers), and slot k's server, worker<k>.

const DEFAULT_BACKEND = 'pool'
const WORKER_SERVER = /^worker([1-9]\d*)$/

function streamsBackend (backend) {
  return `${backend}_streams`
}

function serverName (slot) {
  return `worker${slot}`
}

// Null for a server that is no slot's.
function slotOfServer (name) {
  const m = WORKER_SERVER.exec(name)
  return m ? Number(m[1]) : null
}

module.exports = { DEFAULT_BACKEND, serverName, slotOfServer, streamsBackend }
