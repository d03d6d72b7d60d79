'use strict'

// Many long-lived responses at once, for the tests of streams under the pool: clients of
// test/fixtures/long-lived.js's routes, and what its app said of the responses that closed early.

const http = require('node:http')
const { waitFor } = require('../helpers')

// `n` GETs of `url(i)` (a connection each): at once, or `perSecond` a second. Resolves with one
// result per request: { status, done (the stream's last event came), cut (it ended without
// it), error }. `.answered` counts the heads received so far.
function manyStreams (n, url, { headers = {}, timeout = 60000, perSecond = Infinity } = {}) {
  const opened = performance.now()
  const at = (i) => Number.isFinite(perSecond) ? Math.max(0, opened + (i * 1000) / perSecond - performance.now()) : 0
  const results = Promise.all(Array.from({ length: n }, (_, i) => new Promise((resolve) => setTimeout(resolve,
    at(i))).then(() => new Promise((resolve) => {
    const req = http.get(url(i), { agent: false, headers }, (res) => {
      results.answered++
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { text = (text + d).slice(-64) })
      res.on('end',
        () => resolve({ status: res.statusCode, done: text.includes('data: end'), cut: !text.includes('data: end') }))
      res.on('aborted', () => resolve({ status: res.statusCode, done: false, cut: true }))
      res.on('error', () => resolve({ status: res.statusCode, done: false, cut: true }))
    })
    req.setTimeout(timeout, () => req.destroy(new Error('timeout')))
    req.on('error', (err) => resolve({ status: null, done: false, cut: true, error: err.message }))
  }))))
  results.answered = 0
  return results
}

// A count of each kind of result, for one assertion: { 200: n, done: n, cut: n, ... }.
function tally (results) {
  const out = { done: 0, cut: 0 }
  for (const r of results) {
    out[r.status ?? r.error] = (out[r.status ?? r.error] ?? 0) + 1
    if (r.done) out.done++
    else out.cut++
  }
  return out
}

// GET `url`, and once its first bytes came, hang up. Resolves with performance.now() of the
// hang-up, or rejects if the response ended first.
function hangUpAfterFirstBytes (url, { headers = {}, method = 'GET', body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { agent: false, method, headers }, (res) => {
      res.once('data', () => {
        const at = Date.now()
        req.destroy()
        resolve(at)
      })
      res.on('end', () => reject(new Error('the response ended before the hang-up')))
    })
    req.on('error', () => {})
    req.end(body)
  })
}

// The app's word that a response closed before it ended (long-lived.js's app-closed line, as the
// pool's log carries it), for request `id`: its Date.now(), or undefined.
function appClosedAt (logs, id) {
  for (const l of logs) {
    if (l.event !== 'app-log' || typeof l.msg !== 'string' || !l.msg.includes('app-closed')) continue
    try {
      const said = JSON.parse(l.msg)
      if (said.id === id) return said.at
    } catch {}
  }
  return undefined
}

// Hang up `n` streams of `url` + `route` one after the other (a new id each); resolves with each
// delay from the hang-up to the app's close, ms, as `pool`'s log says.
async function hangUpDelays (pool, url, n, { headers = {}, route = '/stream?ms=20000&every=1000' } = {}) {
  const delays = []
  for (let i = 0; i < n; i++) {
    const id = `gone-${process.pid}-${i}-${Math.random()}`
    const at = await hangUpAfterFirstBytes(`${url}${route}&id=${id}`, { headers })
    await waitFor(() => appClosedAt(pool.logs, id) !== undefined,
      { timeout: 5000, what: `the app to see hang-up ${i + 1}` })
    delays.push(appClosedAt(pool.logs, id) - at)
  }
  return delays
}

// The workers `pool`'s log says were hung, or ended other than by a stop or a reload.
const killed = (pool) => pool.logs.filter((l) => l.event === 'hung' ||
  (l.event === 'exit' && l.reason !== 'stop' && l.reason !== 'reload'))

module.exports = { manyStreams, tally, hangUpAfterFirstBytes, appClosedAt, hangUpDelays, killed }
