'use strict'
// The package as a user gets it: `npm pack`, then installed into a fresh project, once under its
// npm name (`npm i pool-supervisor`) and once under `pool` with an npm alias (`npm i
// pool@npm:pool-supervisor`, here `pool@file:TARBALL`). In each: `npx pool start app.js` serves
// and `npx pool stop` stops it cleanly; require() and import load it; its types resolve under
// tsc. So packaging (files, bin, exports, types, dependencies) cannot rot unseen.
//
// No network: npm installs from its cache, which `npm ci` filled (--offline). A cache that lacks
// some package's metadata (a cache filled by `npm ci` alone holds the tarballs but not always
// the metadata a fresh install asks for) falls back to --prefer-offline, which fetches only what
// is missing; with neither a cache nor a registry, the test skips and says so.
const t = require('tap')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { ROOT, freePorts, request, waitFor, isAlive } = require('../helpers')

const NAME = require('../../package.json').name
const TSC = path.join(ROOT, 'node_modules', '.bin', 'tsc')

// npm as a user runs it: none of the npm_* variables an `npm test` parent sets (local_prefix
// would point the install at this repository), no tap loader in NODE_OPTIONS, the user's cache.
function userEnv () {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (/^npm_/i.test(k) && k.toLowerCase() !== 'npm_config_cache') continue
    if (k === 'NODE_OPTIONS') continue
    env[k] = v
  }
  return env
}

function run (cmd, args, cwd, timeout = 120000) {
  const r = spawnSync(cmd, args, { cwd, env: userEnv(), encoding: 'utf8', timeout })
  return { code: r.status, stdout: r.stdout || '', stderr: r.stderr || '', error: r.error }
}

// npm and tsc take seconds each, minutes in all on a busy machine.
t.setTimeout(600000)

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-pkg-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))

function pack () {
  const r = run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], ROOT)
  if (r.code !== 0) throw new Error(`npm pack failed: ${r.stderr}`)
  return path.join(dir, JSON.parse(r.stdout)[0].filename)
}

// The same app in both projects: it loads the package by both names (one through the project's
// node_modules, the other through the pool's fallback for an app it runs) and gets one module.
const APP = `'use strict'
const byName = require(${JSON.stringify(NAME)})
const byAlias = require('pool')
byName.listen((req, res) => res.end(JSON.stringify({ same: byName === byAlias, pid: process.pid, slot: process.env.POOL_WORKER_ID })))
`

// A fresh project with the tarball installed as `spec`; { skip } when npm cannot get the
// dependencies at all.
function project (name, spec) {
  const cwd = path.join(dir, name)
  fs.mkdirSync(cwd)
  fs.writeFileSync(path.join(cwd, 'package.json'), JSON.stringify({ name: `try-${name}`, version: '1.0.0', private: true }))
  fs.writeFileSync(path.join(cwd, 'app.js'), APP)
  const install = (mode) => run('npm', ['install', mode, '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel', 'error', spec], cwd)
  let r = install('--offline')
  let how = 'offline, from the npm cache'
  if (r.code !== 0 && /ENOTCACHED/.test(r.stderr)) {
    r = install('--prefer-offline')
    how = 'from the npm cache, missing metadata fetched (--prefer-offline)'
  }
  if (r.code !== 0 && /ENOTCACHED|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH/.test(r.stderr)) {
    return { skip: `npm can get the dependencies neither from its cache nor from the registry (run npm ci first): ${r.stderr.trim().split('\n').pop()}` }
  }
  if (r.code !== 0) throw new Error(`npm install ${spec} failed: ${r.stderr}`)
  return { cwd, how }
}

// `npx pool ...` in the project. --no: never fetch a package called pool from the registry
// (the unrelated one) if the project's bin were missing; fail instead.
const npx = (args) => ['--no', 'pool', ...args]

async function startAndStop (t, cwd) {
  const ports = await freePorts(3)
  const control = path.join(cwd, 'pool.sock')
  const child = spawn('npx', npx(['start', 'app.js', '-n', '2', '--port', String(ports[0]), '--worker-port', String(ports[1]), '--stats-port', '0', '--control', control, '--log-format', 'json']),
    { cwd, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let output = ''
  child.stdout.on('data', (d) => { output += d })
  child.stderr.on('data', (d) => { output += d })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  // npx, a shell and the pool: their process group, should the test fail midway.
  t.teardown(() => { try { process.kill(-child.pid, 'SIGKILL') } catch {} })
  await waitFor(() => /"event":"started"/.test(output), { timeout: 30000, what: `the pool started (output: ${output.slice(-500)})` })
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
  const cjs = run(process.execPath, ['-e', `const m = require(${JSON.stringify(name)}); console.log(Object.keys(m).sort().join(' '))`], cwd)
  t.equal(cjs.stdout, 'Pool PoolError codes listen\n', `require('${name}') gives the API ${cjs.stderr}`)
  const esm = run(process.execPath, ['--input-type=module', '-e', `import pool, { Pool, listen, codes } from ${JSON.stringify(name)}; console.log(typeof Pool, typeof listen, codes.BAD_OPTION, pool.Pool === Pool)`], cwd)
  t.equal(esm.stdout, 'function function POOL_E_BAD_OPTION true\n', `import from '${name}' gives the API ${esm.stderr}`)
}

// tsc with the installed package's types: the API compiles, and a mistake is refused (types that
// did not resolve would make everything `any`). One compile per project (tsc is slow on a busy
// machine): the project under its npm name with `node16` resolution (package.json "exports"),
// the alias with the classic `node` one ("types").
function types (t, cwd, name, resolution) {
  if (!fs.existsSync(TSC)) return t.skip('no TypeScript compiler in node_modules (npm ci installs it with the dev dependencies)')
  const file = path.join(cwd, 'use.ts')
  fs.writeFileSync(file, `import { Pool, PoolOptions, listen } from ${JSON.stringify(name)}
new Pool({ app: 'a.js', workerz: 2 })
const options: PoolOptions = { app: 'app.js', workers: 2, balancer: 'embedded', port: 9001 }
const pool = new Pool(options)
pool.recycle(1).then((r) => r.newPid)
listen((req, res) => res.end(req.url))
`)
  const moduleKind = resolution === 'node16' ? 'node16' : 'commonjs'
  const r = run(TSC, ['--noEmit', '--strict', '--esModuleInterop', '--module', moduleKind, '--moduleResolution', resolution, '--target', 'es2022',
    '--types', 'node', '--typeRoots', path.join(ROOT, 'node_modules', '@types'), file], cwd)
  const errors = r.stdout.split(/\n(?=\S)/).filter((e) => / error TS/.test(e))
  t.equal(errors.length, 1, `types of '${name}' resolve (--moduleResolution ${resolution}): one error, the planted one`, { output: r.stdout + r.stderr })
  t.match(errors[0], /^use\.ts\(2,.*workerz/, 'a misspelt option is refused')
}

const tarball = pack()

t.test(`npm i ${NAME}: npx pool start serves, require and import load it, its types resolve`, async (t) => {
  const p = project('by-name', tarball)
  if (p.skip) return t.skip(p.skip)
  t.comment(`installed ${p.how}`)
  t.ok(fs.existsSync(path.join(p.cwd, 'node_modules', '.bin', 'pool')), 'the command is pool')
  await startAndStop(t, p.cwd)
  loads(t, p.cwd, NAME)
  types(t, p.cwd, NAME, 'node16')
})

t.test(`npm i pool@npm:${NAME}: the same under the name pool`, async (t) => {
  const p = project('by-alias', `pool@file:${tarball}`)
  if (p.skip) return t.skip(p.skip)
  t.comment(`installed ${p.how}`)
  t.equal(require(path.join(p.cwd, 'node_modules', 'pool', 'package.json')).name, NAME, `node_modules/pool is ${NAME}`)
  await startAndStop(t, p.cwd)
  loads(t, p.cwd, 'pool')
  types(t, p.cwd, 'pool', 'node')
})
