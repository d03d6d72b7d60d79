'use strict'
// `pool start --config FILE`, POOL_* variables and flags: flags win over the environment, which
// wins over the file, which wins over the defaults; `pool config TARGET --config FILE` reads the
// same file. Every error in the file is one line naming it, exit 2, before anything starts.
const t = require('tap')
const path = require('node:path')
const { freePorts, startPool, runPool, request } = require('../helpers')

// An app that answers with the POOL_* variables its worker sees.
const ENV_APP = 'module.exports = (req, ' +
  'res) => res.end(JSON.stringify(Object.fromEntries(Object.entries(process.env).filter(([k]) => ' +
  'k.startsWith(\'POOL_\')))))\n'

t.test('precedence: flags over POOL_* variables over the file over the defaults', async (t) => {
  const ports = await freePorts(3)
  const dir = t.testdir({
    'app.js': ENV_APP,
    'pool.config.json': JSON.stringify({
      app: 'app.js',
      balancer: 'none',
      workers: 3,
      workerPort: ports[0],
      logLevel: 'warn'
    })
  })
  // Run from elsewhere: the file's `app` is relative to the file, not to the current directory.
  const pool = startPool(['start', '--config', path.join(dir, 'pool.config.json'), '--log-level', 'info'], {
    env: { POOL_WORKERS: '2', POOL_LOG_LEVEL: 'error', POOL_MAX_REQUESTS: '0' }
  })
  t.teardown(() => pool.stop('SIGKILL'))
  const starting = await pool.waitLog((l) => l.event === 'starting')
  t.pass('an info line: --log-level info won over POOL_LOG_LEVEL=error and the file\'s warn')
  t.equal(starting.workers, 2, 'POOL_WORKERS=2 won over the file\'s 3')
  t.equal(starting.ports, `${ports[0]}-${ports[1]}`, 'the file\'s workerPort won over the default 9002')
  t.equal(starting.app, path.join(dir, 'app.js'), 'the app, relative to the file\'s directory')
  await pool.waitLog((l) => l.event === 'started')
  const seen = JSON.parse((await request(`http://127.0.0.1:${ports[0]}/`)).body)
  t.equal(seen.POOL_WORKERS, '2', 'a worker is told the number of workers')
  t.equal(seen.POOL_MAX_REQUESTS, undefined, 'the pool\'s own POOL_* settings are not passed on to the workers')
})

t.test('a .js config file, a flag over it, and POOL_BALANCER over its balancer', async (t) => {
  const ports = await freePorts(2)
  const dir = t.testdir({
    'app.js': ENV_APP,
    // The file is for HAProxy; the environment says none: HAProxy's keys then do not apply.
    'pool.config.js': 'module.exports = { app: ' +
      `'app.js', balancer: 'haproxy', haproxySocket: '/nonexistent/admin.sock', workers: 2, workerPort: ${ports[0]} }\n`
  })
  const pool = startPool(['start', '--config', 'pool.config.js', '-n', '1'],
    { cwd: dir, env: { POOL_BALANCER: 'none' } })
  t.teardown(() => pool.stop('SIGKILL'))
  const starting = await pool.waitLog((l) => l.event === 'starting')
  t.equal(starting.workers, 1, '-n 1 over the file\'s 2')
  t.equal(starting.ports, `${ports[0]}-${ports[0]}`)
  await pool.waitLog((l) => l.event === 'started')
})

// `--max-body 1mb` was refused ("must be a whole number"): sizes take units as nginx writes them,
// wherever options are given. A body of 1 KiB passes a limit of 1k; one byte more gets 413.
t.test('sizes with units: --max-body 1k as a flag, POOL_MAX_BODY=1k, "maxBody": "1k" in the file', async (t) => {
  const dir = t.testdir({
    'app.js': ENV_APP,
    'pool.config.json': JSON.stringify({ maxBody: '1k', maxResponseBuffer: '512k', bodyBudget: '256m' })
  })
  const sources = {
    flag: { args: ['--max-body', '1k', '--max-response-buffer', '512k', '--body-budget', '256m'], env: {} },
    environment: { args: [], env: { POOL_MAX_BODY: '1k', POOL_MAX_RESPONSE_BUFFER: '512k', POOL_BODY_BUDGET: '256m' } },
    'config file': { args: ['--config', path.join(dir, 'pool.config.json')], env: {} }
  }
  for (const [source, { args, env }] of Object.entries(sources)) {
    const ports = await freePorts(2)
    const pool = startPool(['start', path.join(dir, 'app.js'), '-n', '1', '--port', String(ports[0]), '--worker-port',
      String(ports[1]), ...args], { env })
    t.teardown(() => pool.stop('SIGKILL'))
    await pool.waitLog((l) => l.event === 'started')
    const post = (bytes) => request(`http://127.0.0.1:${ports[0]}/`,
      { method: 'POST', headers: { 'content-length': bytes }, body: Buffer.alloc(bytes, 'x') })
    t.equal((await post(1024)).status, 200, `${source}: a body of 1024 bytes is served`)
    t.equal((await post(1025)).status, 413, `${source}: 1025 bytes are too large`)
    await pool.stop()
  }
  const bad = await runPool(['start', 'app.js', '--max-body', 'lots'], { cwd: dir })
  t.equal(bad.code, 2)
  t.equal(bad.stderr, "pool: --max-body must be a size like 1048576, 512k, 8m or 1g (got 'lots')\n")
})

// Each: file name, its text, the one line expected on stderr.
const BAD_FILES = [
  ['typo.json', '{ "workers": 2, "wokers": 3 }',
    "typo.json: unknown key wokers (did you mean workers?); the keys are the library's option names, " +
      'as in new Pool(), plus app and balancer'],
  ['syntax.json', '{\n  "workers": 2,\n  "app": "x.js",\n}\n', 'syntax.json: invalid JSON at line 4, column 1:'],
  ['syntax.js', 'module.exports = {\n  workers: 2\n  app: "x.js"\n}\n', 'syntax.js:3: SyntaxError: '],
  ['throws.js', 'throw new Error("no config for you")\n', 'throws.js: loading it threw: no config for you'],
  ['array.js', 'module.exports = [1, 2]\n',
    'array.js: must export an object of options, like { "workers": 4 } (got an array)'],
  ['seconds.json', '{ "timeout": "30s" }',
    'seconds.json: timeout is a number of milliseconds in a config file, as in the library (got "30s")'],
  ['size.json', '{ "maxBody": "1 tb" }',
    'size.json: maxBody must be a number of bytes, or a size like "512k", "8m" or "1g" (got "1 tb")'],
  ['port.json', '{ "workerPort": 70000 }',
    'port.json: workerPort (--worker-port) must be a port number 1-65535 (got 70000)'],
  ['front.json', '{ "haproxySocket": "/run/pool/haproxy-admin.sock" }',
    "front.json: haproxySocket is an option of balancer haproxy, and this file's balancer is embedded (the default)"],
  ['balancer.json', '{ "balancer": "nginx" }',
    'balancer.json: balancer must be one of embedded, haproxy, none (got "nginx")'],
  ['pool.yaml', 'workers: 2\n',
    'pool.yaml: a config file is .json, or .js/.cjs (a CommonJS module exporting an object)']
]

t.test('an error in the file: one line naming the file, exit 2, nothing started', async (t) => {
  const dir = t.testdir(Object.fromEntries(BAD_FILES.map(([name, text]) => [name, text])))
  for (const [name, , line] of BAD_FILES) {
    const r = await runPool(['start', 'app.js', '--config', name, '--balancer', 'none'], { cwd: dir })
    t.equal(r.code, 2, `${name}: exit 2`)
    t.ok(r.stderr.startsWith(`pool: ${line}`) && r.stderr.split('\n').length === 2,
      `${name}: ${JSON.stringify(r.stderr)}`)
    t.equal(r.stdout, '', `${name}: nothing started, not even a log line`)
  }
  const missing = await runPool(['start', '--config', 'none.json'], { cwd: dir })
  t.equal(missing.code, 2)
  t.equal(missing.stderr, `pool: none.json: no such file (looked for ${path.join(dir, 'none.json')})\n`)
  const config = await runPool(['config', 'haproxy', '--config', 'typo.json'], { cwd: dir })
  t.equal(config.code, 2, 'pool config refuses the same file')
  t.match(config.stderr, /^pool: typo\.json: unknown key wokers \(did you mean workers\?\)/)
})

t.test('a bad POOL_* variable: one line naming it, exit 2', async (t) => {
  const workers = await runPool(['start', 'app.js', '--balancer', 'none'], { env: { POOL_WORKERS: 'many' } })
  t.equal(workers.code, 2)
  t.equal(workers.stderr, "pool: POOL_WORKERS must be a positive integer (got 'many')\n")
  const timeout = await runPool(['start', 'app.js', '--balancer', 'none'], { env: { POOL_TIMEOUT: 'soon' } })
  t.equal(timeout.stderr, "pool: POOL_TIMEOUT must be a duration like 30, 2.5s or 500ms (got 'soon')\n")
  const balancer = await runPool(['start', 'app.js'], { env: { POOL_BALANCER: 'nginx' } })
  t.equal(balancer.code, 2)
  t.equal(balancer.stderr, "pool: POOL_BALANCER must be one of embedded, haproxy, none (got 'nginx')\n")
  const flag = await runPool(['start', 'app.js'], { env: { POOL_ACCESS_LOG: 'maybe' } })
  t.equal(flag.stderr, "pool: POOL_ACCESS_LOG must be true or false (got 'maybe')\n", 'the chosen front\'s options too')
  const other = await runPool(['start', 'no-such-app.js', '--balancer', 'none'], { env: { POOL_ACCESS_LOG: 'maybe' } })
  t.match(other.stderr, /^pool: cannot find app 'no-such-app\.js'/, 'another front\'s variable is not read')
})

t.test('pool config TARGET --config FILE takes what corresponds; its own flags win', async (t) => {
  const config = {
    app: 'app.js',
    balancer: 'haproxy',
    workers: 3,
    workerPort: 7100,
    timeout: 20000,
    gracefulTimeout: 40000,
    agentPort: 9100,
    haproxySocket: '/run/ssr-haproxy/admin.sock',
    haproxyBackend: 'ssr',
    haproxyStateFile: '/var/lib/ssr/haproxy.state'
  }
  const dir = t.testdir({ 'pool.config.js': `module.exports = ${JSON.stringify(config)}\n` })
  const file = path.join(dir, 'pool.config.js')
  const run = async (args) => {
    const r = await runPool(['config', ...args, '--config', 'pool.config.js'], { cwd: dir })
    t.equal(r.code, 0, `pool config ${args.join(' ')}: ${r.stderr}`)
    return r.stdout
  }

  const haproxy = await run(['haproxy'])
  t.match(haproxy, /server worker1 127\.0\.0\.1:7100\b/)
  t.match(haproxy, /server worker3 127\.0\.0\.1:7102\b/)
  t.notMatch(haproxy, /server worker4 /, 'workers: 3')
  t.match(haproxy, /stats socket \/run\/ssr-haproxy\/admin\.sock /, 'haproxySocket is its stats socket')
  t.match(haproxy, /^backend ssr$/m, 'haproxyBackend is its backend')
  t.match(haproxy, /timeout server 90s/,
    'timeout 20 s: server timeout the longer of it and --read-timeout (60 s) + 30 s')
  t.match(haproxy, /server-state-file \/var\/lib\/ssr\/haproxy\.state/, 'haproxyStateFile')
  t.match(await run(['haproxy', '-n', '4']), /server worker4 127\.0\.0\.1:7103\b/, 'a flag wins over the file')

  t.match(await run(['nginx']), /proxy_read_timeout 110s;/, 'nginx waits queue 10 s + server (60 s + 30 s) + 10 s')

  const edge = await run(['edge', '--hosts', '10.0.0.11:9001,10.0.0.12:9001'])
  t.match(edge, /default-server maxconn 3 .*agent-port 9100\b/, 'each host\'s workers and agent port')

  const unit = await run(['systemd', '--name', 'ssr'])
  t.match(unit, new RegExp(`ExecStart=\\S+ \\S+ start ${path.join(dir, 'app.js').replace(/[.]/g, '\\.')} `),
    'the file\'s app, made absolute')
  t.ok(unit.includes(`--config ${file}`), 'the unit\'s pool reads the same file')
  t.match(unit, /--graceful-timeout 40s/)
  t.match(unit, /TimeoutStopSec=62\b/, 'its stop timeout above the file\'s graceful timeout (40 + 2 x 5 + 2 + 10)')
  t.match(unit, /After=network\.target haproxy\.service/, 'after HAProxy: the file says balancer haproxy')
})
