'use strict'
// The channel between a worker and the supervisor (lib/protocol/channel.js) against an app that
// writes to it behind the runtime's back: whatever comes on it costs that worker, never the
// supervisor, and the supervisor holds a bounded amount of it. And --max-rss on heartbeats: an idle
// worker that leaks is recycled without waiting for a request.
const t = require('tap')
const fs = require('node:fs')
const { freePorts, request, startPool, fixture } = require('../helpers')
const { FrameReader, MAX_FRAME, encode } = require('../../lib/protocol/channel')

const MB = 1024 * 1024

// The supervisor's peak resident memory so far, in bytes.
function peakRss (pid) {
  const kb = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]
  return Number(kb) * 1024
}

async function abusedPool (t, workers = 2) {
  const ports = await freePorts(workers)
  const pool = startPool(['start', fixture('channel-abuse.js'), '-n', String(workers), '--worker-port',
    String(ports[0]), '--balancer', 'none'])
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started')
  const url = (slot, p) => `http://127.0.0.1:${ports[slot - 1]}${p}`
  const pidOf = async (slot) => JSON.parse((await request(url(slot, '/'))).body).pid
  return { pool, url, pidOf }
}

t.test('garbage on a worker\'s channel: that worker is killed and replaced, the pool serves on', async (t) => {
  const { pool, url, pidOf } = await abusedPool(t)
  const victim = await pidOf(1)
  const bystander = await pidOf(2)
  await request(url(1, '/garbage')).catch(() => null) // killed before or after it answers
  const line = await pool.waitLog((l) => l.event === 'channel-broken')
  t.match(line, { level: 50, slot: 1, pid: victim, problem: /not JSON: "not json"/ },
    'one line says which worker and what was wrong')
  t.match(await pool.waitLog((l) => l.event === 'exit' && l.pid === victim),
    { signal: 'SIGKILL', reason: 'channel-broken' })
  await pool.waitLog((l) => l.event === 'ready' && l.slot === 1 && l.pid !== victim)
  t.not(await pidOf(1), victim, 'slot 1 serves again, with a new process')
  t.equal(await pidOf(2), bystander, 'the other worker was never touched')
  t.equal(pool.exitCode, null, 'the supervisor lives')
  t.equal(pool.logs.filter((l) => l.event === 'channel-broken').length, 1, 'told once')
  t.same(await pool.stop(), { code: 0, signal: null })
})

t.test('an oversize frame: the supervisor holds a bounded part of it, the worker is replaced', async (t) => {
  const { pool, url, pidOf } = await abusedPool(t, 1)
  const victim = await pidOf(1)
  const before = peakRss(pool.pid)
  await request(url(1, '/oversize?mb=64'), { timeout: 15000 }).catch(() => null)
  const exit = await pool.waitLog((l) => l.event === 'exit' && l.pid === victim, 10000).catch(() => null)
  const grew = peakRss(pool.pid) - before
  t.ok(grew < 24 * MB,
    `64 MB without a newline grew the supervisor by ${(grew / MB).toFixed(1)} MB at its peak (frames: ` +
      `${MAX_FRAME / MB} MB at most)`)
  t.match(exit, { signal: 'SIGKILL', reason: 'channel-broken' }, 'the worker was killed for it')
  t.match(pool.logs.find((l) => l.event === 'channel-broken'),
    { slot: 1, pid: victim, problem: /longer than 1048576 bytes/ })
  await pool.waitLog((l) => l.event === 'ready' && l.slot === 1 && l.pid !== victim)
  t.not(await pidOf(1), victim, 'replaced')
  t.same(await pool.stop(), { code: 0, signal: null })
})

t.test('--max-rss: an idle worker that leaks is recycled on its heartbeats, without a request', async (t) => {
  const [port] = await freePorts(1)
  const pool = startPool(['start', fixture('idle-leak.js'), '-n', '1', '--worker-port', String(port), '--balancer',
    'none',
    '--max-rss', '120', '--heartbeat-interval', '200ms'])
  t.teardown(() => pool.stop())
  const first = await pool.waitLog((l) => l.event === 'ready')
  const recycle = await pool.waitLog((l) => l.event === 'recycle')
  t.match(recycle, { slot: 1, pid: first.pid, reason: 'max-rss', requests: 0 })
  t.ok(recycle.rss > 120 * MB, `its RSS was past the limit (${Math.round(recycle.rss / MB)} MB)`)
  t.match(await pool.waitLog((l) => l.event === 'exit' && l.pid === first.pid),
    { code: 0, signal: null, reason: 'max-rss' }, 'drained, not killed: it was idle')
  await pool.waitLog((l) => l.event === 'ready' && l.pid !== first.pid)
  t.same(await pool.stop(), { code: 0, signal: null })
})

t.test('the frame reader: frames across reads, and one report for what breaks the framing', async (t) => {
  const frames = []
  const problems = []
  const reader = (maxFrame) => new FrameReader({
    onFrame: (v) => frames.push(v),
    onError: (p) => problems.push(p),
    maxFrame
  })
  const whole = Buffer.from(encode({ v: 1, type: 'ready', text: 'é\nü' }) + encode({ v: 1, type: 'idle' }))
  const r = reader()
  for (let i = 0; i < whole.length; i++) r.push(whole.subarray(i, i + 1)) // a byte per read, splitting characters
  t.same(frames, [{ v: 1, type: 'ready', text: 'é\nü' }, { v: 1, type: 'idle' }])
  t.same(problems, [])

  const small = reader(16)
  small.push(Buffer.from('{"a":"123456789"}\n')) // 18 bytes
  small.push(Buffer.from('{}\n'))
  t.same(problems, ['a frame longer than 16 bytes'], 'over the limit, however it arrives')
  t.equal(small.size, 0, 'nothing held after')
  const unfinished = reader(16)
  unfinished.push(Buffer.from('{"a":"1234'))
  unfinished.push(Buffer.from('56789012'))
  t.same(problems.at(-1), 'a frame longer than 16 bytes', 'noticed before its end arrives')
  frames.length = 0
  const garbage = reader()
  garbage.push(Buffer.from('{"ok":1}\n\n{"never":1}\n'))
  t.same(frames, [{ ok: 1 }], 'frames before the bad one are told, none after')
  t.match(problems.at(-1), /not JSON: ""/)
  t.throws(() => encode({ type: 'huge', text: 'x'.repeat(MAX_FRAME) }),
    /exceeds the pool channel's 1048576-byte frame limit/)
})
