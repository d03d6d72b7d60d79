'use strict'
// Next.js under `pool start`, unchanged: examples/frameworks/next is built once (`next build`,
// with the standalone output too), then both of Next's own servers run as they are, each served,
// reloaded under load without a failed request, and stopped with nothing left: the custom server
// from Next's docs (server.js) and the one `next build` writes (.next/standalone/server.js).
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { ROOT, cleanEnv, request } = require('../helpers')
const { startAppPool, reloadUnderLoad, stopLeavingNothing } = require('../helpers/app-pool')

const EXAMPLE = path.join(ROOT, 'examples', 'frameworks', 'next')
const NEXT_BIN = path.join(ROOT, 'node_modules', 'next', 'dist', 'bin', 'next')
const BUILD_TIMEOUT = 240000

// A copy of the example, built. Inside the repository (its ignored tmp/), where Next finds
// its own package as a user's project does: Turbopack does not follow a node_modules symlink
// out of the project's root, so a copy under the system's temp dir could not build.
async function buildCopy (t) {
  const tmp = path.join(ROOT, 'tmp')
  fs.mkdirSync(tmp, { recursive: true })
  const dir = fs.mkdtempSync(path.join(tmp, 'next-'))
  t.teardown(() => {
    fs.rmSync(dir, { recursive: true, force: true })
    try { fs.rmdirSync(tmp) } catch { /* not empty: someone else's too */ }
  })
  fs.cpSync(EXAMPLE, dir, { recursive: true, filter: (src) => path.basename(src) !== '.next' })
  const build = await run(process.execPath, [NEXT_BIN, 'build', dir], {
    env: cleanEnv({ NEXT_TELEMETRY_DISABLED: '1', NEXT_OUTPUT: 'standalone' }),
    timeout: BUILD_TIMEOUT
  })
  if (build.code !== 0) throw new Error(`next build failed (${build.code ?? build.signal}):\n${build.output.slice(-3000)}`)
  return dir
}

function run (cmd, args, { env, timeout }) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout)
    child.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, output }) })
  })
}

async function servesThePage (t, url, slot) {
  const res = await request(url)
  t.equal(res.status, 200, `slot ${slot}: 200`)
  t.match(res.body, /<h1>Hello from Next\.js<\/h1>/, `slot ${slot}: the page`)
  t.match(res.body, new RegExp(`pool slot (<!-- -->)?${slot}<`), `slot ${slot}: rendered by that worker, per request`)
}

t.test('Next.js', async (t) => {
  const dir = await buildCopy(t)
  const standalone = path.join(dir, '.next', 'standalone', path.relative(ROOT, dir), 'server.js')

  const servers = {
    'the custom server of Next\'s docs (server.js)': { app: path.join(dir, 'server.js'), env: { NODE_ENV: 'production' } },
    'the standalone server of `next build` (.next/standalone/server.js)': { app: standalone, env: {} }
  }
  for (const [name, { app, env }] of Object.entries(servers)) {
    t.test(`${name}: served, reloaded under load, stopped`, async (t) => {
      const p = await startAppPool(t, app, { env })
      for (const slot of [1, 2]) await servesThePage(t, p.workerUrl(slot), slot)
      await reloadUnderLoad(t, p)
      for (const slot of [1, 2]) await servesThePage(t, p.workerUrl(slot), slot)
      await stopLeavingNothing(t, p)
    })
  }
})
