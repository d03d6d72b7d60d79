'use strict'

// How the pool names things in HAProxy, alike in the config `pool config haproxy` writes and in
// what the HAProxy front asks over the runtime API: the backend, the backend of its long-lived
// requests (the same servers: streams and upgrades, which must not take a worker's only render
// slot), and slot k's server, worker<k>.

const DEFAULT_BACKEND = 'pool'
const WORKER_SERVER = /^worker([1-9]\d*)$/

function streamsBackend (backend) {
  return `${backend}_streams`
}

function serverName (slot) {
  return `worker${slot}`
}

// The slot of a worker<k> server, or null for a server that is no slot's.
function slotOfServer (name) {
  const m = WORKER_SERVER.exec(name)
  return m ? Number(m[1]) : null
}

module.exports = { DEFAULT_BACKEND, serverName, slotOfServer, streamsBackend }
