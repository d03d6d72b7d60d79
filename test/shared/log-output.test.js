'use strict'

// The supervisor's log output  alone, on a real pipe whose reader the test
// stops: it never blocks, keeps what fits in its buffer, drops and counts the rest, says so once
// the reader is back, and loses nothing when the reader keeps up. `pool start` on such a pipe:
// test/supervisor/log-reader.test.js.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { LogOutput } = require('../../lib/shared/log-output')
const { FIXTURES, sleep, waitFor } = require('../helpers')
const { pipeReader, PIPE_BYTES } = require('../helpers/pipe-reader')

t.test('the output alone: never blocks, drops whole lines past its bound, ' +
  'counts them and says so once the reader is back', async (t) => {
  const reader = pipeReader(t, { nonBlockingWriter: true })
  const out = new LogOutput({ fd: reader.fd, maxBytes: 32 * 1024 })
  t.teardown(() => out.close())
  const told = []
  out.onDropped = (n) => { told.push(n); out.write(`{"note":"dropped","n":${n}}\n`) }
  reader.stop() // nobody reads, and the pipe is full
  let filled = 0
  try {
    for (;;) filled += fs.writeSync(reader.fd, '{"fill":true}\n')
  } catch (err) {
    if (err.code !== 'EAGAIN') throw err
  }
  t.ok(filled >= PIPE_BYTES / 2, `the pipe took ${filled} bytes before it was full`)
  const line = (i) => `{"i":${i},"pad":"${'x'.repeat(1000)}"}\n`
  const began = performance.now()
  for (let i = 0; i < 1000; i++) out.write(line(i)) // 1 MB: the pipe holds 64 KiB, the buffer 32 KiB
  t.ok(performance.now() - began < 5000, 'the writes returned without waiting for a reader')
  await sleep(300) // a while with nobody reading: nothing may be told meanwhile
  t.ok(out.dropped > 0, `lines dropped past the bound (${out.dropped})`)
  t.ok(out.dropped < 1000, 'what fit was kept')
  t.same(told, [], 'nothing told while nobody reads')
  t.equal(await out.flush(200), false, 'a flush gives up on a reader that does not read')
  reader.start()
  await waitFor(() => told.length > 0, { what: 'the note' })
  t.ok(await out.flush(5000), 'everything kept is written once the reader reads')
  reader.read() // what the last write put in the pipe
  const records = reader.records()
  t.same(records.filter((r) => r.unparsed), [], 'only whole lines: nothing torn')
  const kept = records.filter((r) => r.i !== undefined).map((r) => r.i)
  t.same(kept, [...kept].sort((a, b) => a - b), 'in order')
  t.equal(kept.length + out.dropped, 1000, 'every line either written or counted')
  t.same(records.filter((r) => r.note), [{ note: 'dropped', n: out.dropped }],
    'one note, with the count, after the lines kept')
  t.equal(told.reduce((a, n) => a + n, 0), out.dropped)
})

t.test('the output alone: a reader that keeps up loses nothing', async (t) => {
  const reader = pipeReader(t, { nonBlockingWriter: true })
  const out = new LogOutput({ fd: reader.fd, maxBytes: 32 * 1024 })
  t.teardown(() => out.close())
  reader.start()
  for (let i = 0; i < 2000; i++) {
    out.write(`{"i":${i}}\n`)
    if (i % 100 === 99) await sleep(5) // paced, so that the reader keeps up
  }
  t.ok(await out.flush(5000))
  reader.read()
  t.equal(reader.records().length, 2000, 'every line read')
  t.same(reader.records().map((r) => r.i), Array.from({ length: 2000 }, (_, i) => i))
  t.equal(out.dropped, 0)
})

t.test('the output alone: lines go out in batches, the last of them within batchMs, without a flush', async (t) => {
  const reader = pipeReader(t, { nonBlockingWriter: true })
  const out = new LogOutput({ fd: reader.fd, batchBytes: 8192, batchMs: 50 })
  t.teardown(() => out.close())
  reader.start()
  out.write('{"one":1}\n')
  await sleep(20) // within batchMs: nothing may go out yet
  reader.read()
  t.equal(reader.text, '', 'a lone line waits for its batch')
  await waitFor(() => { reader.read(); return reader.text === '{"one":1}\n' },
    { timeout: 2000, what: 'the lone line, once its batch time has passed' })
  // 20 KB at once: a first write of a batch, then the rest, below the batch size, later.
  for (let i = 0; i < 200; i++) out.write(`{"i":${i},"pad":"${'x'.repeat(80)}"}\n`)
  await waitFor(() => { reader.read(); return reader.records().filter((r) => r.i !== undefined).length === 200 },
    { timeout: 2000, what: 'every line of the burst, its tail included' })
  t.ok(out.idle)
})

t.test('a child that shared the pipe exits: the writes still never wait for the reader, ' +
  'the exit\'s flush neither', async (t) => {
  // Node.js clears O_NONBLOCK on its inherited stdio when it exits; on the pipe's shared
  // description that made every later write, the exit's synchronous flush included, wait for
  // a reader that never came.
  const reader = pipeReader(t)
  const child = spawn(process.execPath, [path.join(FIXTURES, 'log-output-child-exit.js')],
    { stdio: ['ignore', reader.fd, 'inherit'] })
  reader.closeWriter()
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); reader.start() })
  const result = await Promise.race([exited, sleep(10000).then(() => 'still running 10 s later')])
  t.same(result, { code: 0, signal: null }, 'it exited by itself, the reader never having read')
  reader.read()
  t.ok(reader.text.length > PIPE_BYTES / 2,
    `the pipe was filled: the lines were written until it was full (${reader.text.length} bytes)`)
})

t.test('a note of dropped lines due within a second of the last one comes when that second is over, ' +
  'with no write to carry it', async (t) => {
  // Drops told once while the reader was still stopped (a partial write got through), more
  // dropped after, and the reader back: the buffer is written out within that second, and no
  // later write would tell of the rest.
  const reader = pipeReader(t, { nonBlockingWriter: true })
  const output = new LogOutput({ fd: reader.fd, maxBytes: 4096, batchMs: 5 })
  t.teardown(() => output.close())
  const told = []
  output.onDropped = (n) => told.push({ n, at: Date.now() })
  output.toldAt = performance.now() // a note was just told
  output.untold = 3 // and three lines were dropped since
  output.write('a line\n')
  await waitFor(() => output.idle, { what: 'the line written' })
  t.same(told, [], 'not told within the second')
  await waitFor(() => told.length > 0, { timeout: 3000, what: 'the note, once the second is over' })
  t.same(told.map((x) => x.n), [3], 'the three, told once')
  reader.read()
  t.match(reader.text, /a line/)
})

t.test('a note that finds no room is dropped and counted like a line, and told with the rest by the next one: ' +
  'the notes add up to the count', async (t) => {
  // A note is longer than most lines, so where a line was just dropped it does not fit either
  // (a flush while the reader is stuck, as here; a write that freed less than it; the second's
  // timer with the buffer full). Its lines were then told by no note: the next said 1 where
  // 2,278 had been dropped (log-reader.test.js, now and then).
  const reader = pipeReader(t, { nonBlockingWriter: true })
  const out = new LogOutput({ fd: reader.fd, maxBytes: 8192 })
  t.teardown(() => out.close())
  out.onDropped = (n) => out.write(`{"note":"dropped","n":${n},"total":${out.dropped},"pad":"${'z'.repeat(300)}"}\n`)
  reader.stop()
  try { for (;;) fs.writeSync(reader.fd, '{"fill":true}\n') } catch (err) { if (err.code !== 'EAGAIN') throw err }
  for (let i = 0; i < 100; i++) out.write(`{"i":${i},"pad":"${'x'.repeat(100)}"}\n`) // 11 KB: the buffer holds 8 KiB
  const lines = out.dropped
  t.ok(lines > 0, `lines dropped past the bound (${lines})`)
  t.equal(await out.flush(100), false, 'the flush tells first, and gives up on a reader that does not read')
  t.equal(out.dropped, lines + 1, 'the note found no room: dropped and counted')
  reader.start()
  await waitFor(() => reader.records().some((r) => r.note), { timeout: 3000, what: 'a note once the reader is back' })
  t.ok(await out.flush(5000), 'everything kept is written')
  reader.read()
  const notes = reader.records().filter((r) => r.note)
  t.equal(notes.reduce((a, r) => a + r.n, 0), out.dropped,
    'the notes add up to the count, the lost note\'s own line among them')
  t.equal(notes.at(-1).total, out.dropped)
})
