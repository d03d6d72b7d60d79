'use strict'
// What `npm pack` ships, whether it runs on its own, and scripts/setup's choices (with stand-ins
// for apt, sudo and npm, so nothing is installed).
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { builtinModules } = require('node:module')
const { spawnSync } = require('node:child_process')
const { ROOT, tempDir } = require('../helpers')

const pkg = require('../../package.json')

// Top-level files and directories a user of the package needs; nothing else may ship.
const SHIPPED_FILES = ['package.json', 'README.md', 'LICENSE', 'index.js', 'index.d.ts', 'docs/architecture.md']
// The manual ships beside the code, so the README's links work in node_modules too; the
// benchmark report and its charts do not.
const SHIPPED_DIRS = ['lib/', 'bin/', 'conf/', 'docs/guide/', 'docs/reference/', 'docs/decisions/']
// Development tools that live among the shipped sources but must not ship.
const DEV_TOOLS = []

function packedFiles () {
  const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'],
    { cwd: ROOT, encoding: 'utf8', timeout: 60000 })
  if (r.status !== 0) throw new Error(`npm pack failed: ${r.stderr}`)
  return JSON.parse(r.stdout)[0].files.map((f) => f.path).sort()
}

function filesUnder (dir) {
  return fs.readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(ROOT, path.join(e.parentPath ?? e.path, e.name)))
}

// The module names a file passes to require('...') as a string literal, outside comments
// (whole-line and block comments: enough for this code base's usage examples).
function requiredNames (file) {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm,
    '')
  return [...text.matchAll(/\brequire\(\s*(['"])([^'"]+)\1\s*\)/g)].map((m) => m[2])
}

// The shipped file a relative require lands on, or null.
function resolveShipped (from, name, shipped) {
  const base = path.join(path.dirname(from), name)
  return [base, `${base}.js`, `${base}.json`, path.join(base, 'index.js')].find((f) => shipped.has(f)) ?? null
}

function packageName (name) {
  const parts = name.split('/')
  return name.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

t.test('npm pack ships the library, the CLI, the sample configs and the license; no tests, ' +
  'tools or demo', async (t) => {
  const files = packedFiles()
  const outside = files.filter((f) => !SHIPPED_FILES.includes(f) && !SHIPPED_DIRS.some((d) => f.startsWith(d)))
  t.same(outside, [],
    'nothing outside the allowed roots (no test/, bench/, scripts/, examples/, .ci/, docs/benchmarks.md)')
  for (const f of SHIPPED_FILES) t.ok(files.includes(f), `${f} ships`)
  for (const tool of DEV_TOOLS) t.notOk(files.includes(tool), `${tool} does not ship`)
  // Nothing needed is left out either: every source file in the shipped directories ships.
  const expected = SHIPPED_DIRS.flatMap((d) => filesUnder(d)).filter((f) => !DEV_TOOLS.includes(f)).sort()
  t.same(files.filter((f) => SHIPPED_DIRS.some((d) => f.startsWith(d))), expected,
    'every file of lib/, bin/, conf/ and the manual')
  for (const entry of [pkg.main, pkg.types, ...Object.values(pkg.bin), ...Object.values(pkg.exports['.'])]) {
    t.ok(files.includes(path.normalize(entry)), `package.json points at ${entry}, which ships`)
  }
})

t.test('every require() in a shipped file resolves to a shipped file, a builtin or a runtime dependency', async (t) => {
  const files = packedFiles()
  const shipped = new Set(files)
  const dependencies = Object.keys(pkg.dependencies)
  const used = new Set()
  const unresolved = []
  for (const file of files.filter((f) => f.endsWith('.js'))) {
    for (const name of requiredNames(file)) {
      if (name.startsWith('.')) {
        if (!resolveShipped(file, name, shipped)) unresolved.push(`${file}: ${name}`)
      } else if (name.startsWith('node:') || builtinModules.includes(name.split('/')[0])) {
        continue
      } else if (name === pkg.name || name === 'pool') {
        // The package's own name resolves through "exports"; `pool` is the name it is installed
        // under with an npm alias, which messages to the user write (and which an app run by
        // the pool always resolves: lib/worker/bootstrap.js).
        used.add(name)
      } else if (dependencies.includes(packageName(name))) {
        used.add(packageName(name))
      } else {
        unresolved.push(`${file}: ${name} (not a runtime dependency)`)
      }
    }
  }
  t.same(unresolved, [], 'all requires resolve in an installed package')
  t.same(dependencies.filter((d) => !used.has(d)), [], 'every runtime dependency is used by a shipped file')
  // The static scan above must see what it claims to see.
  t.ok(requiredNames('lib/shared/logger.js').includes('pino-pretty'), 'the scan finds a lazy require')
})

t.test('package.json: the demo\'s and the tools\' packages are development dependencies; ' +
  'the license is there', async (t) => {
  for (const name of ['react', 'react-dom', 'playwright-core', 'tap', 'autocannon']) {
    t.notOk(name in pkg.dependencies, `${name} is not a runtime dependency`)
    t.ok(name in pkg.devDependencies, `${name} is a dev dependency`)
  }
  const lock = require('../../package-lock.json')
  t.same(Object.keys(lock.packages[''].dependencies ?? {}).sort(), Object.keys(pkg.dependencies).sort(),
    'package-lock.json agrees')
  // `pool` on npm is an unrelated package ("HTTP client pools"): `npm i pool` must not be the way
  // in. The command stays `pool`, and `npm i pool@npm:pool-supervisor` gives require('pool').
  t.equal(pkg.name, 'pool-supervisor', 'the npm name is pool-supervisor')
  t.same(pkg.bin, { pool: 'bin/pool.js' }, 'the command is pool')
  t.equal(lock.name, pkg.name, 'package-lock.json names it so too')
  t.equal(pkg.license, 'MIT')
  const license = fs.readFileSync(path.join(ROOT, 'LICENSE'), 'utf8')
  t.match(license, /^MIT License\n\nCopyright \(c\) 2026 the pool authors\n/)
  t.match(license, /THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND/)
})

// A stand-in for the root debootstrap makes: a loader that runs the program it is given (after
// the wrapper's --argv0 NAME --inhibit-cache --library-path DIR), beside a libc, and programs
// that print a version.
const FAKE_DEBOOTSTRAP = `for a; do root=$a; done
mkdir -p "$root/usr/lib/test-linux-gnu" "$root/usr/sbin"
: > "$root/usr/lib/test-linux-gnu/libc.so.6"
printf '#!/bin/sh\\nshift 5\\nexec "$@"\\n' > "$root/usr/lib/test-linux-gnu/ld-linux-test.so.1"
for p in haproxy nginx; do printf '#!/bin/sh\\necho "%s version 0"\\n' $p > "$root/usr/sbin/$p"; done
chmod 755 "$root/usr/lib/test-linux-gnu/ld-linux-test.so.1" "$root/usr/sbin/haproxy" "$root/usr/sbin/nginx"`

// scripts/setup with every outside command replaced by a stand-in that logs its call.
// `cachedRoot`: Debian 13's haproxy and nginx already built.
function runSetup (t, { uid, installed = [], sudo = true, aptFails = false, cachedNodes = [], cachedRoot = false }) {
  const dir = tempDir(t, 'pool-setup-')
  for (const version of cachedNodes) {
    const bin = path.join(dir, '.cache', 'pool-supervisor', 'node', version, 'node_modules',
      `node-linux-${process.arch}`, 'bin')
    fs.mkdirSync(bin, { recursive: true })
    fs.writeFileSync(path.join(bin, 'node'), '', { mode: 0o755 })
  }
  if (cachedRoot) {
    const bin = path.join(dir, '.cache', 'pool-supervisor', 'debian13', 'bin')
    fs.mkdirSync(bin, { recursive: true })
    for (const program of ['haproxy', 'nginx']) fs.writeFileSync(path.join(bin, program), '', { mode: 0o755 })
  }
  const log = path.join(dir, 'calls.log')
  const stub = (name, body) => fs.writeFileSync(path.join(dir, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 })
  stub('id', `[ "$1" = -u ] && echo ${uid}`)
  stub('dpkg-query',
    'for a; do pkg=$a; done; ' +
      `for p in ${installed.join(' ')}; do [ "$p" = "$pkg" ] && { printf 'install ok installed'; exit 0; }; done; ` +
      'exit 1')
  stub('apt-get', `echo "apt-get $* DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> ${log}; ${aptFails ? 'exit 100' : 'exit 0'}`)
  stub('npm', `echo "npm $* (in \${PWD#${ROOT}})" >> ${log}`)
  if (sudo) stub('sudo', `echo "sudo" >> ${log}; exec "$@"`)
  stub('debootstrap', `echo "debootstrap $*" >> ${log}\n${FAKE_DEBOOTSTRAP}`)
  const tools = ['env', 'grep', 'dirname', 'uname', 'mkdir', 'rm', 'mv', 'cat', 'sed', 'chmod', 'readlink', 'head']
  for (const tool of tools) {
    const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim()
    fs.symlinkSync(found, path.join(dir, tool))
  }
  fs.symlinkSync(process.execPath, path.join(dir, 'node'))
  const r = spawnSync('/bin/bash', [path.join(ROOT, 'scripts', 'setup')],
    { env: { PATH: dir, HOME: dir }, encoding: 'utf8', timeout: 30000 })
  return { ...r, home: dir, calls: fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : [] }
}

// What scripts/setup runs with npm once apt is done: it fetches the Node.js versions the suite is
// tested on into the cache, installs the repository's packages, then each example's own.
const NODE_VERSIONS = fs.readFileSync(path.join(ROOT, 'scripts', 'nodes.sh'), 'utf8')
  .match(/^NODE_VERSIONS=\((.*)\)$/m)[1].split(' ')

function debootstrapCall (home) {
  return 'debootstrap --variant=minbase --include=haproxy,nginx trixie ' +
    `${home}/.cache/pool-supervisor/debian13.partial/root`
}

function npmCalls (home, { cached = [] } = {}) {
  const versions = NODE_VERSIONS.filter((v) => !cached.includes(v))
  const examples = fs.readdirSync(path.join(ROOT, 'examples', 'frameworks'))
    .filter((name) => fs.existsSync(path.join(ROOT, 'examples', 'frameworks', name, 'package-lock.json'))).sort()
  return [
    ...versions.map((v) => `npm install --prefix ${home}/.cache/pool-supervisor/node/${v}.partial ` +
      `--no-save --no-package-lock --no-audit --no-fund node-linux-${process.arch}@${v} (in )`),
    'npm ci --no-audit --no-fund (in )',
    ...examples.map((name) => `npm ci --no-audit --no-fund (in /examples/frameworks/${name})`)
  ]
}

t.test('scripts/setup: root installs with apt directly, a user through sudo, only what is missing, ' +
  'then the Node.js versions and npm ci', async (t) => {
  const asRoot = runSetup(t, { uid: 0 })
  t.equal(asRoot.status, 0, asRoot.stderr)
  t.same(asRoot.calls, [
    'apt-get update -qq DEBIAN_FRONTEND=noninteractive',
    'apt-get install -y -qq --no-install-recommends haproxy nginx iproute2 chromium dnsmasq-base faketime ' +
      'redis-server debootstrap DEBIAN_FRONTEND=noninteractive',
    debootstrapCall(asRoot.home),
    ...npmCalls(asRoot.home)
  ], 'root: no sudo (a fresh root machine has none)')
  const built = path.join(asRoot.home, '.cache', 'pool-supervisor', 'debian13')
  t.notOk(fs.existsSync(`${built}.partial`), 'the Debian 13 root built aside, then moved into place')
  for (const program of ['haproxy', 'nginx']) {
    const r = spawnSync(path.join(built, 'bin', program), ['-v'], { encoding: 'utf8' })
    t.equal(r.stdout, `${program} version 0\n`, `bin/${program} runs the root's ${program} through the root's loader`)
  }

  const withSudo = runSetup(t,
    { uid: 1000, installed: ['haproxy', 'nginx', 'iproute2', 'dnsmasq-base', 'faketime', 'redis-server'] })
  t.equal(withSudo.status, 0, withSudo.stderr)
  t.same(withSudo.calls, [
    'sudo', 'apt-get update -qq DEBIAN_FRONTEND=noninteractive',
    'sudo', 'apt-get install -y -qq --no-install-recommends chromium debootstrap DEBIAN_FRONTEND=noninteractive',
    'sudo', 'sudo', debootstrapCall(withSudo.home), 'sudo', // rm -rf what a build left, debootstrap, rm -rf again
    ...npmCalls(withSudo.home)
  ], 'a user: through sudo, only the missing packages')

  const all = ['haproxy', 'nginx', 'iproute2', 'chromium', 'dnsmasq-base', 'faketime', 'redis-server', 'debootstrap']
  const done = runSetup(t, { uid: 1000, sudo: false, installed: all, cachedRoot: true })
  t.equal(done.status, 0, done.stderr)
  t.same(done.calls, npmCalls(done.home),
    'all installed and built: no apt, no debootstrap, no sudo needed, so it runs again')

  const cached = runSetup(t,
    { uid: 1000, sudo: false, installed: all, cachedRoot: true, cachedNodes: [NODE_VERSIONS[0]] })
  t.equal(cached.status, 0, cached.stderr)
  t.same(cached.calls, npmCalls(cached.home, { cached: [NODE_VERSIONS[0]] }),
    `Node.js ${NODE_VERSIONS[0]} already in the cache: not fetched again`)

  const noRoot = runSetup(t, { uid: 1000, sudo: false, installed: all })
  t.equal(noRoot.status, 0, 'without root, the rest is still set up')
  t.match(noRoot.stderr,
    /^scripts\/setup: not building Debian 13's haproxy and nginx: debootstrap needs root .*the tests on them will skip\n$/)
  t.same(noRoot.calls, npmCalls(noRoot.home), 'no debootstrap')
})

t.test('scripts/setup: one clear line and no npm ci when it cannot install', async (t) => {
  const noSudo = runSetup(t, { uid: 1000, sudo: false, installed: ['haproxy', 'nginx'] })
  t.equal(noSudo.status, 1)
  t.equal(noSudo.stderr,
    'scripts/setup: installing iproute2 chromium dnsmasq-base faketime redis-server debootstrap needs root: ' +
      'run this as root, or as a user with sudo\n')
  t.same(noSudo.calls, [], 'nothing run')

  const aptFails = runSetup(t, { uid: 0, aptFails: true })
  t.not(aptFails.status, 0, 'a failed apt-get fails the set-up')
  t.notOk(aptFails.calls.some((c) => c.startsWith('npm')), 'and npm ci does not run')
})
