'use strict'

// The SSR demo app, written in form (c) of the pool API: the app calls `listen(handler)`
// itself. Under `pool start` that binds the slot's port and reports ready; run directly with
// `node examples/ssr/server.js` it serves on $PORT (default 3000).
//
// Besides the catalogue page it has the same page streamed (/streamed: the shell at once, a
// part that waits for its data later; streamed.js) and routes that misbehave on purpose (/loop,
// /crash, /sleep, cost=) so the supervisor's timeouts, crash restarts and queueing can be
// watched at work.

// Development-mode React runs extra checks that make SSR several times slower than in
// production; a demo of CPU-bound serving should pay production costs unless asked otherwise.
if (process.env.NODE_ENV === undefined) process.env.NODE_ENV = 'production'

const crypto = require('node:crypto')
// The package's name on npm; `require('pool')` where it is installed as `pool` (npm i pool@npm:pool-supervisor).
const { listen } = require('pool-supervisor')
const { renderPage, DEFAULT_ITEMS, MAX_ITEMS, DEFAULT_SEED, MAX_SEED } = require('./render')
const { streamPage } = require('./streamed')

const MAX_WAIT_MS = 60000

// One shared cell to Atomics.wait on. Nothing ever notifies it, so each wait lasts its full
// timeout: the event loop is blocked exactly as by CPU work, without burning a core, so a
// small machine can still demo many "busy" workers.
const blockCell = new Int32Array(new SharedArrayBuffer(4))

function blockFor (ms) {
  if (ms > 0) Atomics.wait(blockCell, 0, 0, ms)
}

class BadRequest extends Error {}

// A query integer in [min, max], or `fallback` when absent. Strict on purpose: '1.5', '1e3',
// ' 7', '-1' and repeated keys are refused, so a typo never silently renders something else.
function integerParam (query, name, { min, max, fallback }) {
  const values = query.getAll(name)
  if (values.length === 0) return fallback
  if (values.length > 1) throw new BadRequest(`${name} must be given at most once`)
  const raw = values[0]
  const value = /^\d{1,16}$/.test(raw) ? Number(raw) : NaN
  if (!(value >= min && value <= max)) {
    const shown = raw.length > 40 ? raw.slice(0, 40) + '...' : raw
    throw new BadRequest(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(shown)})`)
  }
  return value
}

function send (res, status, contentType, body) {
  res.writeHead(status, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store'
  })
  res.end(body)
}

function sendText (res, status, text) {
  send(res, status, 'text/plain; charset=utf-8', text + '\n')
}

function sendJson (res, status, value) {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(value) + '\n')
}

function identity (req) {
  const slot = Number(process.env.POOL_WORKER_ID)
  return {
    ok: true,
    pid: process.pid,
    // null when not run by `pool`, rather than a misleading default.
    slot: Number.isInteger(slot) ? slot : null,
    port: Number(process.env.PORT) || req.socket.localPort
  }
}

const routes = {
  '/': {
    GET (req, res, query) {
      const items = integerParam(query, 'items', { min: 1, max: MAX_ITEMS, fallback: DEFAULT_ITEMS })
      const seed = integerParam(query, 'seed', { min: 0, max: MAX_SEED, fallback: DEFAULT_SEED })
      const cost = integerParam(query, 'cost', { min: 0, max: MAX_WAIT_MS, fallback: 0 })
      blockFor(cost)
      send(res, 200, 'text/html; charset=utf-8', renderPage({ items, seed }))
    }
  },

  '/streamed': {
    // The shell at once; the recommendations once their data comes, `delay` ms later.
    GET (req, res, query) {
      const items = integerParam(query, 'items', { min: 1, max: MAX_ITEMS, fallback: DEFAULT_ITEMS })
      const seed = integerParam(query, 'seed', { min: 0, max: MAX_SEED, fallback: DEFAULT_SEED })
      const delay = integerParam(query, 'delay', { min: 0, max: MAX_WAIT_MS, fallback: 300 })
      const cost = integerParam(query, 'cost', { min: 0, max: MAX_WAIT_MS, fallback: 0 })
      blockFor(cost)
      streamPage(res, { items, seed, delay })
    }
  },

  '/health': {
    GET (req, res) { sendJson(res, 200, identity(req)) }
  },

  '/whoami': {
    GET (req, res) { sendJson(res, 200, { ...identity(req), uptime: Math.round(process.uptime() * 1000) / 1000 }) }
  },

  '/loop': {
    // Never returns and never yields: only the supervisor's request timeout ends this worker.
    GET () {
      for (;;) { /* spin */ }
    }
  },

  '/crash': {
    // process.exit(1) rather than process.abort(): an ordinary failing exit, without a core
    // dump, is what the supervisor's crash handling should be shown with. The client gets its
    // connection closed with no response.
    GET () {
      process.stderr.write(`pid ${process.pid}: /crash requested, exiting with code 1\n`)
      process.exit(1)
    }
  },

  '/sleep': {
    GET (req, res, query) {
      const ms = integerParam(query, 'ms', { min: 0, max: MAX_WAIT_MS, fallback: 0 })
      const timer = setTimeout(() => sendText(res, 200, `slept ${ms} ms`), ms)
      // A client that gives up should not leave a timer holding the response.
      res.on('close', () => clearTimeout(timer))
    }
  },

  '/echo': {
    POST (req, res) {
      // Streamed through the hash, so any body size costs constant memory.
      const hash = crypto.createHash('sha1')
      let bytes = 0
      req.on('data', (chunk) => { bytes += chunk.length; hash.update(chunk) })
      req.on('end', () => sendJson(res, 200, { bytes, sha1: hash.digest('hex') }))
      req.on('error', () => res.destroy())
    }
  }
}

// The product pictures the page shows (/images/p00001-400.svg): drawn from the product id, not
// stored, so the demo needs no asset files and the page is whole. Cacheable, so a browser asks
// for each once; in production a CDN or nginx would serve such files, not the render workers.
const PRODUCT_IMAGE = /^\/images\/(p\d{1,9})-400\.svg$/

function productImage (id) {
  const hue = (Number(id.slice(1)) * 47) % 360
  return '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400" viewBox="0 0 400 400">' +
    `<rect width="400" height="400" fill="hsl(${hue} 45% 90%)"/>` +
    `<circle cx="200" cy="175" r="95" fill="hsl(${hue} 40% 65%)"/>` +
    `<text x="200" y="345" font-family="sans-serif" font-size="30" text-anchor="middle" fill="hsl(${hue} 30% 30%)">${id.toUpperCase()}</text>` +
    '</svg>\n'
}

const imageRoute = {
  GET (req, res, query, pathname) {
    const body = productImage(PRODUCT_IMAGE.exec(pathname)[1])
    res.writeHead(200, {
      'content-type': 'image/svg+xml',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'public, max-age=86400'
    })
    res.end(body)
  }
}

function handler (req, res) {
  // Split by hand rather than with `new URL`, which reads '//x' as a host and not a path.
  const queryAt = req.url.indexOf('?')
  const pathname = queryAt === -1 ? req.url : req.url.slice(0, queryAt)
  const query = new URLSearchParams(queryAt === -1 ? '' : req.url.slice(queryAt + 1))

  const route = Object.hasOwn(routes, pathname) ? routes[pathname] : PRODUCT_IMAGE.test(pathname) ? imageRoute : null
  if (!route) return sendText(res, 404, `not found: ${req.method} ${pathname.slice(0, 200)}`)
  // HEAD is answered as GET; Node's http module drops the body.
  const method = req.method === 'HEAD' ? 'GET' : req.method
  const action = Object.hasOwn(route, method) ? route[method] : null
  if (!action) {
    res.setHeader('allow', Object.keys(route).map((m) => (m === 'GET' ? 'GET, HEAD' : m)).join(', '))
    return sendText(res, 405, `method not allowed: ${req.method} ${pathname}`)
  }

  try {
    action(req, res, query, pathname)
  } catch (err) {
    if (err instanceof BadRequest) return sendText(res, 400, err.message)
    // Unexpected: log it, and answer if still possible, but keep the worker serving.
    process.stderr.write(`pid ${process.pid}: ${req.method} ${req.url} failed: ${err.stack}\n`)
    if (!res.headersSent) sendText(res, 500, 'internal error')
    else res.destroy()
  }
}

listen(handler)
