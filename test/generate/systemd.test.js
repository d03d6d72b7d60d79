'use strict'
// `pool config systemd` (lib/generate/systemd.js): the unit's text, systemd's own verdict on it
// (`systemd-analyze verify`, where installed), and its ExecStart/ExecReload run for real.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { systemdConfig, systemdSocketConfig, OPTIONS } = require('../../lib/generate/systemd')
const { OPTIONS: POOL_OPTIONS } = require('../../lib/options/table')
const { toYargs } = require('../../lib/cli/flags')
const { FIXTURES, ROOT, cleanEnv, freePorts, request, waitFor, isAlive, tempDir } = require('../helpers')

const HAPROXY_ARGS = '-n 15 --balancer haproxy --haproxy-socket /run/pool/haproxy-admin.sock --haproxy-backend pool'

// { section: { key: [values] } }, continuation lines joined, comments dropped.
function parseUnit (text) {
  const out = {}
  let section = null
  for (const line of text.replace(/\s*\\\n\s*/g, ' ').split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const header = /^\[(.+)\]$/.exec(line)
    if (header) { section = out[header[1]] = {}; continue }
    const eq = line.indexOf('=')
    const key = line.slice(0, eq)
    ;(section[key] = section[key] || []).push(line.slice(eq + 1))
  }
  return out
}

const words = (command) => command.split(' ')

t.test('the unit: sections, keys and the commands systemd runs', async (t) => {
  const text = systemdConfig({
    app: 'app.js',
    name: 'ssr',
    user: 'ssr',
    group: 'www',
    workingDirectory: '/srv/ssr',
    args: HAPROXY_ARGS
  })
  const unit = parseUnit(text)
  t.same(Object.keys(unit), ['Unit', 'Service', 'Install'])
  const s = unit.Service
  t.same(s.Type, ['notify'], 'READY=1 once the workers are ready')
  t.same(s.NotifyAccess, ['all'], 'systemd-notify sends as a process of its own')
  t.same(s.User, ['ssr'])
  t.same(s.Group, ['www'])
  t.same(s.WorkingDirectory, ['/srv/ssr'])
  t.same(s.Environment, ['NODE_ENV=production'])
  t.same(s.KillMode, ['mixed'],
    'SIGTERM to the pool only; SIGKILL to what is left once it exited, or at TimeoutStopSec')
  t.same(s.KillSignal, ['SIGTERM'])
  t.same(s.Restart, ['on-failure'])
  t.same(s.RuntimeDirectory, ['ssr'])
  t.same(s.RuntimeDirectoryMode, ['0700'])
  t.notOk('TimeoutReloadSec' in s, 'no key systemd does not know')
  t.same(words(s.ExecStart[0]),
    [process.execPath, path.join(ROOT, 'bin', 'pool.js'), 'start', 'app.js', '--control', '/run/ssr/pool.sock',
      ...HAPROXY_ARGS.split(' ')])
  t.same(words(s.ExecReload[0]),
    [process.execPath, path.join(ROOT, 'bin', 'pool.js'), 'reload', '--control', '/run/ssr/pool.sock'])
  t.ok(fs.existsSync(words(s.ExecStart[0])[1]), 'the default pool binary exists')
  t.same(s.TimeoutStartSec, ['16min'], 'the reload bound, above pool reload\'s own 15 min')
  const stop = Number(s.TimeoutStopSec[0])
  const poolStop = (POOL_OPTIONS.gracefulTimeout.default + 2 * POOL_OPTIONS.killTimeout.default + 2000) / 1000
  t.ok(stop > poolStop, `TimeoutStopSec ${stop} is above the pool's longest stop (${poolStop} s)`)
  t.same(unit.Unit.After, ['network.target haproxy.service'], 'after HAProxy when the pool drives it')
  t.same(unit.Unit.Wants, ['haproxy.service'])
  t.same(unit.Install.WantedBy, ['multi-user.target'])
  t.match(text, /^# \/etc\/systemd\/system\/ssr\.service/, 'says where it goes')
})

t.test('defaults: no user lines, no HAProxy, the current directory, timeouts that follow the flags', async (t) => {
  const plain = parseUnit(systemdConfig({ app: 'server.js' }))
  t.notOk('User' in plain.Service)
  t.notOk('Group' in plain.Service)
  t.notOk('Wants' in plain.Unit)
  t.same(plain.Unit.After, ['network.target'])
  t.same(plain.Service.WorkingDirectory, [process.cwd()])
  t.same(plain.Service.RuntimeDirectory, ['pool-app'])
  t.notMatch(plain.Service.ExecStart[0], /--graceful-timeout|--kill-timeout/, 'the pool\'s defaults are not repeated')

  const slow = parseUnit(systemdConfig({
    app: 'server.js',
    gracefulTimeout: 120000,
    killTimeout: 10000,
    args: ['--balancer=haproxy']
  }))
  t.match(slow.Service.ExecStart[0], / --graceful-timeout 120s --kill-timeout 10s /,
    'non-default timeouts reach pool start')
  t.equal(Number(slow.Service.TimeoutStopSec[0]), 120 + 2 * 10 + 2 + 10, 'and TimeoutStopSec follows them')
  t.same(slow.Unit.Wants, ['haproxy.service'], '--balancer=haproxy is seen too')
})

t.test('refused: what systemd would misread, and flags the unit owns', async (t) => {
  const refused = [
    [{}, /--app is required/],
    [{ app: 'my app.js' }, /--app must not contain spaces/],
    [{ app: 'app.js', args: '--haproxy-socket /run/$USER/s' }, /each word of --args must not contain .*'\$'/],
    [{ app: 'app.js', args: '--foo 100%' }, /'%'/],
    [{ app: 'app.js', args: '-n 2 ; rm' }, /';'/],
    [{ app: 'app.js', args: '--control /tmp/x.sock' },
      /--args must not contain --control: the unit sets it; give --name/],
    [{ app: 'app.js', args: '--graceful-timeout=60' }, /--args must not contain --graceful-timeout/],
    [{ app: 'app.js', name: 'pool' }, /\/run\/pool/],
    [{ app: 'app.js', name: 'a/b' }, /--name must be/],
    [{ app: 'app.js', name: 'x@y' }, /--name must be/],
    [{ app: 'app.js', user: 'root; x' }, /--user must be a user or group name/],
    [{ app: 'app.js', workingDirectory: '/srv/my app' }, /--working-directory must not contain spaces/],
    [{ app: 'app.js', killTimeout: -1 }, /killTimeout \(--kill-timeout\)/]
  ]
  for (const [input, message] of refused) {
    t.throws(() => systemdConfig(input), { code: 'POOL_E_BAD_OPTION', message }, JSON.stringify(input))
  }
})

t.test('OPTIONS is an options table the CLI can build flags from', async (t) => {
  for (const [name, spec] of Object.entries(OPTIONS)) {
    t.ok(spec.flag && spec.kind && spec.group && spec.describe, `${name}: flag, kind, group, describe`)
  }
  const flags = toYargs(OPTIONS)
  t.same(Object.keys(flags).sort(),
    ['app', 'args', 'graceful-timeout', 'group', 'kill-timeout', 'name', 'node', 'pool-bin', 'socket', 'user',
      'working-directory'])
})

t.test('socket activation: the socket unit holds the ports, the service requires it', async (t) => {
  const socket = parseUnit(systemdSocketConfig({ name: 'ssr', host: '0.0.0.0', port: 8001, statsPort: 8000 }))
  t.same(socket.Socket.ListenStream, ['0.0.0.0:8001', '127.0.0.1:8000'],
    'the balancer\'s port first, then the stats port: the order the pool takes them in')
  t.same(socket.Socket.Service, ['ssr.service'])
  t.same(socket.Install.WantedBy, ['sockets.target'])
  t.same(parseUnit(systemdSocketConfig({ name: 'ssr', statsPort: 0 })).Socket.ListenStream, ['127.0.0.1:9001'],
    '--stats-port 0: the balancer\'s port alone')
  t.throws(() => systemdSocketConfig({ name: 'ssr', port: 9001, statsPort: 9001 }),
    { code: 'POOL_E_BAD_OPTION', message: /--stats-port must differ from --port/ })
  const service = parseUnit(systemdConfig({ app: 'app.js', name: 'ssr', socket: true }))
  t.same(service.Unit.Requires, ['ssr.socket'])
  t.same(service.Unit.After, ['network.target ssr.socket'])
  t.notOk('Requires' in parseUnit(systemdConfig({ app: 'app.js', name: 'ssr' })).Unit,
    'without --socket, no socket unit')
})

t.test('systemd-analyze verify accepts the unit', async (t) => {
  const analyze = spawnSync('sh', ['-c', 'command -v systemd-analyze'], { encoding: 'utf8' }).stdout.trim()
  if (!analyze) {
    return t.skip('systemd-analyze is not installed (apt-get install systemd): the unit was not checked by systemd')
  }
  const dir = tempDir(t)
  fs.writeFileSync(path.join(dir, 'app.js'), 'module.exports = (req, res) => res.end()\n')
  const verify = (text) => {
    const file = path.join(dir, 'pool-verify.service')
    fs.writeFileSync(file, text)
    return spawnSync(analyze, ['verify', '--man=no', file], { encoding: 'utf8', timeout: 30000 })
  }
  for (const input of [
    { app: 'app.js', workingDirectory: dir },
    {
      app: 'app.js',
      name: 'ssr',
      user: 'root',
      group: 'root',
      workingDirectory: dir,
      gracefulTimeout: 90500,
      args: HAPROXY_ARGS + ' --haproxy-state-file /run/ssr/haproxy.state'
    }
  ]) {
    const r = verify(systemdConfig(input))
    t.equal(r.status, 0, `verify succeeds: ${r.stderr}`)
    t.notMatch(r.stdout + r.stderr, /Unknown (key|section|lvalue)|ignoring|Invalid|not executable/i, 'no complaint')
  }
  const file = path.join(dir, 'pool-verify.socket')
  fs.writeFileSync(file, systemdSocketConfig({ name: 'pool-verify' }))
  fs.writeFileSync(path.join(dir, 'pool-verify.service'),
    systemdConfig({ app: 'app.js', name: 'pool-verify', workingDirectory: dir, socket: true }))
  const socket = spawnSync(analyze, ['verify', '--man=no', file], { encoding: 'utf8', timeout: 30000 })
  t.equal(socket.status, 0, `the socket unit verifies: ${socket.stderr}`)
  t.notMatch(socket.stdout + socket.stderr, /Unknown (key|section|lvalue)|ignoring|Invalid/i,
    'no complaint about the socket unit')
  // The check above can fail: systemd does report what the old README's unit had.
  const r = verify(systemdConfig({ app: 'app.js', workingDirectory: dir }).replace('[Install]',
    'TimeoutReloadSec=15min\n\n[Install]'))
  t.match(r.stdout + r.stderr, /Unknown key 'TimeoutReloadSec'/, 'an unknown key is reported')
  const missing = verify(systemdConfig({ app: 'app.js', workingDirectory: dir, node: path.join(dir, 'no-node') }))
  t.not(missing.status, 0, 'a missing ExecStart binary fails the verification')
})

// What systemd would do, without systemd: run ExecStart as the main process in
// WorkingDirectory with Environment=, ExecReload beside it, then SIGTERM to the main process
// only (KillMode=mixed). The control socket goes to a temp dir instead of /run/NAME.
t.test('ExecStart starts a pool, ExecReload reloads it, SIGTERM to the pool alone stops it all', async (t) => {
  const dir = tempDir(t)
  const [port, workerPort] = await freePorts(2)
  const text = systemdConfig({
    app: 'handler.js',
    name: 'pool-test',
    workingDirectory: FIXTURES,
    args: `-n 1 --port ${port} --worker-port ${workerPort} --stats-port 0 --heartbeat-interval 200ms`
  })
  const unit = parseUnit(text).Service
  const control = path.join(dir, 'pool.sock')
  const run = (command) => words(command).map((w) => (w === '/run/pool-test/pool.sock' ? control : w))
  const env = cleanEnv(Object.fromEntries(unit.Environment.map((e) => e.split('='))))
  const [bin, ...args] = run(unit.ExecStart[0])
  const main = spawn(bin, args, { cwd: unit.WorkingDirectory[0], env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  main.stdout.on('data', (d) => { out += d })
  main.stderr.on('data', (d) => { out += d })
  const exited = new Promise((resolve) => main.on('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(() => { if (main.exitCode === null && main.signalCode === null) main.kill('SIGKILL') })

  const pidOf = async () => JSON.parse((await request(`http://127.0.0.1:${port}/`)).body).pid
  const first = await waitFor(() => pidOf().catch(() => null),
    { timeout: 20000, what: `the pool to answer; output: ${out.slice(-1000)}` })
  t.match(out, /^\{"level":30/m, 'logs JSON lines, as journald wants, without --log-format')

  const reload = run(unit.ExecReload[0])
  const r = spawnSync(reload[0], reload.slice(1),
    { cwd: unit.WorkingDirectory[0], env, encoding: 'utf8', timeout: 60000 })
  t.equal(r.status, 0, `ExecReload exits 0: ${r.stderr}`)
  const second = await pidOf()
  t.not(second, first, 'the worker was replaced by the time ExecReload returned')

  main.kill('SIGTERM')
  let timer
  const end = await Promise.race([exited,
    new Promise((resolve) => { timer = setTimeout(resolve, Number(unit.TimeoutStopSec[0]) * 1000, 'timeout') })])
  clearTimeout(timer)
  t.same(end, { code: 0, signal: null }, 'the pool stops cleanly within TimeoutStopSec')
  t.notOk(isAlive(second), 'and its worker is gone: nothing left for systemd\'s final SIGKILL')
})
