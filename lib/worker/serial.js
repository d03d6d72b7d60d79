'use strict'

// The in-process guard: a pool worker runs at most `concurrency` requests at once (K,
// --worker-concurrency; 1 by default: one request at a time, the whole point of the pool), and
// that holds even when whatever is in front gets it wrong (a misconfigured maxconn, a client
// talking to the port directly). A request that arrives while K run waits here, first in first
// out, instead of interleaving with them on the event loop.
//
// With K above 1 the guard also says when the worker may take one more: once a request's handler
// has returned (or one has ended), the guard looks at each check phase (setImmediate) until the
// loop has come round QUIET_LOOKS times in a row with nothing long run between two looks; then
// every request left awaits I/O. A single look would run before work the app queued behind it:
// a render a streaming renderer defers to the check phase (React renders its shell so), or the
// rest of a page rendered in a task of its own after its shell was written. It says so once per
// change of what the balancer may decide (onAwaiting), never for a request that ended before:
// a worker that renders on the CPU and answers says nothing.

// Take over `server`'s 'request' listeners and dispatch requests to them, at most `concurrency`
// at a time.
// hooks: onStart(req), onEnd(req), onQueued(waitingCount, runningReq), onIdle() once nothing runs
// or waits; with concurrency > 1, onAwaiting(open, lastReq): the `open` requests running all
// await I/O, `lastReq` the one started last.
// whenEnded(id, fn): fn() once the request with that X-Request-Id, running or waiting, has ended;
// false when no such request is here.
// A turn of the loop between two looks no longer than this ran no render; this many such turns
// in a row let whatever the app queued behind a look (a render a hop or two later) show itself.
const QUIET_MS = 1
const QUIET_LOOKS = 2

function serializeRequests (server, hooks = {}, { concurrency = 1 } = {}) {
  const listeners = server.listeners('request')
  server.removeAllListeners('request')

  const waiting = []
  const running = new Set() // in start order
  let lastStarted = null
  const watched = new Map() // X-Request-Id → [fn]: requests whose end the supervisor awaits
  const looks = concurrency > 1 && typeof hooks.onAwaiting === 'function'
  let said = false // told that every request running awaits I/O, and nothing started since
  let lookQueued = false
  let lookedAt = 0 // when the last look ran (0: none since a request began or ended)
  let quiet = 0 // looks in a row that found nothing long had run since the one before

  function release (req, res) {
    running.delete(req)
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
    if (![...running].some(here) && !waiting.some((w) => here(w.req))) return false
    watched.set(id, [...(watched.get(id) ?? []), fn])
    return true
  }

  // A request began or ended: look again from the next check phase on, and say so once every
  // request running awaits I/O, if that is news.
  function lookSoon () {
    lookedAt = 0
    quiet = 0
    if (lookQueued) return
    lookQueued = true
    setImmediate(look)
  }

  // While a look is pending the loop does not wait for I/O, so from one look to the next it runs
  // one turn: timers, I/O callbacks, the check phase's other work. A long turn ran something on
  // the CPU (a render): count again.
  function look () {
    lookQueued = false
    if (running.size === 0 || said) return
    const now = performance.now()
    quiet = lookedAt > 0 && now - lookedAt <= QUIET_MS ? quiet + 1 : 0
    lookedAt = now
    if (quiet < QUIET_LOOKS) {
      lookQueued = true
      setImmediate(look)
      return
    }
    said = true
    hooks.onAwaiting(running.size, lastStarted)
  }

  function dispatch (req, res) {
    running.add(req)
    lastStarted = req
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
    // on it: the next request waits for that work, or more than K would run at once.
    res.once('close', () => {
      if (handlerWork.length === 0) return end()
      Promise.allSettled(handlerWork).then(end)
    })
    hooks.onStart?.(req, res)
    if (looks) said = false // on the CPU now, as whoever sent it counts it
    try {
      handlerWork = listeners.map((listener) => listener.call(server, req, res)).filter(isThenable)
    } catch (err) {
      // A synchronous throw in the app's handler crashes the worker, as it would without the
      // pool. Release the slot for the report, but start nothing new: the process is going.
      ended = true
      release(req, res)
      throw err
    }
    // Queued after the handler's synchronous part, so behind whatever it queued for the check
    // phase itself: React's renderToPipeableStream renders the shell in a setImmediate.
    if (looks) lookSoon()
  }

  function next () {
    while (waiting.length > 0 && running.size < concurrency) {
      const { req, res } = waiting.shift()
      // A client that left while waiting needs no render.
      if (req.socket.destroyed) {
        if (watched.size > 0) ended(req)
        continue
      }
      dispatch(req, res)
    }
    if (running.size === 0 && waiting.length === 0) hooks.onIdle?.()
    else if (looks) lookSoon()
  }

  server.on('request', (req, res) => {
    if (running.size < concurrency) return dispatch(req, res)
    waiting.push({ req, res })
    hooks.onQueued?.(waiting.length, running.values().next().value)
  })

  return {
    get busy () { return running.size > 0 },
    get running () { return running.size },
    get waiting () { return waiting.length },
    whenEnded
  }
}

function isThenable (x) {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof x.then === 'function'
}

module.exports = { serializeRequests }
