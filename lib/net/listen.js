'use strict'

// Listening and closing, for every server the pool opens (the balancer's front, the stats
// listener, the agent): a busy or forbidden address becomes the pool's usual one-line error
// naming the flag, and a close waits for the last connection. A socket a service manager handed
// over for that flag (socket activation) is listened on instead of a new one.

const net = require('node:net')
const { poolError, codes } = require('../errors')
const { inherited } = require('./activation')

// Resolves with where the server listens: { address, port, fd } (fd: the inherited socket's).
function listen (server, { port, host, flag }) {
  const fd = inherited.claim(flag)
  if (fd !== undefined) return listenOnFd(server, { fd, flag })
  return new Promise((resolve, reject) => {
    const onError = (err) => {
      server.removeListener('listening', onListening)
      if (err.code === 'EADDRINUSE') {
        reject(poolError(codes.PORT_IN_USE,
          `port ${port} on ${host} is already in use (--${flag})`, { cause: err }))
      } else {
        reject(poolError(codes.PORT_IN_USE, `cannot listen on ${host}:${port} (--${flag}): ${err.message}`,
          { cause: err }))
      }
    }
    const onListening = () => {
      server.removeListener('error', onError)
      resolve(server.address())
    }
    server.once('error', onError)
    server.once('listening', onListening)
    server.listen({ port, host, exclusive: true })
  })
}

// The socket is listening already (the service manager made it): listening on it again only
// hands it to this server. Closing the server closes our descriptor, not the manager's.
function listenOnFd (server, { fd, flag }) {
  return new Promise((resolve, reject) => {
    const onError = (err) => reject(poolError(codes.PORT_IN_USE,
      `cannot listen on the socket handed over as file descriptor ${fd} for --${flag} (LISTEN_FDS): ${err.message}`,
      { cause: err }))
    server.once('error', onError)
    server.listen({ fd }, () => {
      server.removeListener('error', onError)
      resolve({ ...server.address(), fd })
    })
  })
}

// Stop accepting connections, and nothing more: unlike http.Server#close(), the connections
// already accepted stay open, even one whose first request has not been read yet.
function stopAccepting (server) {
  if (!server.listening) return
  server.closeRequested = true
  net.Server.prototype.close.call(server)
}

// Stop accepting connections; open ones end on their own (idle keep-alive ones at once).
function beginClose (server) {
  if (!server.listening) return
  server.closeRequested = true
  server.close()
}

// Resolves once the server is closed and its last connection has ended.
function closeServer (server) {
  if (server.isClosed || (!server.listening && !server.closeRequested)) return Promise.resolve()
  return new Promise((resolve) => {
    server.once('close', resolve)
    beginClose(server)
  })
}

function trackClose (server) {
  server.once('close', () => { server.isClosed = true })
  return server
}

function urlOf (host, port) {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}

module.exports = { listen, beginClose, stopAccepting, closeServer, trackClose, urlOf }
