'use strict'

// The one-request-at-a-time guard. A pool worker serves a single request at a time: that is the
// whole point of the pool, and it must hold even when the balancer in front gets it wrong (a
// misconfigured maxconn, a client talking to the port directly). A request that arrives while
// another runs waits here, first in first out, instead of interleaving with it on the event loop.

// Take over `server`'s 'request' listeners and dispatch requests to them one at a time.
// hooks: onStart(req), onEnd(req), onQueued(waitingCount, runningReq), onIdle() once nothing runs
// or waits.
// whenEnded(id, fn): fn() once the request with that X-Request-Id, running or waiting, has ended;
// false when no such request is here.
function serializeRequests (server, hooks = {}) {
  const listeners = server.listeners('request')
  server.removeAllListeners('request')

  const waiting = []
  let running = null
  const watched = new Map() // X-Request-Id → [fn]: requests whose end the supervisor awaits

  function release (req, res) {
    running = null
    hooks.onEnd?.(req, res)
    if (watched.size > 0) ended(req)
  }

  function ended (req) {
    const id = req.headers['x-request-id']
    const fns = watched.get(id)
    if (!fns) return
    watched.delete(id)
    for (const fn of fns) fn()
  }

  function whenEnded (id, fn) {
    const here = (req) => req.headers['x-request-id'] === id
    if (!(running !== null && here(running)) && !waiting.some((w) => here(w.req))) return false
    watched.set(id, [...(watched.get(id) ?? []), fn])
    return true
  }

  function dispatch (req, res) {
    running = req
    let ended = false
    let handlerWork = []
    const end = () => {
      if (ended) return
      ended = true
      release(req, res)
      next()
    }
    // The response is complete: the next request may start.
    res.once('finish', end)
    // The client left before the response was complete. An async handler may still be working
    // on it: the next request waits for that work, or two would run at once.
    res.once('close', () => {
      if (handlerWork.length === 0) return end()
      Promise.allSettled(handlerWork).then(end)
    })
    hooks.onStart?.(req, res)
    try {
      handlerWork = listeners.map((listener) => listener.call(server, req, res)).filter(isThenable)
    } catch (err) {
      // A synchronous throw in the app's handler crashes the worker, as it would without the
      // pool. Release the slot for the report, but start nothing new: the process is going.
      ended = true
      release(req, res)
      throw err
    }
  }

  function next () {
    while (waiting.length > 0) {
      const { req, res } = waiting.shift()
      // A client that left while waiting needs no render.
      if (req.socket.destroyed) {
        if (watched.size > 0) ended(req)
        continue
      }
      return dispatch(req, res)
    }
    hooks.onIdle?.()
  }

  server.on('request', (req, res) => {
    if (running === null) return dispatch(req, res)
    waiting.push({ req, res })
    hooks.onQueued?.(waiting.length, running)
  })

  return {
    get busy () { return running !== null },
    get waiting () { return waiting.length },
    whenEnded
  }
}

function isThenable (x) {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof x.then === 'function'
}

module.exports = { serializeRequests }
