'use strict'

// Listening and closing, for every server the pool opens (the balancer's front, the stats
// listener, the agent): a busy or forbidden address becomes the pool's usual one-line error
// naming the flag, and a close waits for the last connection.

const { poolError, codes } = require('../errors')

function listen (server, { port, host, flag }) {
  return new Promise((resolve, reject) => {
    const onError = (err) => {
      server.removeListener('listening', onListening)
      if (err.code === 'EADDRINUSE') reject(poolError(codes.PORT_IN_USE, `port ${port} on ${host} is already in use (--${flag})`, { cause: err }))
      else reject(poolError(codes.PORT_IN_USE, `cannot listen on ${host}:${port} (--${flag}): ${err.message}`, { cause: err }))
    }
    const onListening = () => {
      server.removeListener('error', onError)
      resolve()
    }
    server.once('error', onError)
    server.once('listening', onListening)
    server.listen({ port, host, exclusive: true })
  })
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

module.exports = { listen, beginClose, closeServer, trackClose, urlOf }
