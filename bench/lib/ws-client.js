'use strict'

// The websocket part's clients (bench/websocket.js), in a process of their own (one event loop:
// one client core) so that their loop is not the server's: WebSockets to the ws app's /echo
// (bench/lib/ws-app.js), a connection each, through the `ws` library without permessage-deflate.
// A message's round trip is read on this process's clock alone: it carries its send time
// (performance.now()) and the app sends it back as it came.
//
// Messages, one at a time, each answered { result }:
//   { cmd: 'open', url, n, rampMs } → once every socket is open or failed: { opened, failed:
//       { kind: n } (an HTTP status for a handshake refused, else the error's code), rampS,
//       handshakeMs: { p50, p99, max } }; socket i is opened at i × rampMs / n
//   { cmd: 'echoStart', rate } → at once: from now on `rate` messages a second, spread evenly
//       over the sockets open (each in turn), each timed from its send to its echo
//   { cmd: 'echoStop', graceMs } → the round trips since echoStart, once the echoes still due
//       came or `graceMs` passed: { sent, received, lost, p50, p90, p99, p999, max, sendLagP99,
//       loopDelayP99, open } (ms; sendLag: how late this process sent against the schedule)
//   { cmd: 'throughput', sockets, depth, bytes, ms, max } → `sockets` of the open sockets, each
//       keeping `depth` messages of `bytes` in flight (the next sent as an echo comes), for `ms`
//       ms or `max` messages: { sockets, messages, perSecond, clientCpu (cores this process
//       used), loopDelayP99 }
//   { cmd: 'mark' } → { open }: close times from now on are counted from here
//   { cmd: 'closes', timeoutMs } → once every socket has closed, or after `timeoutMs`: { open,
//       closed, codes: { code: n }, afterMarkMs: { first, p50, last } } of the sockets closed
//       since the mark (the client closed none of them)
//   { cmd: 'closeAll', timeoutMs } → the client closes every socket left with 1000 and waits for
//       them (those left after `timeoutMs` are destroyed): { closed, codes, destroyed }

const WebSocket = require('ws')
const { monitorEventLoopDelay } = require('node:perf_hooks')

const HANDSHAKE_TIMEOUT_MS = 30000
const LOOP_RESOLUTION_MS = 1

// How late this process's event loop ran, p99, in ms: the histogram holds the time between two
// runs of its timer, so the timer's own interval is taken off.
const loopDelayP99 = (h) => Number(Math.max(0, h.percentile(99) / 1e6 - LOOP_RESOLUTION_MS).toFixed(2))

const sockets = [] // { ws, openedAt, closedAt, code, byClient }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const live = () => sockets.filter((s) => s.ws.readyState === WebSocket.OPEN)

function percentiles (values) {
  const s = Float64Array.from(values).sort()
  const n = s.length
  const at = (p) => (n ? s[Math.min(n - 1, Math.max(0, Math.ceil(p / 100 * n) - 1))] : null)
  const r = (x) => (x === null ? null : Number(x.toFixed(3)))
  return { p50: r(at(50)), p90: r(at(90)), p99: r(at(99)), p999: r(at(99.9)), max: r(n ? s[n - 1] : null) }
}

function count (list) {
  const m = {}
  for (const k of list) m[k] = (m[k] ?? 0) + 1
  return m
}

// What a message does when it comes back: set by the step that sends them.
let onEcho = () => {}

function openSocket (url) {
  const started = performance.now()
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/echo`, { perMessageDeflate: false, handshakeTimeout: HANDSHAKE_TIMEOUT_MS })
  const s = { ws, handshakeMs: null, failed: null, closedAt: null, code: null, byClient: false }
  s.settled = new Promise((resolve) => {
    ws.once('open', () => { s.handshakeMs = performance.now() - started; resolve() })
    ws.once('unexpected-response', (req, res) => {
      s.failed = String(res.statusCode)
      res.resume()
      req.destroy()
      resolve()
    })
    ws.on('error', (err) => { s.failed ??= err.code || err.message; resolve() })
    ws.once('close', (code) => {
      s.closedAt = performance.now()
      s.code = code
      resolve()
    })
  })
  ws.on('message', (data) => onEcho(s, data))
  return s
}

async function open ({ url, n, rampMs }) {
  const t0 = performance.now()
  const batch = []
  let next = 0
  await new Promise((resolve) => {
    const tick = () => {
      const now = performance.now() - t0
      while (next < n && next * rampMs / n <= now) { batch.push(openSocket(url)); next++ }
      if (next < n) setTimeout(tick, Math.max(0, (next * rampMs / n) - (performance.now() - t0) - 1))
      else resolve()
    }
    tick()
  })
  await Promise.all(batch.map((s) => s.settled))
  const ok = batch.filter((s) => s.handshakeMs !== null && s.ws.readyState === WebSocket.OPEN)
  sockets.push(...ok)
  const h = percentiles(ok.map((s) => s.handshakeMs))
  return {
    asked: n,
    opened: ok.length,
    failed: count(batch.filter((s) => !ok.includes(s)).map((s) => s.failed ?? (s.code ? `closed ${s.code}` : 'closed'))),
    rampS: Number(((performance.now() - t0) / 1000).toFixed(2)),
    handshakeMs: { p50: h.p50, p99: h.p99, max: h.max }
  }
}

// ---- round trips at a set rate ------------------------------------------------------------

let echo = null

function echoStart ({ rate }) {
  const e = { sent: 0, rtts: [], lags: [], stopped: false, loop: monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS }) }
  echo = e
  const targets = live()
  e.targets = targets.length
  onEcho = (s, data) => {
    const t = Number(data.toString('latin1'))
    if (Number.isFinite(t)) e.rtts.push(performance.now() - t)
  }
  e.loop.enable()
  const t0 = performance.now()
  const interval = 1000 / rate
  let k = 0
  const tick = () => {
    if (e.stopped) return
    const now = performance.now()
    while (t0 + k * interval <= now) {
      e.lags.push(now - (t0 + k * interval))
      const s = targets[k++ % targets.length]
      if (s.ws.readyState !== WebSocket.OPEN) continue
      s.ws.send(String(performance.now()))
      e.sent++
    }
    e.timer = setTimeout(tick, Math.max(0, t0 + k * interval - performance.now() - 1))
  }
  if (targets.length) tick()
  return { targets: targets.length }
}

async function echoStop ({ graceMs = 1000 }) {
  const e = echo
  if (!e) return null
  e.stopped = true
  clearTimeout(e.timer)
  const until = performance.now() + graceMs
  while (e.rtts.length < e.sent && performance.now() < until) await sleep(10)
  e.loop.disable()
  onEcho = () => {}
  echo = null
  const lag = percentiles(e.lags)
  return {
    targets: e.targets,
    sent: e.sent,
    received: e.rtts.length,
    lost: e.sent - e.rtts.length,
    ...percentiles(e.rtts),
    sendLagP99: lag.p99,
    loopDelayP99: loopDelayP99(e.loop),
    open: live().length
  }
}

// ---- as many as one client core sends -----------------------------------------------------

async function throughput ({ sockets: want, depth, bytes, ms, max }) {
  const chosen = live().slice(0, want)
  if (!chosen.length) return { sockets: 0, depth, bytes, messages: 0, seconds: 0, perSecond: null, lateOrLost: 0, clientCpu: null, loopDelayP99: null }
  const payload = Buffer.alloc(bytes, 120)
  const loop = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS })
  let sent = 0
  let received = 0
  let ending = false
  const t0 = performance.now()
  const endAt = t0 + ms
  onEcho = (s) => {
    received++
    if (!ending && sent < max && performance.now() < endAt && s.ws.readyState === WebSocket.OPEN) {
      s.ws.send(payload)
      sent++
    }
  }
  const cpu0 = process.cpuUsage()
  loop.enable()
  for (const s of chosen) {
    for (let i = 0; i < depth && sent < max; i++) { s.ws.send(payload); sent++ }
  }
  while (performance.now() < endAt && sent < max && received < sent) await sleep(20)
  ending = true
  const elapsed = performance.now() - t0
  const counted = received
  const cpu = process.cpuUsage(cpu0)
  loop.disable()
  // What is still in flight comes back before the next step, or is given up on.
  const until = performance.now() + 2000
  while (received < sent && performance.now() < until) await sleep(10)
  onEcho = () => {}
  return {
    sockets: chosen.length,
    depth,
    bytes,
    messages: counted,
    seconds: Number((elapsed / 1000).toFixed(3)),
    perSecond: Math.round(counted / (elapsed / 1000)),
    lateOrLost: sent - received,
    clientCpu: Number(((cpu.user + cpu.system) / 1000 / elapsed).toFixed(3)),
    loopDelayP99: loopDelayP99(loop)
  }
}

// ---- closes ---------------------------------------------------------------------------------

let mark = null

function markNow () {
  mark = performance.now()
  return { open: live().length }
}

async function closes ({ timeoutMs }) {
  const until = performance.now() + timeoutMs
  while (sockets.some((s) => s.closedAt === null) && performance.now() < until) await sleep(50)
  const since = sockets.filter((s) => s.closedAt !== null && !s.byClient && (mark === null || s.closedAt >= mark))
  const after = percentiles(since.map((s) => s.closedAt - (mark ?? 0)))
  return {
    open: live().length,
    closed: since.length,
    codes: count(since.map((s) => s.code)),
    afterMarkMs: { first: since.length ? Number(Math.min(...since.map((s) => s.closedAt - (mark ?? 0))).toFixed(1)) : null, p50: after.p50, last: after.max }
  }
}

async function closeAll ({ timeoutMs }) {
  const left = sockets.filter((s) => s.closedAt === null)
  for (const s of left) {
    s.byClient = true
    try { s.ws.close(1000) } catch {}
  }
  const until = performance.now() + timeoutMs
  while (left.some((s) => s.closedAt === null) && performance.now() < until) await sleep(20)
  let destroyed = 0
  for (const s of left) {
    if (s.closedAt !== null) continue
    destroyed++
    s.ws.terminate()
  }
  return { closed: left.length - destroyed, codes: count(left.filter((s) => s.code !== null).map((s) => s.code)), destroyed }
}

const COMMANDS = { open, echoStart, echoStop, throughput, mark: markNow, closes, closeAll }

process.on('message', async (m) => {
  const result = await COMMANDS[m.cmd](m)
  process.send({ result })
})
process.send({ ready: true })
process.on('disconnect', () => process.exit(0))
