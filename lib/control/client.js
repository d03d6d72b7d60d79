'use strict'

// One control command: connect, send, await the answer. Failures are PoolErrors with a stable
// code; `details.reason` says what happened to the connection so callers (the server's "is
// this socket stale?" probe) can tell a dead socket from a live one that refused.
//
// Only a socket owned by the user running the command is talked to, root included: another
// user's process listening there could answer anything ("stopped (clean)" for a pool that
// still runs), so its answer would not be the pool's.

const net = require('node:net')
const { poolError, codes } = require('../errors')
const { encode, LineReader, deserializeError } = require('./protocol')
const { ownerOf, myUid, userName, describeUser } = require('./path')

// reason: 'missing' (no file), 'refused' (file, nobody listening: stale), 'denied' (no
// permission on the file), 'foreign' (another user's socket, not even connected to),
// 'timeout', 'closed' (the pool hung up before answering), 'io'.
function connectionError (socketPath, err) {
  const code = err.code
  if (code === 'ENOENT' || code === 'ECONNREFUSED' || code === 'ENOTSOCK') {
    return poolError(codes.CONTROL_UNREACHABLE, `no pool is running on control socket ${socketPath}`,
      { cause: err, details: { reason: code === 'ENOENT' ? 'missing' : 'refused' } })
  }
  if (code === 'EACCES' || code === 'EPERM') {
    return poolError(codes.CONTROL_UNREACHABLE,
      `permission denied on control socket ${socketPath}: the pool runs as another user`,
      { cause: err, details: { reason: 'denied' } })
  }
  return poolError(codes.CONTROL_UNREACHABLE, `cannot talk to the pool on control socket ${socketPath}: ${err.message}`,
    { cause: err, details: { reason: 'io' } })
}

// The error for a socket file owned by another user than `uid`, or null (ours, or no file).
function foreignOwnerError (socketPath, uid) {
  const owner = ownerOf(socketPath)
  if (owner === null || owner === uid) return null
  const name = userName(owner)
  const asOwner = name ? `sudo -u ${name} pool ...` : `sudo -u '#${owner}' pool ...`
  return poolError(codes.CONTROL_UNREACHABLE,
    `control socket ${socketPath} belongs to ${describeUser(owner)}, not to ${describeUser(uid)}; refusing to talk ` +
      `to it: run the command as the user the pool runs as (${asOwner})`,
    { details: { reason: 'foreign', owner } })
}

// Resolves the command's result or rejects a PoolError: the pool's own error (err.remote) or a
// connection error. `timeout` (ms, 0 or Infinity: none) bounds the whole exchange; reload and
// stop have no natural bound, so their callers pass a long one. With `waitForClose`, resolves
// only once the pool has closed the connection too: after `stop`, that is the pool exiting.
// `uid`: the user whose socket is trusted (./path.js).
function sendCommand (socketPath, command, args = {}, { timeout = 10000, waitForClose = false, uid = myUid() } = {}) {
  return new Promise((resolve, reject) => {
    const foreign = foreignOwnerError(socketPath, uid)
    if (foreign) return reject(foreign)
    const socket = net.connect(socketPath)
    const id = 1
    let answered = null
    let settled = false
    const finish = (err, result) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      if (err) reject(err)
      else resolve(result)
    }
    const timer = timeout > 0 && timeout < Infinity
      ? setTimeout(() => {
        // The answer came but the pool is slow to exit: the answer is still the outcome.
        if (answered) return finish(null, answered.result)
        finish(poolError(codes.CONTROL_UNREACHABLE,
          `no answer to '${command}' from the pool on control socket ${socketPath} within ${formatMs(timeout)}`,
          { details: { reason: 'timeout' } }))
      }, timeout)
      : null

    const reader = new LineReader((line) => {
      let reply = null
      try { reply = JSON.parse(line) } catch {}
      if (reply === null || typeof reply !== 'object') {
        return finish(poolError(codes.CONTROL_UNREACHABLE,
          `control socket ${socketPath} answered something that is not a JSON object`, { details: { reason: 'io' } }))
      }
      // An error without an id is about the connection itself (a line too long, a client
      // idle too long): the pool hangs up after it, so it is the answer too.
      const aboutConnection = reply.id === null && reply.ok === false
      if (reply.id !== id && !aboutConnection) return
      if (!reply.ok) return finish(deserializeError(reply.error || {}))
      if (!waitForClose) return finish(null, reply.result)
      answered = reply
    })

    socket.setEncoding('utf8')
    socket.on('connect', () => {
      // Again once connected: the file may have been replaced since the first look.
      const replaced = foreignOwnerError(socketPath, uid)
      if (replaced) return finish(replaced)
      socket.write(encode({ id, command, args }))
    })
    socket.on('data', (chunk) => {
      try { reader.push(chunk) } catch (err) { finish(connectionError(socketPath, err)) }
    })
    socket.on('error', (err) => finish(connectionError(socketPath, err)))
    socket.on('close', () => {
      if (answered) return finish(null, answered.result)
      finish(poolError(codes.CONTROL_UNREACHABLE,
        `the pool on control socket ${socketPath} closed the connection before answering '${command}'`,
        { details: { reason: 'closed' } }))
    })
  })
}

function formatMs (ms) {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`
}

module.exports = { sendCommand, connectionError }
