'use strict'
// The package as a user gets it: `npm pack`, then installed into a fresh project, once under its
// npm name (`npm i pool-supervisor`) and once under `pool` with an npm alias (`npm i
// pool@npm:pool-supervisor`, here `pool@file:TARBALL`). In each: `npx pool start app.js` serves
// and `npx pool stop` stops it cleanly; require() and import load it; its types resolve under
// tsc. So packaging (files, bin, exports, types, dependencies) cannot rot unseen.
//
// Never the network, so never flaky and never skipped: each project gets a package-lock.json made
// from this repository's own, and `npm ci --offline` installs it from the tarballs `npm ci` left in
// npm's cache (found by integrity; npm ci needs no package metadata, which `npm install` would).
// Every npm call gets a dead registry (port 9 on loopback), so a fetch fails loudly.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { ROOT, freePorts, request, waitFor, isAlive, tempDir } = require('../helpers')

const NAME = require('../../package.json').name
const TSC = path.join(ROOT, 'node_modules', '.bin', 'tsc')

// npm and tsc take seconds each, a minute in all, more on a busy machine.
t.setTimeout(300000)

const dir = tempDir(t, 'pool-pkg-')

// npm as a user runs it: none of the npm_* variables an `npm test` parent sets (local_prefix
// would point the install at this repository), no tap loader in NODE_OPTIONS, the user's cache
// (its debug logs kept here, in the temp dir). And no registry: a fetch that a change brought
// back fails at once rather than slowing the test down or passing only when online.
const DEAD_REGISTRY = 'http://127.0.0.1:9/'
function userEnv () {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (/^npm_/i.test(k) && k.toLowerCase() !== 'npm_config_cache') continue
    if (k === 'NODE_OPTIONS') continue
    env[k] = v
  }
  return {
    ...env,
    npm_config_registry: DEAD_REGISTRY,
    npm_config_update_notifier: 'false',
    npm_config_logs_dir: path.join(dir, 'npm-logs')
  }
}

// Offline, npm and npx take a few seconds; the bound is for a busy machine.
function run (cmd, args, cwd, timeout = 60000) {
  const r = spawnSync(cmd, args, { cwd, env: userEnv(), encoding: 'utf8', timeout })
  return { code: r.status, stdout: r.stdout || '', stderr: r.stderr || '', error: r.error }
}

// npm keeps what it packs and what it installs from a file in its cache: npm pack's copy goes to
// a cache in the temp dir, and npm ci's copy of the tarball is removed from the user's at the end.
function pack () {
  const r = run('npm',
    ['pack', '--json', '--ignore-scripts', '--pack-destination', dir, '--cache', path.join(dir, 'npm-cache')], ROOT)
  if (r.code !== 0) throw new Error(`npm pack failed: ${r.stderr}`)
  const { filename, integrity } = JSON.parse(r.stdout)[0]
  const file = path.join(dir, filename)
  t.teardown(() => run('npm', ['cache', 'clean', `pacote:tarball:file:${file}`], dir))
  return { file, integrity }
}

// The same app in both projects: it loads the package by both names (one through the project's
// node_modules, the other through the pool's fallback for an app it runs) and gets one module.
const APP = `'use strict'
const byName = require(${JSON.stringify(NAME)})
const byAlias = require('pool')
byName.listen((req, res) => {
  res.end(JSON.stringify({ same: byName === byAlias, pid: process.pid, slot: process.env.POOL_WORKER_ID }))
})
`

// The runtime dependencies' tree as this repository's package-lock.json has it: every entry they
// reach, at its own path. Any subset of a lockfile's tree that is closed under Node's lookup
// (nearest node_modules/NAME upwards) resolves as the whole did, so it is a valid tree on its own.
function runtimeEntries () {
  const { packages } = require(path.join(ROOT, 'package-lock.json'))
  const locate = (from, name) => {
    for (let at = from; ; at = at.slice(0, Math.max(0, at.lastIndexOf('/node_modules/')))) {
      const candidate = `${at ? at + '/' : ''}node_modules/${name}`
      if (packages[candidate]) return candidate
      if (!at) return null
    }
  }
  const entries = {}
  const pending = [['', packages[''].dependencies]]
  for (const [from, needs] of pending) {
    for (const name of Object.keys(needs)) {
      const at = locate(from, name)
      if (!at && needs === packages[from].dependencies) {
        throw new Error(`package-lock.json has no ${name} for ${from || 'the root'}: run npm install`)
      }
      if (!at || entries[at]) continue // an optional dependency or peer npm left out; one already taken
      const entry = packages[at]
      entries[at] = {
        ...entry,
        resolved: entry.resolved || registryTarball(entry.name || at.replace(/.*node_modules\//, ''), entry.version)
      }
      pending.push([at, entry.dependencies || {}], [at, entry.optionalDependencies || {}],
        [at, entry.peerDependencies || {}])
    }
  }
  return entries
}

// Where the public registry keeps a version's tarball, as npm writes it into a lockfile (this
// repository's omits it: omit-lockfile-registry-resolved). npm ci reads the tarball from its cache
// by the entry's integrity; without a `resolved` it would ask the registry where the tarball is.
function registryTarball (name, version) {
  return `https://registry.npmjs.org/${name}/-/${name.split('/').pop()}-${version}.tgz`
}

// A fresh project whose package.json and package-lock.json are what `npm i TARBALL` (as `as`)
// would leave, installed with `npm ci --offline`.
function project (name, as, tarball) {
  const cwd = path.join(dir, name)
  fs.mkdirSync(cwd)
  const spec = `file:../${path.basename(tarball.file)}`
  const manifest = require(path.join(ROOT, 'package.json'))
  const installed = {
    version: manifest.version,
    resolved: spec,
    integrity: tarball.integrity,
    license: manifest.license,
    dependencies: manifest.dependencies,
    bin: manifest.bin,
    engines: manifest.engines
  }
  if (as !== NAME) installed.name = NAME
  const root = { name: `try-${name}`, version: '1.0.0', dependencies: { [as]: spec } }
  const lock = {
    name: root.name,
    version: root.version,
    lockfileVersion: 3,
    requires: true,
    packages: { '': root, [`node_modules/${as}`]: installed, ...runtimeEntries() }
  }
  fs.writeFileSync(path.join(cwd, 'package.json'), JSON.stringify({ ...root, private: true }, null, 2))
  fs.writeFileSync(path.join(cwd, 'package-lock.json'), JSON.stringify(lock, null, 2))
  fs.writeFileSync(path.join(cwd, 'app.js'), APP)
  const r = run('npm', ['ci', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel', 'error'], cwd)
  if (r.code === 0) return cwd
  const hint = /ENOTCACHED/.test(r.stderr)
    ? ' (npm\'s cache lacks a dependency\'s tarball: run npm ci in this repository first; this test never fetches)'
    : ''
  // its log goes with the temp dir
  const said = r.error ? r.error.message : r.stderr.replace(/.*A complete log of this run.*\n?/, '')
  throw new Error(`npm ci in a project with ${as} from the tarball failed${hint}: ${said}`)
}

// `npx pool ...` in the project. --no: never fetch a package called pool from the registry
// (the unrelated one) if the project's bin were missing; fail instead.
const npx = (args) => ['--no', 'pool', ...args]

async function startAndStop (t, cwd) {
  const ports = await freePorts(3)
  const control = path.join(cwd, 'pool.sock')
  const child = spawn('npx',
    npx(['start', 'app.js', '-n', '2', '--port', String(ports[0]), '--worker-port', String(ports[1]), '--stats-port',
      '0', '--control', control, '--log-format', 'json']),
    { cwd, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let output = ''
  child.stdout.on('data', (d) => { output += d })
  child.stderr.on('data', (d) => { output += d })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  // npx, a shell and the pool: their process group, should the test fail midway.
  t.teardown(() => { try { process.kill(-child.pid, 'SIGKILL') } catch {} })
  await waitFor(() => /"event":"started"/.test(output),
    { timeout: 30000, what: `the pool started (output: ${output.slice(-500)})` })
  const res = await request(`http://127.0.0.1:${ports[0]}/`)
  t.equal(res.status, 200, 'npx pool start app.js serves through its balancer')
  t.equal(JSON.parse(res.body).same, true, `the app's require('${NAME}') and require('pool') are one module`)
  const poolPid = Number(/"supervisorPid":(\d+)/.exec(output)[1])
  const stop = run('npx', npx(['stop', '--control', control]), cwd, 60000)
  t.equal(stop.code, 0, 'npx pool stop exits 0', { stderr: stop.stderr })
  t.equal(stop.stdout, 'stopped (clean)\n')
  t.same(await exited, { code: 0, signal: null }, 'npx pool start exited 0')
  t.notOk(isAlive(poolPid), 'the pool process is gone')
}

function loads (t, cwd, name) {
  const cjs = run(process.execPath,
    ['-e', `const m = require(${JSON.stringify(name)}); console.log(Object.keys(m).sort().join(' '))`], cwd)
  t.equal(cjs.stdout, 'Pool PoolError codes draining listen\n', `require('${name}') gives the API ${cjs.stderr}`)
  const esm = run(process.execPath,
    ['--input-type=module', '-e',
      `import pool, { Pool, listen, codes } from ${JSON.stringify(name)}; console.log(typeof Pool, typeof listen, ` +
        'codes.BAD_OPTION, pool.Pool === Pool)'], cwd)
  t.equal(esm.stdout, 'function function POOL_E_BAD_OPTION true\n', `import from '${name}' gives the API ${esm.stderr}`)
}

// tsc with the installed package's types: the API compiles, and a mistake is refused (types that
// did not resolve would make everything `any`). One compile per project (tsc is slow on a busy
// machine): the project under its npm name with `node16` resolution (package.json "exports"),
// the alias with the classic `node` one ("types").
function types (t, cwd, name, resolution) {
  if (!fs.existsSync(TSC)) {
    return t.skip('no TypeScript compiler in node_modules (npm ci installs it with the dev dependencies)')
  }
  const file = path.join(cwd, 'use.ts')
  fs.writeFileSync(file, `import { Pool, PoolOptions, listen } from ${JSON.stringify(name)}
new Pool({ app: 'a.js', workerz: 2 })
const options: PoolOptions = { app: 'app.js', workers: 2, balancer: 'embedded', port: 9001 }
const pool = new Pool(options)
pool.recycle(1).then((r) => r.newPid)
listen((req, res) => res.end(req.url))
`)
  const moduleKind = resolution === 'node16' ? 'node16' : 'commonjs'
  const r = run(TSC, ['--noEmit', '--strict', '--esModuleInterop', '--module', moduleKind, '--moduleResolution',
    resolution, '--target', 'es2022',
    '--types', 'node', '--typeRoots', path.join(ROOT, 'node_modules', '@types'), file], cwd)
  const errors = r.stdout.split(/\n(?=\S)/).filter((e) => / error TS/.test(e))
  t.equal(errors.length, 1, `types of '${name}' resolve (--moduleResolution ${resolution}): one error, the planted one`,
    { output: r.stdout + r.stderr })
  t.match(errors[0], /^use\.ts\(2,.*workerz/, 'a misspelt option is refused')
}

const tarball = pack()

t.test(`npm i ${NAME}: npx pool start serves, require and import load it, its types resolve`, async (t) => {
  const cwd = project('by-name', NAME, tarball)
  t.ok(fs.existsSync(path.join(cwd, 'node_modules', '.bin', 'pool')), 'the command is pool')
  await startAndStop(t, cwd)
  loads(t, cwd, NAME)
  types(t, cwd, NAME, 'node16')
})

t.test(`npm i pool@npm:${NAME}: the same under the name pool`, async (t) => {
  const cwd = project('by-alias', 'pool', tarball)
  t.equal(require(path.join(cwd, 'node_modules', 'pool', 'package.json')).name, NAME, `node_modules/pool is ${NAME}`)
  await startAndStop(t, cwd)
  loads(t, cwd, 'pool')
  types(t, cwd, 'pool', 'node')
})
