'use strict'

// The one-request-at-a-time guard. A pool worker serves a single request at a time: that is the
// whole point of the pool, and it must hold even when the balancer in front gets it wrong (a
// misconfigured maxconn, a client talking to the port directly). A request that arrives while
// another runs waits here, first in first out, instead of interleaving with it on the event loop.

// Take over `server`'s 'request' listeners and dispatch requests to them one at a time.
// hooks: onStart(req), onEnd(req), onQueued(waitingCount)
function serializeRequests (server, hooks = {}) {
  const listeners = server.listeners('request')
  server.removeAllListeners('request')

  const waiting = []
  let running = null

  function dispatch (req, res) {
    running = req
    let ended = false
    const end = () => {
      if (ended) return
      ended = true
      running = null
      hooks.onEnd?.(req, res)
      next()
    }
    // 'close' fires once the response is finished or the connection is gone, whichever first.
    res.once('close', end)
    hooks.onStart?.(req, res)
    try {
      for (const listener of listeners) listener.call(server, req, res)
    } catch (err) {
      // A synchronous throw inside the app's handler is the app's crash, as it would be
      // without the pool; rethrow after releasing the slot so the queue is not stuck.
      end()
      throw err
    }
  }

  function next () {
    while (waiting.length > 0) {
      const { req, res } = waiting.shift()
      // A client that left while waiting needs no render.
      if (req.socket.destroyed) continue
      dispatch(req, res)
      return
    }
  }

  server.on('request', (req, res) => {
    if (running === null) return dispatch(req, res)
    waiting.push({ req, res })
    hooks.onQueued?.(waiting.length)
  })

  return {
    get busy () { return running !== null },
    get waiting () { return waiting.length }
  }
}

module.exports = { serializeRequests }
