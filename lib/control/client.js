'use strict'

// One control command: connect, send, await the answer. Failures are PoolErrors whose `details.reason` lets
// the server's stale-socket probe tell a dead socket from a live one. Only a socket owned by our user is
// talked to, root included: another user's process could answer anything.

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

// Null when the socket is ours, or absent.
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

// The command's result, or a PoolError: the pool's own (err.remote) or the connection's. `timeout` (ms, 0 or
// Infinity: none) bounds the whole exchange. `waitForClose`: resolve once the pool hangs up (after stop: exits).
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
      // An error with id null is about the connection, closed after it: the answer too.
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
