'use strict'

// The streams part's clients (bench/streams.js), in a process of their own so that their event
// loop is not the server's: long-lived server-sent event streams of the streams app
// (bench/lib/streams-app.js), a connection each, `Accept: text/event-stream` as EventSource
// sends it. Every token carries its sender's process.hrtime.bigint(); its delay is the receipt's
// hrtime minus that (one CLOCK_MONOTONIC for every process on Linux).
//
// Messages, one at a time, each answered { result }:
//   { cmd: 'open', url, n, every, ms, rampMs, prefix } → once every stream has its head or failed:
//       { opened, statuses, errors, headMs: { p50, p99 } }; stream i is opened at i × rampMs / n
//   { cmd: 'window', ms } → the delays of the tokens received over the next `ms` ms: { tokens,
//       p50, p90, p99, p999, max, open, loopDelayP99 } (open: streams open at its end; ms)
//   { cmd: 'hangup', url, count, every, ms, prefix, closes, settleMs, waitMs, gapMs, budgetMs } →
//       one stream at a time: opened, hung up `settleMs` after its first token, and the time
//       from the hang-up to its 'close' in the app (read from the app's $STREAMS_CLOSES files),
//       or null if not seen within `waitMs`: { delays: [ms | null], failed: { kind: n } }
//   { cmd: 'finish', timeoutMs } → once every stream ended (those left after `timeoutMs` are
//       destroyed and count as `unfinished`): { complete, cut, statuses, errors, unfinished,
//       tokensMissing, said }

const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const { monitorEventLoopDelay } = require('node:perf_hooks')

const HEAD_TIMEOUT_MS = 30000
const SILENCE_TIMEOUT_MS = 60000

const streams = []
let delays = null // Float64Array while a window collects
let collected = 0

function record (ms) {
  if (!delays) return
  if (collected === delays.length) {
    const bigger = new Float64Array(delays.length * 2)
    bigger.set(delays)
    delays = bigger
  }
  delays[collected++] = ms
}

function percentiles (values, n) {
  const s = values.subarray(0, n).sort()
  const at = (p) => (n ? s[Math.min(n - 1, Math.max(0, Math.ceil(p / 100 * n) - 1))] : null)
  const r = (x) => (x === null ? null : Number(x.toFixed(3)))
  return { tokens: n, p50: r(at(50)), p90: r(at(90)), p99: r(at(99)), p999: r(at(99.9)), max: r(n ? s[n - 1] : null) }
}

const failureKind = (err) => (err.code || err.message || 'error')

// One stream: { id, status, head (ms to its head), tokens, endCount, outcome, kind, done }.
// onToken(s, k) on each token; settles `done` once its outcome is known.
function openStream (url, { every, ms, id }, onToken = () => {}) {
  const s = { id, status: 0, head: null, tokens: 0, endCount: null, outcome: null, kind: null, req: null }
  const started = performance.now()
  s.done = new Promise((resolve) => {
    const settle = (outcome, kind = null) => {
      if (s.outcome) return
      s.outcome = outcome
      s.kind = kind
      resolve(s)
    }
    s.settle = settle
    const options = { agent: false, headers: { accept: 'text/event-stream' } }
    const req = http.get(`${url}/stream?ms=${ms}&every=${every}&id=${id}`, options, (res) => {
      s.status = res.statusCode
      s.head = performance.now() - started
      if (s.onHead) s.onHead()
      if (res.statusCode !== 200) {
        s.body = ''
        res.setEncoding('latin1')
        res.on('data', (c) => { if (s.body.length < 200) s.body += c })
        res.on('end', () => settle('status'))
        res.on('close', () => settle('status'))
        return
      }
      req.setTimeout(SILENCE_TIMEOUT_MS, () => req.destroy(new Error('silent')))
      let buffer = ''
      res.setEncoding('latin1')
      res.on('data', (chunk) => {
        const now = process.hrtime.bigint()
        buffer += chunk
        let cut
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, cut)
          buffer = buffer.slice(cut + 2)
          if (event.startsWith('data: t ')) {
            const [, k, hr] = event.slice(6).split(' ')
            s.tokens++
            record(Number(now - BigInt(hr)) / 1e6)
            onToken(s, Number(k))
          } else if (event.startsWith('data: end ')) s.endCount = Number(event.slice(10))
        }
      })
      res.on('end', () => settle(s.endCount !== null ? 'complete' : 'cut'))
      res.on('close', () => settle(s.endCount !== null && res.complete ? 'complete' : 'cut'))
    })
    s.req = req
    req.setTimeout(HEAD_TIMEOUT_MS, () => req.destroy(new Error('timeout')))
    req.on('error', (err) => settle(s.status ? 'cut' : 'error', failureKind(err)))
  })
  return s
}

// { key(x): how many } over `list`, null keys left out.
function count (list, key) {
  const m = {}
  for (const x of list) {
    const k = key(x)
    if (k !== null && k !== undefined) m[k] = (m[k] ?? 0) + 1
  }
  return m
}

async function open ({ url, n, every, ms, rampMs, prefix }) {
  const heads = []
  const t0 = performance.now()
  let next = 0
  await new Promise((resolve) => {
    const tick = () => {
      const now = performance.now() - t0
      while (next < n && next * rampMs / n <= now) {
        const s = openStream(url, { every, ms, id: `${prefix}-${next++}` })
        streams.push(s)
        heads.push(new Promise((resolve) => { s.onHead = resolve; s.done.then(resolve) }))
      }
      if (next < n) setTimeout(tick, Math.max(0, (next * rampMs / n) - (performance.now() - t0) - 1))
      else resolve()
    }
    tick()
  })
  await Promise.all(heads)
  const headMs = Float64Array.from(streams.filter((s) => s.head !== null).map((s) => s.head))
  const h = percentiles(headMs, headMs.length)
  return {
    opened: streams.filter((s) => s.status === 200 && !s.outcome).length,
    rampS: Number(((performance.now() - t0) / 1000).toFixed(2)),
    statuses: count(streams, (s) => (s.status ? s.status : null)),
    errors: count(streams.filter((s) => s.outcome === 'error'), (s) => s.kind),
    headMs: { p50: h.p50, p99: h.p99, max: h.max }
  }
}

async function window ({ ms }) {
  const loop = monitorEventLoopDelay({ resolution: 10 })
  delays = new Float64Array(1 << 16)
  collected = 0
  loop.enable()
  await new Promise((resolve) => setTimeout(resolve, ms))
  loop.disable()
  const got = percentiles(delays, collected)
  delays = null
  const loopDelayP99 = Number((loop.percentile(99) / 1e6).toFixed(2))
  return { ...got, open: streams.filter((s) => !s.outcome).length, loopDelayP99 }
}

// The app's close records, read as they are appended: id → hrtime (BigInt).
function closesReader (dir) {
  const files = new Map() // name → { offset, rest }
  const seen = new Map()
  return (id) => {
    let names = []
    try { names = fs.readdirSync(dir) } catch {}
    for (const name of names) {
      const f = files.get(name) ?? { offset: 0, rest: '' }
      files.set(name, f)
      let fd
      try { fd = fs.openSync(path.join(dir, name), 'r') } catch { continue }
      try {
        const size = fs.fstatSync(fd).size
        if (size > f.offset) {
          const buf = Buffer.alloc(size - f.offset)
          fs.readSync(fd, buf, 0, buf.length, f.offset)
          f.offset = size
          const lines = (f.rest + buf.toString('latin1')).split('\n')
          f.rest = lines.pop()
          for (const line of lines) {
            const [key, hr] = line.split(' ')
            if (key && hr) seen.set(key, BigInt(hr))
          }
        }
      } finally { fs.closeSync(fd) }
    }
    return seen.get(id) ?? null
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function hangup (m) {
  const { url, count: n, every, ms, prefix, closes, settleMs = 50, waitMs = 3000, gapMs = 20, budgetMs = 10000 } = m
  const closeOf = closesReader(closes)
  const delaysMs = []
  const failed = {}
  const deadline = performance.now() + budgetMs
  for (let k = 0; k < n && performance.now() < deadline; k++) {
    const id = `${prefix}-h${k}`
    let first
    const firstToken = new Promise((resolve) => { first = resolve })
    const s = openStream(url, { every, ms, id }, () => first())
    const gaveUp = sleep(HEAD_TIMEOUT_MS).then(() => false)
    const got = await Promise.race([firstToken.then(() => true), s.done.then(() => false), gaveUp])
    if (!got) {
      s.req.destroy()
      const kind = s.status && s.status !== 200 ? String(s.status) : s.kind ?? 'no token'
      failed[kind] = (failed[kind] ?? 0) + 1
      continue
    }
    await sleep(settleMs)
    const at = process.hrtime.bigint()
    s.req.destroy()
    const until = performance.now() + waitMs
    let closed = null
    while ((closed = closeOf(id)) === null && performance.now() < until) await sleep(5)
    delaysMs.push(closed === null ? null : Number(closed - at) / 1e6)
    await sleep(gapMs)
  }
  return { delays: delaysMs, failed }
}

async function finish ({ timeoutMs }) {
  const all = Promise.all(streams.map((s) => s.done))
  const timer = sleep(timeoutMs)
  await Promise.race([all, timer])
  for (const s of streams) {
    if (s.outcome) continue
    s.settle('unfinished')
    s.req.destroy()
  }
  const by = (o) => streams.filter((s) => s.outcome === o)
  return {
    streams: streams.length,
    complete: by('complete').length,
    cut: by('cut').length,
    unfinished: by('unfinished').length,
    statuses: count(by('status'), (s) => s.status),
    errors: count(by('error'), (s) => s.kind),
    cutKinds: count(by('cut'), (s) => s.kind ?? 'closed'),
    // One answer of each non-200 status, its body's start: what the front said.
    said: Object.fromEntries(by('status').map((s) => [s.status, s.body.slice(0, 200)])),
    tokensMissing: by('complete').reduce((m, s) => m + Math.max(0, s.endCount - s.tokens), 0)
  }
}

const COMMANDS = { open, window, hangup, finish }

process.on('message', async (m) => {
  const result = await COMMANDS[m.cmd](m)
  process.send({ result })
})
process.send({ ready: true })
process.on('disconnect', () => process.exit(0))
