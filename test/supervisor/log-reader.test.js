'use strict'

// Serving never waits for whoever reads the pool's logs: `pool start` with
// its stdout and stderr on a real pipe (a FIFO the test holds the reading end of), whose reader
// the test stops and starts again, as `pool start … | (sleep 600)`, a stuck log shipper or a slow
// `tee` would; an app that prints on every request, and the access log on.

const t = require('tap')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { BIN, FIXTURES, cleanEnv, freePorts, request, waitFor, sleep, tempDir } = require('../helpers')
const { pipeReader } = require('../helpers/pipe-reader')

const APP = path.join(FIXTURES, 'app-output.js')
// `pool start` with its stdout and stderr on the pipe (`2>&1 |`).
// `preload`: a module the supervisor loads first (`node -r`).
async function poolOnPipe (t, reader, args, { workers = 2, preload = null } = {}) {
  const [port, statsPort, workerPort] = await freePorts(2 + workers)
  const dir = tempDir(t, 'pool-log-reader-ctl-')
  const child = spawn(process.execPath, [...(preload ? ['-r', preload] : []), BIN, 'start', APP, '-n', String(workers),
    '--port', String(port), '--stats-port', String(statsPort),
    '--worker-port', String(workerPort), '--control', path.join(dir, 'pool.sock'), '--log-format', 'json', ...args],
  { env: cleanEnv({ POOL_TEST: '1' }), stdio: ['ignore', reader.fd, reader.fd] })
  reader.closeWriter() // the pool holds the writing end now; a reader that stops leaves it full
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(async () => {
    reader.start() // a pool blocked on its output must be able to go
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await child.exited
  })
  reader.start()
  await waitFor(() => reader.records().some((l) => l.event === 'started'),
    { timeout: 30000, what: 'the pool to start' })
  return { child, url: `http://127.0.0.1:${port}`, metricsUrl: `http://127.0.0.1:${statsPort}/metrics` }
}

// `count` requests, `concurrency` at a time, each bounded by `timeout` ms: how many were
// answered 200, and what became of the others.
async function load (url, { count, concurrency = 8, timeout = 5000, path: pathOf }) {
  let next = 0
  const failed = []
  let ok = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const i = next++
      try {
        const r = await request(url + pathOf(i), { timeout })
        if (r.status === 200) ok++
        else failed.push(`${i}: ${r.status}`)
      } catch (err) { failed.push(`${i}: ${err.message}`) }
    }
  }))
  return { ok, failed }
}

async function droppedMetric (metricsUrl) {
  const text = (await request(metricsUrl)).body
  const m = /^pool_log_lines_dropped_total (\d+)$/m.exec(text)
  if (!m) throw new Error('no pool_log_lines_dropped_total in /metrics')
  return Number(m[1])
}

t.test('pool start | a reader that stops: a bounded load completes with 0 timeouts; drops are counted, ' +
  'and told once the reader is back', async (t) => {
  const reader = pipeReader(t)
  const p = await poolOnPipe(t, reader, ['--log-buffer', '65536'])
  reader.stop()
  // 400 requests × (5 app lines and an access-log line): some 250 KB against a 64 KiB pipe and a
  // 64 KiB buffer.
  const { ok, failed } = await load(p.url, { count: 400, path: (i) => `/burst?n=5&tag=r${i}-${'y'.repeat(80)}` })
  t.same(failed, [], 'no request failed or timed out while nobody read the logs')
  t.equal(ok, 400)
  const dropped = await droppedMetric(p.metricsUrl)
  t.ok(dropped > 0, `lines dropped and counted (${dropped})`)
  reader.start()
  // Every drop is told, at most once a second: the notes, however many, come to the metric (read
  // again while they do: the app's last lines may still be dropped as the load ends).
  let total = null
  const notes = await waitFor(async () => {
    const n = reader.records().filter((l) => l.event === 'log-dropped')
    total = await droppedMetric(p.metricsUrl)
    return n.length > 0 && n.at(-1).total === total ? n : null
  }, { what: 'notes of the dropped lines up to the metric' })
  t.match(notes[0],
    {
      level: 40,
      dropped: Number,
      total: Number,
      msg: /log lines? dropped: whatever reads the pool's stdout did not keep up/
    })
  t.equal(notes.reduce((a, n) => a + n.dropped, 0), total, 'the notes add up to the metric')
  t.same(reader.records().filter((l) => l.unparsed), [], 'whole JSON lines only')
  p.child.kill('SIGTERM')
  t.same(await p.child.exited, { code: 0, signal: null })
  reader.read()
  t.equal(reader.records().at(-1).event, 'stopped', 'the last line of the stop arrived')
})

t.test('pool start | a reader that stops and comes back: nothing lost, ' +
  'up to the last lines of a graceful stop', async (t) => {
  const reader = pipeReader(t)
  const p = await poolOnPipe(t, reader, [])
  reader.stop()
  const count = 300
  const { ok, failed } = await load(p.url, { count, path: (i) => `/burst?n=2&tag=r${i}` })
  t.same(failed, [], 'no request failed or timed out while nobody read the logs')
  t.equal(ok, count)
  reader.start()
  await waitFor(() => reader.records().filter((l) => l.event === 'request').length === count,
    { what: 'every access-log line' })
  const records = reader.records()
  const appLines = new Set(records.filter((l) => l.event === 'app-log').map((l) => l.msg))
  for (let i = 0; i < count; i++) {
    if (!appLines.has(`r${i} 0`) ||
      !appLines.has(`r${i} 1`)) { t.fail(`the app's lines of request ${i} are missing`); break }
  }
  t.equal(records.filter((l) => l.event === 'log-dropped').length, 0, 'no line dropped')
  t.equal(await droppedMetric(p.metricsUrl), 0)
  // The last lines: the reader stops again, a request prints more than the pipe holds, the pool
  // is told to stop; the reader comes back while the pool waits for its output to be read.
  reader.stop()
  t.equal((await request(`${p.url}/burst?n=3000&tag=last`)).status, 200)
  p.child.kill('SIGTERM')
  await sleep(500) // the reader stays away while the pool stops: the stop must wait for it
  reader.start()
  t.same(await p.child.exited, { code: 0, signal: null })
  reader.read()
  const end = reader.records()
  const last = end.filter((l) => l.event === 'app-log' && l.stream === 'stdout' && l.msg.startsWith('last '))
    .map((l) => l.msg)
  t.same(last, Array.from({ length: 3000 }, (_, i) => `last ${i}`), 'the app\'s last lines, every one, in order')
  t.ok(end.some((l) => l.event === 'request' && l.url.startsWith('/burst?n=3000&tag=last')), 'its access-log line')
  t.equal(end.at(-1).event, 'stopped', 'and the stop\'s own last line')
})

t.test('pool start | a reader that stops, and a bug in the supervisor: ' +
  'its fatal line and the stop that follows reach the reader once it reads', async (t) => {
  const reader = pipeReader(t)
  const p = await poolOnPipe(t, reader, [], { preload: path.join(FIXTURES, 'supervisor-fault.js') })
  reader.stop()
  const { failed } = await load(p.url, { count: 200, path: (i) => `/burst?n=2&tag=r${i}` })
  t.same(failed, [], 'no request failed or timed out while nobody read the logs')
  p.child.kill('SIGUSR2') // an uncaught error in the supervisor: it stops its workers and exits 1
  await sleep(500) // the reader stays away meanwhile: the fatal line must wait for it
  reader.start()
  t.same(await p.child.exited, { code: 1, signal: null })
  reader.read()
  const records = reader.records()
  t.equal(records.filter((l) => l.event === 'request').length, 200, 'every access-log line of the load')
  t.match(records.find((l) => l.event === 'fatal'), { level: 60, err: { message: 'supervisor bug (test): thrown' } },
    'the fatal line')
  t.equal(records.at(-1).event, 'stopped', 'and the last line of the stop it caused')
})

t.test('pool start | a reader that never comes back: a graceful stop still ends, exit 0', async (t) => {
  const reader = pipeReader(t)
  const p = await poolOnPipe(t, reader, ['--log-buffer', '65536'])
  reader.stop()
  const { failed } = await load(p.url, { count: 300, path: (i) => `/burst?n=5&tag=r${i}-${'y'.repeat(80)}` })
  t.same(failed, [])
  p.child.kill('SIGTERM')
  const exited = await Promise.race([p.child.exited, sleep(30000).then(() => null)])
  t.same(exited, { code: 0, signal: null }, 'the stop waited for the reader a bounded time, then exited')
})

t.test('pool start | a reader gone for good (EPIPE): serving goes on, the stop is clean', async (t) => {
  const reader = pipeReader(t)
  const p = await poolOnPipe(t, reader, [])
  reader.closeReader()
  const { failed } = await load(p.url, { count: 200, path: (i) => `/burst?n=5&tag=r${i}` })
  t.same(failed, [])
  t.ok(await droppedMetric(p.metricsUrl) >= 200, 'what nobody can read any more is counted as dropped')
  p.child.kill('SIGTERM')
  t.same(await p.child.exited, { code: 0, signal: null })
})
