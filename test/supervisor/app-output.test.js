'use strict'

// What a worker prints becomes log records tagged with its slot and pid
// (lib/supervisor/app-output.js): the line splitter alone (chunks, partial lines, UTF-8 across
// chunks, long lines, order), the capture with a fake child, the pretty renderer,
// then a real `pool start` with an app that prints: bursts, a huge line, a flood while serving, the
// worker runtime's own lines passed on, a last line without newline, a graceful stop; and the
// pretty form.

const t = require('tap')
const path = require('node:path')
const { PassThrough } = require('node:stream')
const pino = require('pino')
const { LineSplitter, captureOutput, MAX_LINE } = require('../../lib/supervisor/app-output')
const { createPrettyRenderer } = require('../../lib/shared/logger')
const { FIXTURES, freePorts, startPool, request, waitFor, sleep, untilBusy } = require('../helpers')

const APP = path.join(FIXTURES, 'app-output.js')

function split (chunks, { maxLine, end = true } = {}) {
  const out = []
  const s = new LineSplitter({ maxLine, onLine: (text, part) => out.push(part ? [text, part] : text) })
  for (const c of chunks) s.push(c)
  if (end) s.end()
  return out
}

t.test('the splitter: whole lines, lines across chunks, a last line without newline', async (t) => {
  t.same(split(['a\nb', 'c\n', '\nd']), ['a', 'bc', '', 'd'],
    'a line split across chunks is one line; an empty line stays')
  t.same(split(['a\n', 'partial'], { end: false }), ['a'], 'a partial line waits for its end')
  t.same(split(['x\r\n', 'y\r', '\n']), ['x', 'y'], 'CRLF ends a line like LF')
  t.same(split([]), [], 'no output, no line')
  t.same(split(['tail']), ['tail'], 'end() gives out an unterminated last line')
})

t.test('the splitter: UTF-8 split inside a character, at every byte', async (t) => {
  const text = 'aé✓😀 mixed é✓😀\nsecond ✓\n'
  const bytes = Buffer.from(text)
  t.same(split([...bytes].map((b) => Buffer.from([b]))), ['aé✓😀 mixed é✓😀', 'second ✓'], 'one byte per chunk')
  for (let cut = 1; cut < bytes.length; cut++) {
    const got = split([bytes.subarray(0, cut), bytes.subarray(cut)])
    if (got.join('\n') !== 'aé✓😀 mixed é✓😀\nsecond ✓') t.fail(`cut at byte ${cut}: ${JSON.stringify(got)}`)
  }
  t.pass('every two-chunk cut decodes the same')
})

t.test('the splitter: a line longer than maxLine comes in marked parts', async (t) => {
  const long = 'abcdefghij'.repeat(2) + 'xyz' // 23 characters
  t.same(split([long + '\n'], { maxLine: 10 }), [
    ['abcdefghij', { part: 1, more: true }], ['abcdefghij', { part: 2, more: true }], ['xyz', { part: 3 }]
  ], 'parts 1..3, all but the last with more')
  const pieces = [long.slice(0, 7), long.slice(7, 15), long.slice(15), '\nnext\n']
  t.same(split(pieces, { maxLine: 10 }).map((x) => Array.isArray(x) ? x[0] : x),
    ['abcdefghij', 'abcdefghij', 'xyz', 'next'],
    'the same when the long line arrives in pieces, and the next line is whole')
  t.same(split(['0123456789\n'], { maxLine: 10 }), ['0123456789'], 'exactly maxLine: not split')
  t.same(split(['01234567890123456789\n'], { maxLine: 10 }),
    [['0123456789', { part: 1, more: true }], ['0123456789', { part: 2 }]],
    'twice maxLine: two parts, the last without more')
  t.same(split(['0123456789AB'], { maxLine: 10 }), [['0123456789', { part: 1, more: true }], ['AB', { part: 2 }]],
    'a long last line without newline')
  const emoji = '123456789😀tail\n' // the surrogate pair straddles character 10
  const parts = split([emoji], { maxLine: 10 })
  t.equal(parts[0][0], '123456789', 'never cut between the halves of a surrogate pair')
  t.equal(parts.map((p) => p[0]).join(''), '123456789😀tail', 'nothing lost')
  t.equal(MAX_LINE, 16384, 'the default limit')
})

t.test('the splitter: many lines in random chunks, each once and in order', async (t) => {
  const lines = Array.from({ length: 5000 }, (_, i) => `line ${i} ${'é'.repeat(i % 7)}`)
  const bytes = Buffer.from(lines.join('\n') + '\n')
  const chunks = []
  for (let at = 0; at < bytes.length;) {
    const n = 1 + Math.floor(Math.random() * 300)
    chunks.push(bytes.subarray(at, at + n))
    at += n
  }
  t.same(split(chunks), lines)
})

// A pino logger writing into an array of parsed records.
function memoryLogger (level = 'info') {
  const records = []
  const raw = []
  const logger = pino({ level, base: null }, { write: (s) => { raw.push(s); records.push(JSON.parse(s)) } })
  return { logger, records, raw }
}

function fakeChild (pid) {
  return { pid, stdout: new PassThrough(), stderr: new PassThrough() }
}

t.test('capture: records tagged with slot, port and pid; stderr at warn; ' +
  'the runtime\'s lines passed on as they are', async (t) => {
  const { logger, records, raw } = memoryLogger()
  const child = fakeChild(4242)
  const { done } = captureOutput(child, { logger, slot: 3, port: 8003, maxLine: 150 })
  const runtimeLine = JSON.stringify({
    level: 40,
    time: 1,
    pid: 4242,
    slot: 3,
    port: 8003,
    event: 'request-queued',
    waiting: 1,
    msg: 'queued'
  })
  const strangerLine = JSON.stringify({ level: 30, time: 1, pid: 1, slot: 3, msg: 'another process\'s pino line' })
  child.stdout.write('hello\n' + runtimeLine + '\n' + strangerLine.slice(0, 5))
  child.stdout.write(strangerLine.slice(5) + '\n' + '0123456789'.repeat(15) + 'AB\nno newline')
  child.stderr.write('oops\n')
  child.stdout.end()
  child.stderr.end()
  await done
  const app = records.filter((r) => r.event === 'app-log' && r.stream === 'stdout')
  t.match(app[0], { level: 30, slot: 3, port: 8003, pid: 4242, event: 'app-log', stream: 'stdout', msg: 'hello' })
  t.ok(raw.includes(runtimeLine + '\n'), 'the runtime\'s own line is written unchanged')
  t.equal(records.filter((r) => r.event === 'request-queued').length, 1, '...once, not wrapped')
  t.equal(app[1].msg, strangerLine, 'a JSON line of another pid is the app\'s output, wrapped')
  t.same(app.slice(2, 4).map((r) => [r.msg, r.part, r.more]),
    [['0123456789'.repeat(15), 1, true], ['AB', 2, undefined]], 'a long line in parts')
  t.match(app[4], { msg: 'no newline', stream: 'stdout' }, 'the partial last line, flushed at the end')
  t.match(records.find((r) => r.stream === 'stderr'), { level: 40, msg: 'oops', pid: 4242, slot: 3 })
})

t.test('capture: the runtime\'s lines below the logger\'s level are dropped like the logger\'s own', async (t) => {
  const { logger, records } = memoryLogger('warn')
  const child = fakeChild(7)
  const { done } = captureOutput(child, { logger, slot: 1, port: 1 })
  child.stdout.end(JSON.stringify({ level: 30, time: 1, pid: 7, slot: 1, port: 1, msg: 'info' }) + '\nplain\n')
  child.stderr.end('err\n')
  await done
  t.same(records.map((r) => r.msg), ['err'], 'info lines filtered out, the stderr line (warn) kept')
})

t.test('pretty: the access log and app lines on one line each; other records as before', async (t) => {
  const render = createPrettyRenderer({ colorize: false })
  const request = render(JSON.stringify({
    level: 30,
    time: Date.now(),
    component: 'balancer',
    event: 'request',
    id: 'r-1',
    method: 'GET',
    url: '/p?q=1',
    status: 200,
    ms: 12.3,
    queueMs: 0.4,
    worker: 'worker2',
    attempts: 1,
    reason: 'odd value\nwith a newline',
    msg: 'GET /p?q=1 200 12ms'
  }) + '\n')
  t.equal(request.split('\n').length, 2, 'one line (and its newline)')
  t.match(request,
    /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: GET \/p\?q=1 200 12ms id=r-1 queueMs=0\.4 worker=worker2 attempts=1 reason="odd value\\nwith a newline"\n$/)
  const app = render(JSON.stringify({
    level: 40,
    time: Date.now(),
    slot: 2,
    port: 8002,
    event: 'app-log',
    stream: 'stderr',
    pid: 99,
    part: 1,
    more: true,
    msg: 'boom'
  }))
  t.match(app, /^\[[\d:.]+\] WARN: \[slot 2 pid 99 stderr part 1\+\] boom\n$/)
  const spawn = render(JSON.stringify({
    level: 30,
    time: Date.now(),
    slot: 1,
    port: 8001,
    event: 'spawn',
    pid: 5,
    msg: 'worker 1 spawned'
  }))
  t.match(spawn, /INFO \(5\): worker 1 spawned\n\s+slot: 1\n/, 'a lifecycle record keeps its fields below it')
  t.equal(render('not json\n'), 'not json\n', 'a line that is not JSON goes out as it is')
})

// --- with a real pool ---------------------------------------------------------------------

const appLogs = (pool, pred) => pool.logs.filter((l) => l.event === 'app-log' && pred(l))

// The lines "TAG 0" … "TAG n-1" of one pid arrived once each, in order, on stdout at info.
function checkSeries (t, pool, { tag, n, pid, slot }) {
  const got = appLogs(pool,
    (l) => l.stream === 'stdout' && l.msg.startsWith(`${tag} `) && !l.msg.startsWith(`${tag} done`))
  const wrong = got.filter((l) => l.pid !== pid || l.slot !== slot || l.level !== 30)
  t.equal(wrong.length, 0, `${tag}: every line tagged slot ${slot}, pid ${pid}, info`)
  const numbers = got.map((l) => Number(l.msg.slice(tag.length + 1)))
  const outOfPlace = numbers.findIndex((x, i) => x !== i)
  t.ok(numbers.length === n && outOfPlace === -1,
    `${tag}: ${n} lines once each, in order (got ${numbers.length}, first out of place at ${outOfPlace})`)
}

t.test('a real pool (JSON): the app\'s lines as records, every one once and in order, stdout valid JSON', async (t) => {
  const ports = await freePorts(2)
  const pool = startPool(['start', APP, '-n', '2', '--balancer', 'none', '--worker-port', String(ports[0]),
    '--log-format', 'json', '--restart-delay', '20ms', '--kill-timeout', '500ms'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const url = (slot) => `http://127.0.0.1:${ports[slot - 1]}`
  const pidOf = (slot) => [...pool.logs].reverse().find((l) => l.event === 'ready' && l.slot === slot).pid
  // The pid of slot 2's next worker: a ready line of a pid not seen before.
  const seen = new Set()
  const nextReady2 = async () => {
    const { pid } = await pool.waitLog((l) => l.event === 'ready' && l.slot === 2 && !seen.has(l.pid))
    seen.add(pid)
    return pid
  }
  const pid1 = pidOf(1)
  const pid2 = await nextReady2()

  for (const [slot, pid] of [[1, pid1], [2, pid2]]) {
    t.ok(appLogs(pool,
      (l) => l.slot === slot && l.pid === pid && l.stream === 'stdout' && l.level === 30 &&
        l.msg === `hello from slot ${slot}: é ✓ 😀`).length === 1,
    `slot ${slot}: its console.log at load, once, UTF-8 intact`)
    t.ok(appLogs(pool,
      (l) => l.slot === slot && l.pid === pid && l.stream === 'stderr' && l.level === 40 &&
        l.msg === `warning from slot ${slot}`).length === 1,
    `slot ${slot}: its console.error at load, at warn`)
  }

  // Two workers printing 20,000 lines each at once.
  const bursts = await Promise.all([request(`${url(1)}/burst?n=20000&tag=A`), request(`${url(2)}/burst?n=20000&tag=B`)])
  t.same(bursts.map((r) => r.status), [200, 200])
  await pool.waitLog((l) => l.msg === 'A 19999', 20000)
  await pool.waitLog((l) => l.msg === 'B 19999', 20000)
  checkSeries(t, pool, { tag: 'A', n: 20000, pid: pid1, slot: 1 })
  checkSeries(t, pool, { tag: 'B', n: 20000, pid: pid2, slot: 2 })
  const errs = appLogs(pool, (l) => l.stream === 'stderr' && l.msg.startsWith('A err '))
  t.same(errs.map((l) => l.msg), Array.from({ length: 20 }, (_, i) => `A err ${i * 1000}`),
    'the stderr lines too, once each, in order')
  t.ok(errs.every((l) => l.pid === pid1 && l.level === 40), '...tagged with the pid, at warn')

  // One huge line (100,000 characters of 1 to 4 UTF-8 bytes): parts that join back to it.
  await request(`${url(2)}/huge?reps=20000&tag=H`)
  const last = await pool.waitLog((l) => l.event === 'app-log' && l.pid === pid2 && l.part && !l.more, 10000)
  const first = pool.logs.findIndex((l) => l.event === 'app-log' && l.pid === pid2 && l.part === 1)
  const parts = pool.logs.slice(first, pool.logs.indexOf(last) + 1)
    .filter((l) => l.pid === pid2 && l.stream === 'stdout')
  t.same(parts.map((l) => l.part), parts.map((_, i) => i + 1), `the huge line in ${parts.length} consecutive parts`)
  t.ok(parts.every((l) => l.msg.length <= MAX_LINE), 'none longer than the limit')
  t.equal(parts.map((l) => l.msg).join(''), 'H ' + 'aé✓😀'.repeat(20000), 'joined, the line exactly as printed')

  // The worker runtime's own record (a request reaching a busy worker) is passed on as it is.
  const waiting = request(`${url(2)}/wait?ms=500`)
  await untilBusy(ports[0], 'the first request to start')
  await Promise.all([waiting, request(`${url(2)}/`)])
  const queued = await pool.waitLog((l) => l.event === 'request-queued')
  t.match(queued, { level: 40, slot: 2, pid: pid2, port: ports[1], waiting: 1 },
    'the runtime\'s record, with its own fields')
  t.notOk(appLogs(pool, (l) => l.msg.includes('request-queued')).length, 'not wrapped as app output')

  // A worker printing all the time still answers promptly.
  await request(`${url(1)}/flood?ms=2000&tag=F`)
  const latencies = []
  for (let i = 0; i < 10; i++) {
    const started = Date.now()
    const r = await request(`${url(1)}/`, { timeout: 3000 })
    latencies.push(Date.now() - started)
    t.equal(r.status, 200, `request ${i} answered while flooding`)
    await sleep(150) // the requests spread over the flood
  }
  const done = await pool.waitLog((l) => l.event === 'app-log' && l.msg.startsWith('F done '), 20000)
  const flooded = Number(done.msg.split(' ')[2])
  checkSeries(t, pool, { tag: 'F', n: flooded, pid: pid1, slot: 1 })
  t.ok(flooded > 1000, `${flooded} lines flooded meanwhile; slowest request ${Math.max(...latencies)} ms`)

  // A last line without newline, then the process exits: the line comes before its exit line.
  await request(`${url(2)}/partial?tag=P-tail`).catch(() => {})
  const exit = await pool.waitLog((l) => l.event === 'exit' && l.pid === pid2)
  const tail = pool.logs.findIndex((l) => l.event === 'app-log' && l.msg === 'P-tail' && l.pid === pid2)
  t.ok(tail !== -1 && tail < pool.logs.indexOf(exit),
    'the unterminated last line is logged, before the worker\'s exit line')
  const pid2b = await nextReady2()

  // Lines printed right before an exit, with the pipe full: whatever arrives comes before the
  // exit line. (What is still queued inside the worker when the app calls process.exit() is
  // lost: Node drops it.)
  await request(`${url(2)}/burst-exit?n=20000&tag=E`).catch(() => {})
  const exitE = await pool.waitLog((l) => l.event === 'exit' && l.pid === pid2b)
  const lastE = pool.logs.findLastIndex((l) => l.event === 'app-log' && l.pid === pid2b && l.msg.startsWith('E '))
  t.ok(lastE !== -1 && lastE < pool.logs.indexOf(exitE),
    'the exit line after the last line read ' +
      `(${pool.logs.filter((l) => l.pid === pid2b && l.msg.startsWith('E ')).length} of 20000 arrived)`)
  const pid2c = await nextReady2()

  // A process the app started holds the worker's stdout past its exit: the exit is told all the
  // same, and the helper's lines, tagged with the worker's slot and pid, stop when it is killed.
  await request(`${url(2)}/leave-printer`)
  const exitC = await pool.waitLog((l) => l.event === 'exit' && l.pid === pid2c)
  t.equal(exitC.code, 5, 'the worker\'s exit is told while its helper still holds the pipe')
  await pool.waitLog((l) => l.event === 'leftovers-killed', 5000)
  await sleep(300) // the lines on their way when the helper was killed come in
  const printed = appLogs(pool, (l) => l.msg.startsWith('printer '))
  t.ok(printed.length > 0 && printed.every((l) => l.pid === pid2c && l.slot === 2),
    `the helper's ${printed.length} lines tagged with the worker's slot and pid`)
  t.ok(printed.some((l) => pool.logs.indexOf(l) > pool.logs.indexOf(exitC)), 'some of them after the exit line')
  const count = printed.length
  await sleep(300) // no line may come meanwhile
  t.equal(appLogs(pool, (l) => l.msg.startsWith('printer ')).length, count, 'none once the helper is killed')
  await nextReady2()

  // A graceful stop right after a burst: the stopping worker's lines are all out before `stopped`.
  await request(`${url(1)}/burst?n=20000&tag=Z`)
  pool.kill('SIGTERM')
  t.equal((await pool.exited).code, 0, 'a clean stop')
  checkSeries(t, pool, { tag: 'Z', n: 20000, pid: pid1, slot: 1 })
  const stopped = pool.logs.findIndex((l) => l.event === 'stopped')
  t.ok(stopped > pool.logs.findIndex((l) => l.msg === 'Z 19999'), 'all of them before the pool\'s stopped line')

  const lines = pool.stdoutText.split('\n')
  t.equal(lines.pop(), '', 'stdout ends with a whole line')
  const notJson = lines.filter((line) => { try { return typeof JSON.parse(line) !== 'object' } catch { return true } })
  t.same(notJson.slice(0, 3), [], `all ${lines.length} lines of the pool's stdout are JSON records`)
  t.equal(pool.stderrText, '', 'nothing of the app\'s on the pool\'s stderr')
})

t.test('a real pool (pretty): app lines prefixed with slot and pid, the access log on one line', async (t) => {
  const ports = await freePorts(2)
  // K=1 given: a second request sent straight to the busy worker must wait in its guard (the
  // request-queued record), which the embedded balancer's default K (4) would let run.
  const pool = startPool(['start', APP, '-n', '1', '--port', String(ports[0]), '--worker-port', String(ports[1]),
    '--log-format', 'pretty', '--worker-concurrency', '1'])
  t.teardown(() => pool.stop('SIGKILL'))
  const text = () => pool.stdoutText
  await waitFor(() => text().includes('1/1 workers ready'), { what: 'the pool ready', timeout: 15000 })
  const pid = Number(/INFO \((\d+)\): worker 1 ready/.exec(text())[1])
  await request(`http://127.0.0.1:${ports[0]}/burst?n=3&tag=PRETTY`)
  await request(`http://127.0.0.1:${ports[0]}/`)
  // A request straight to the busy worker: the runtime's own record, rendered, not wrapped.
  const waiting = request(`http://127.0.0.1:${ports[1]}/wait?ms=400`)
  await untilBusy(ports[0], 'the first request to start')
  await Promise.all([waiting, request(`http://127.0.0.1:${ports[1]}/`)])
  await waitFor(() => text().includes('a request found every render place taken'),
    { what: 'the request-queued record' })
  const lines = text().split('\n')
  const stamp = String.raw`^\[\d\d:\d\d:\d\d\.\d{3}\] `
  t.ok(lines.some((l) => new RegExp(`${stamp}INFO: \\[slot 1 pid ${pid}\\] hello from slot 1: é ✓ 😀$`).test(l)),
    'the app\'s line at load, prefixed')
  for (let i = 0; i < 3; i++) {
    t.ok(lines.some((l) => new RegExp(`${stamp}INFO: \\[slot 1 pid ${pid}\\] PRETTY ${i}$`).test(l)),
      `line PRETTY ${i}, prefixed`)
  }
  t.ok(lines.some((l) => new RegExp(`${stamp}WARN: \\[slot 1 pid ${pid} stderr\\] PRETTY err 0$`).test(l)),
    'the stderr line, at WARN, marked')
  const at = lines.findIndex((l) => l.includes('INFO: GET /burst?n=3&tag=PRETTY 200 '))
  t.ok(at !== -1, 'the access log line')
  t.match(lines[at], /id=\S+ .*worker=worker1/, 'with its fields on the same line')
  t.match(lines[at + 1], new RegExp(stamp),
    'the next line is the next record: the access log record is exactly one line')
  const queued = lines.findIndex((l) => l.includes('a request found every render place taken'))
  t.match(lines[queued], new RegExp(`WARN \\(${pid}\\): a request found every render place taken`),
    'the runtime\'s record rendered like the pool\'s')
  t.notOk(lines.some((l) => l.includes('"request-queued"') && l.includes('[slot')), 'not wrapped as app output')
})
