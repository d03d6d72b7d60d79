'use strict'

// The in-process guard: at most `concurrency` (K) requests render at once, whatever the front does. A
// request holds a render place until its response head is written (what follows awaits I/O); others wait
// here, FIFO. With K > 1 it says when every request held awaits I/O: after QUIET_LOOKS quiet check phases
// in a row (one look would run before what the app queued behind it, such as React's shell).
// hooks: onArrive(req), onStart(req), onEnd(req), onQueued(waiting, lastStartedReq), onIdle() once nothing
// is open or waiting, and with K > 1 onAwaiting(open, lastReq), once per change.

const { declaredLongLived } = require('../protocol/long-lived')

// A turn between two looks no longer than this ran no render.
const QUIET_MS = 1
const QUIET_LOOKS = 2

function guardRequests (server, hooks = {}, { concurrency = 1 } = {}) {
  const listeners = server.listeners('request')
  server.removeAllListeners('request')

  const waiting = []
  const open = new Map() // req → { req, res, startedAt }: every request started and not ended, in start order
  let rendering = 0 // of those, the ones holding a render place
  let answered = 0 // requests ended since the worker started
  let lastStarted = null
  const watched = new Map() // exchange id (X-Pool-Request) → [fn]: requests whose end a front awaits
  const looks = concurrency > 1 && typeof hooks.onAwaiting === 'function'
  let said = false // told that every open request awaits I/O, and nothing started since
  let lookQueued = false
  let lookedAt = 0 // when the last look ran (0: none since a request began or ended)
  let quiet = 0 // looks in a row that found nothing long had run since the one before

  function ended (req) {
    const fns = watched.get(req.headers['x-pool-request'])
    if (!fns) return
    watched.delete(req.headers['x-pool-request'])
    for (const fn of fns) fn()
  }

  // fn() once the request of that exchange has ended; false when no such request is here.
  function whenEnded (id, fn) {
    const here = (req) => req.headers['x-pool-request'] === id
    if (![...open.keys()].some(here) && !waiting.some((w) => here(w.req))) return false
    watched.set(id, [...(watched.get(id) ?? []), fn])
    return true
  }

  function lookSoon () {
    lookedAt = 0
    quiet = 0
    if (lookQueued) return
    lookQueued = true
    setImmediate(look)
  }

  // One turn from look to look (a pending look keeps the loop from waiting); a long one rendered.
  function look () {
    lookQueued = false
    if (open.size === 0 || said) return
    const now = performance.now()
    quiet = lookedAt > 0 && now - lookedAt <= QUIET_MS ? quiet + 1 : 0
    lookedAt = now
    if (quiet < QUIET_LOOKS) {
      lookQueued = true
      setImmediate(look)
      return
    }
    said = true
    hooks.onAwaiting(open.size, lastStarted)
  }

  function dispatch (req, res) {
    open.set(req, { req, res, startedAt: performance.now() })
    lastStarted = req
    let holding = holdsPlace(req)
    if (holding) rendering++
    let done = false
    let handlerWork = []
    // Its head is out: the place goes to the next request, after the app's current code has run.
    const letGo = () => {
      if (!holding) return
      holding = false
      rendering--
      process.nextTick(next)
    }
    const end = () => {
      if (done) return
      done = true
      if (holding) { holding = false; rendering-- }
      open.delete(req)
      answered++
      hooks.onEnd?.(req)
      if (watched.size > 0) ended(req)
      next()
    }
    if (holding) watchHead(res, letGo)
    res.once('finish', end)
    // The client left; an async handler may still work on it: the place is kept until it settles.
    res.once('close', () => {
      if (handlerWork.length === 0) return end()
      Promise.allSettled(handlerWork).then(end)
    })
    if (looks) said = false // on the CPU now, as whoever sent it counts it
    hooks.onStart?.(req)
    try {
      handlerWork = listeners.map((listener) => listener.call(server, req, res)).filter(isThenable)
    } catch (err) {
      // A synchronous throw crashes the worker, as it would without the pool: start nothing new.
      done = true
      throw err
    }
    // Behind whatever the handler queued for the check phase itself (React's shell).
    if (looks) lookSoon()
  }

  function next () {
    while (waiting.length > 0 && (rendering < concurrency || !holdsPlace(waiting[0].req))) {
      const { req, res } = waiting.shift()
      // A client that left while waiting needs no render.
      if (req.socket.destroyed) {
        answered++
        if (watched.size > 0) ended(req)
        continue
      }
      dispatch(req, res)
    }
    if (open.size === 0 && waiting.length === 0) hooks.onIdle?.()
    else if (looks && open.size > 0) lookSoon()
  }

  server.on('request', (req, res) => {
    hooks.onArrive?.(req)
    if (waiting.length === 0 && (rendering < concurrency || !holdsPlace(req))) return dispatch(req, res)
    waiting.push({ req, res })
    hooks.onQueued?.(waiting.length, lastStarted)
  })

  return {
    get busy () { return open.size > 0 },
    get open () { return open.size },
    get rendering () { return rendering },
    get waiting () { return waiting.length },
    get answered () { return answered },
    entries: () => open.values(),
    whenEnded
  }
}

// A request a front declared long-lived holds no render place.
function holdsPlace (req) {
  return !declaredLongLived(req.headers)
}

// Every way Node writes a head goes through writeHead. Left in place: middleware may have wrapped ours.
function watchHead (res, fn) {
  const writeHead = res.writeHead
  res.writeHead = function writeHeadSeen (...args) {
    const result = writeHead.apply(this, args)
    if (this.headersSent || this._header) fn()
    return result
  }
}

function isThenable (x) {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof x.then === 'function'
}

module.exports = { guardRequests }
