'use strict'
// Bad input: one clear line on stderr and a non-zero exit (2 for usage), before anything starts.
const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { canBind, FIXTURES, freePorts, runPool, startPool, poolStatus, tempDir, parseJsonLines } = require('../helpers')

const app = path.join(FIXTURES, 'handler.js')

// Exactly one line, and no help text or stack trace in it.
function oneLine (t, stderr) {
  t.equal(stderr.split('\n').length, 2, `one line on stderr: ${JSON.stringify(stderr)}`)
  t.notMatch(stderr, /Options:|\n\s+at /, 'no help text, no stack')
}

t.test('missing app', async (t) => {
  const r = await runPool(['start', 'no/such/app.js', '--balancer', 'none'])
  t.equal(r.code, 2)
  t.match(r.stderr, /^pool: cannot find app 'no\/such\/app\.js' \(looked for .*no\/such\/app\.js\)\n$/)
})

t.test('no app at all', async (t) => {
  const r = await runPool(['start', '--balancer', 'none'])
  t.equal(r.code, 2)
  t.equal(r.stderr, 'pool: give the app to start: pool start APP, or "app" in a --config file\n')
})

t.test('a worker port already taken names the port and the slot', async (t) => {
  const ports = await freePorts(3)
  const blocker = net.createServer().listen(ports[1], '127.0.0.1')
  await new Promise((resolve) => blocker.once('listening', resolve))
  t.teardown(() => blocker.close())
  const r = await runPool(['start', app, '-n', '3', '--worker-port', String(ports[0]), '--balancer', 'none'])
  t.equal(r.code, 2)
  t.equal(r.stderr, `pool: port ${ports[1]} (slot 2) is already in use on 127.0.0.1\n`)
})

for (const bad of ['0', '-1', 'abc', '2.5']) {
  t.test(`-n ${bad}`, async (t) => {
    const r = await runPool(['start', app, '-n', bad, '--balancer', 'none'])
    t.equal(r.code, 2)
    t.match(r.stderr,
      /pool: .*(workers|-n|--workers).* must be a positive integer|pool: --workers must be a positive integer/)
  })
}

t.test('an unknown option: one line naming it and the nearest real one, not the help', async (t) => {
  const r = await runPool(['start', app, '--wrker-port', '9100'])
  t.equal(r.code, 2)
  t.equal(r.stderr, 'pool: unknown option --wrker-port (did you mean --worker-port?); see `pool start --help`\n')
  const far = await runPool(['start', app, '--bogus-flag', '1'])
  t.equal(far.code, 2)
  t.equal(far.stderr, 'pool: unknown option --bogus-flag; see `pool start --help`\n')
})

t.test('a removed option: refused with what became of it, wherever it is set', async (t) => {
  const said = /^pool: (--overload-target|POOL_OVERLOAD_TARGET|.*overloadTarget) was removed: .*--overload-max-wait .*\n$/
  const flag = await runPool(['start', app, '--overload-target', '1s'])
  t.equal(flag.code, 2)
  t.match(flag.stderr, said, 'as a flag: not "unknown option", which reads as a typo')
  t.notMatch(flag.stderr, /unknown option/)
  const env = await runPool(['start', app], { env: { POOL_OVERLOAD_TARGET: '1s' } })
  t.equal(env.code, 2)
  t.match(env.stderr, said, 'as a POOL_* variable: refused, not ignored')
  const dir = tempDir(t, 'pool-removed-')
  const file = path.join(dir, 'pool.json')
  fs.writeFileSync(file, JSON.stringify({ overloadTarget: 100 }))
  const config = await runPool(['start', app, '--config', file])
  t.equal(config.code, 2)
  t.match(config.stderr, said, 'as a key of the --config file')
  const { Pool } = require('../..')
  t.throws(() => new Pool({ app, overloadTarget: 100 }),
    { code: 'POOL_E_BAD_OPTION', message: /^overloadTarget was removed: .*overloadMaxWait/ }, 'as a library option')
})

t.test('a bad choice: one line with the choices, not the help', async (t) => {
  const r = await runPool(['start', app, '--balancer', 'nginx'])
  t.equal(r.code, 2)
  t.equal(r.stderr, "pool: --balancer must be one of embedded, haproxy, none (got 'nginx'); see `pool start --help`\n")
})

t.test('a flag with no value: one line, exit 2, no stack', async (t) => {
  const r = await runPool(['start', app, '--balancer', 'none', '--timeout'])
  t.equal(r.code, 2)
  t.equal(r.stderr, 'pool: --timeout needs a value; see `pool start --help`\n')
})

t.test('usage errors of the other commands point at their own help', async (t) => {
  const scale = await runPool(['scale'])
  t.equal(scale.code, 2)
  t.equal(scale.stderr, 'pool: missing <count>: pool scale <count>; see `pool scale --help`\n')
  const config = await runPool(['config', 'haproxy', '--sockt', '/x'])
  t.equal(config.code, 2)
  t.equal(config.stderr, 'pool: unknown option --sockt (did you mean --socket?); see `pool config haproxy --help`\n')
  const typo = await runPool(['strat', app])
  t.equal(typo.code, 2)
  t.equal(typo.stderr, "pool: unknown command 'strat' (did you mean start?); see `pool --help`\n")
})

t.test('a bad duration', async (t) => {
  const r = await runPool(['start', app, '--timeout', 'soon', '--balancer', 'none'])
  t.equal(r.code, 2)
  t.equal(r.stderr, "pool: --timeout must be a duration like 30, 2.5s or 500ms (got 'soon')\n")
})

t.test('no command', async (t) => {
  const r = await runPool([])
  t.equal(r.code, 2)
  t.match(r.stderr, /pool: give a command/)
  oneLine(t, r.stderr)
})

t.test('worker ports past 65535 are refused up front, not by a RangeError', async (t) => {
  const r = await runPool(['start', app, '--worker-port', '65535', '-n', '2', '--balancer', 'none'])
  t.equal(r.code, 2)
  t.equal(r.stderr,
    'pool: workerPort (--worker-port) 65535 with 2 workers needs ports up to 65536, past 65535: ' +
      'lower --worker-port or the number of workers\n')
  t.equal(r.stdout, '', 'nothing started: not even a log line')
  // -n 100000 fails the same way at once, before any port is probed.
  const many = await runPool(['start', app, '-n', '100000', '--balancer', 'none'])
  t.equal(many.code, 2)
  t.match(many.stderr,
    /^pool: workerPort \(--worker-port\) 9002 with 100000 workers needs ports up to 109001, past 65535/)
  t.equal(many.stdout, '')
  const spare = await runPool(['start', app, '--worker-port', '65530', '-n', '2', '--max-workers', '10', '--balancer',
    'none'])
  t.equal(spare.code, 2)
  t.match(spare.stderr, /^pool: workerPort \(--worker-port\) 65530 with --max-workers 10 needs ports up to 65539/)
})

t.test('worker ports in the kernel\'s ephemeral range are refused up front, saying why and what to do; ' +
  'a scale into it too', async (t) => {
  const { ephemeralRange } = require('../../lib/net/ports')
  const range = ephemeralRange()
  if (!range) return t.skip('no /proc/sys/net/ipv4/ip_local_port_range here')
  const r = await runPool(['start', app, '--worker-port', String(range.low + 100), '-n', '2', '--balancer', 'none'])
  t.equal(r.code, 2)
  oneLine(t, r.stderr)
  t.match(r.stderr,
    new RegExp(`^pool: worker ports ${range.low + 100}-${range.low + 101} are in the kernel's ephemeral range ` +
      `${range.low}-${range.high} \\(net\\.ipv4\\.ip_local_port_range\\).*choose a --worker-port below ` +
      `${range.low}.*ip_local_reserved_ports=${range.low + 100}-${range.low + 101}\\)\n$`))
  t.equal(r.stdout, '', 'nothing started')
  const { Pool } = require('../..')
  t.throws(() => new Pool({ app, workers: 1, workerPort: range.high }),
    { code: 'POOL_E_BAD_OPTION', message: /ephemeral range/ }, 'the library refuses it too')
  if (!(await canBind(range.low - 1))) return t.skip(`port ${range.low - 1} is taken: the scale's case needs it`)
  const pool = new Pool({
    app,
    workers: 1,
    workerPort: range.low - 1,
    logger: require('pino')({ level: 'silent' }),
    balancer: 'none'
  })
  t.teardown(() => pool.kill())
  await pool.start()
  await t.rejects(pool.scale(3),
    {
      code: 'POOL_E_BAD_OPTION',
      message: new RegExp(`worker ports ${range.low}-${range.low + 1} are in the kernel's ephemeral range`)
    }, 'a scale whose new slots would be there is refused')
})

t.test('-n above the ceiling is refused before anything starts: the default one, and --max-workers', async (t) => {
  const r = await runPool(['start', app, '-n', '1000', '--balancer', 'none'])
  t.equal(r.code, 2)
  oneLine(t, r.stderr)
  t.match(r.stderr,
    /^pool: workers \(-n\) 1000 is above the default ceiling of \d+ \(min\(8 × \d+ CPUs, \d+ MB free ÷ 128 MB\)\): lower -n, or raise --max-workers \(0: no ceiling\)\n$/)
  t.equal(r.stdout, '', 'nothing started: not even a log line')
  const ports = await freePorts(3)
  const explicit = await runPool(['start', app, '-n', '3', '--max-workers', '2', '--worker-port', String(ports[0]),
    '--balancer', 'none'])
  t.equal(explicit.code, 2)
  t.equal(explicit.stderr,
    'pool: workers (-n) 3 is above --max-workers 2: lower -n, or raise --max-workers (0: no ceiling)\n')
  t.equal(explicit.stdout, '')
})

t.test('the balancer\'s --port inside the workers\' ports is refused up front', async (t) => {
  const ports = await freePorts(3)
  const r = await runPool(['start', app, '-n', '3', '--worker-port', String(ports[0]), '--port', String(ports[1])])
  t.equal(r.code, 2)
  t.equal(r.stderr, `pool: port (--port) ${ports[1]} is one of the workers' ports (${ports[0]}-${ports[2]})\n`)
  t.equal(r.stdout, '', 'nothing started')
})

t.test('pool scale onto a port in use fails, says which, and the pool stays as it was', async (t) => {
  const ports = await freePorts(3)
  const pool = startPool(['start', app, '-n', '2', '--worker-port', String(ports[0]), '--balancer', 'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  const blocker = net.createServer().listen(ports[2], '127.0.0.1')
  await new Promise((resolve) => blocker.once('listening', resolve))
  t.teardown(() => blocker.close())
  const r = await runPool(['scale', '3', '--port', String(ports[0])])
  t.equal(r.code, 2, 'exit 2: the port is the operator\'s to free')
  t.equal(r.stdout, '', 'no "scaled" answer')
  t.equal(r.stderr, `pool: port ${ports[2]} (slot 3) is already in use on 127.0.0.1\n`)
  const status = await poolStatus(['--port', String(ports[0])])
  t.equal(status.target, 2, 'still 2 workers wanted')
  t.equal(status.workers.length, 2, 'and no slot 3 given up')
})

// A module that is no app fails its boot at once with what it exported, instead of waiting for
// a listen() that cannot come until --boot-timeout, --max-boot-failures times over.
for (const [name, source, exported] of [
  ['exports a number', 'module.exports = 42\n', 'the number 42'],
  ['is empty', '', 'an empty object \\(nothing was assigned to module.exports\\)']
]) {
  t.test(`an app file that ${name} fails at once, in one line`, async (t) => {
    const dir = t.testdir({ 'app.js': source })
    const [port] = await freePorts(1)
    const r = await runPool(['start', path.join(dir, 'app.js'), '-n', '1', '--worker-port', String(port), '--balancer',
      'none', '--max-boot-failures', '2', '--restart-delay', '50ms'], { timeout: 20000 })
    t.equal(r.code, 1, 'exit 1: the app could not boot')
    oneLine(t, r.stderr)
    t.match(r.stderr,
      new RegExp('^pool: ' +
        'the app failed to boot in every slot ' +
        `\\(1 gave up\\): the app exported ${exported} and did not call listen\\(\\): export a request listener`))
    const logs = parseJsonLines(r.stdout)
    t.equal(logs.filter((l) => l.event === 'boot-timeout').length, 0, 'no boot waited for its timeout')
    t.match(logs.find((l) => l.event === 'give-up'), { slot: 1, failures: 2 },
      'two quick failed boots, then the slot gave up')
  })
}

t.test('an app that loads pool may still call listen() later: it is waited for', async (t) => {
  // calls-listen.js exports nothing and calls listen() after 50 ms.
  const [port] = await freePorts(1)
  const pool = startPool(['start', path.join(FIXTURES, 'calls-listen.js'), '-n', '1', '--worker-port', String(port),
    '--balancer', 'none'])
  t.teardown(() => pool.stop('SIGKILL'))
  await pool.waitLog((l) => l.event === 'started')
  t.notOk(pool.logs.some((l) => l.event === 'boot-error'), 'no boot error')
})

t.test('--help: numbers shown as numbers, examples whole on their line, ' +
  'the production guide\'s socket path', async (t) => {
  const r = await runPool(['start', '--help'])
  t.equal(r.code, 0)
  t.match(r.stdout, /--worker-port [^\n]*(\n {20,}[^\n]*)*\[number\] \[default: 9002\]/,
    'a number, its default shown as one')
  t.notMatch(r.stdout, /--workers[^\n]*\n[^\n]*\[string\]/, '-n is not a string')
  const examples = r.stdout.split('Examples:\n')[1]
  const example = '  pool start app.js --balancer haproxy --haproxy-socket /run/pool/haproxy-admin.sock\n'
  t.ok(examples.includes(example), 'the HAProxy example is one line')
  const guide = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'guide', 'production.md'), 'utf8')
  t.ok(guide.includes('--haproxy-socket /run/pool/haproxy-admin.sock'),
    'with the socket path the production guide uses')
})
