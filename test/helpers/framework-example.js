'use strict'

// A framework example with a build of its own (examples/frameworks/NAME: its package.json and
// lockfile, installed by scripts/setup): whether it can run on this Node, its build (made once
// per lockfile and sources, then reused), and a streamed page read chunk by chunk.

const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const crypto = require('node:crypto')
const { spawn } = require('node:child_process')
const { ROOT, cleanEnv } = require('../helpers')

const EXAMPLES = path.join(ROOT, 'examples', 'frameworks')
// What a build writes or a tool generates in an example: never part of its sources.
const GENERATED = new Set(['node_modules', 'build', 'dist', '.output', '.nuxt', '.svelte-kit', '.astro',
  '.react-router', '.data', '.nitro', '.cache'])

// Why this example cannot run here, or null: its dependencies are not installed, or one of
// them needs a newer Node than this one (each package's own engines.node).
function cannotRun (name) {
  const dir = path.join(EXAMPLES, name)
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
  const deps = Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })
  for (const dep of deps) {
    const file = path.join(dir, 'node_modules', dep, 'package.json')
    if (!fs.existsSync(file)) {
      return `examples/frameworks/${name} is not installed (${dep} missing): scripts/setup installs it`
    }
    const { version, engines } = JSON.parse(fs.readFileSync(file, 'utf8'))
    if (engines?.node && !satisfies(process.versions.node, engines.node)) {
      return `${dep} ${version} needs Node ${engines.node}, this is ${process.versions.node} ` +
        '(CI runs the suite on Node 22 and 24)'
    }
  }
  return null
}

// `npm run build` in the example, unless the last build there was made from the same lockfile
// and sources (a hash of them is kept beside its dependencies) and what it made (`output`, a
// path in the example) is still there, on this Node's PATH.
async function buildOnce (name, { output, timeout = 240000 } = {}) {
  const dir = path.join(EXAMPLES, name)
  const stamp = path.join(dir, 'node_modules', '.pool-example-build')
  const hash = sourceHash(dir)
  const built = fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === hash && (!output ||
    fs.existsSync(path.join(dir, output)))
  if (built) return { built: false, ms: 0 }
  const started = Date.now()
  const env = cleanEnv({
    PATH: `${path.dirname(process.execPath)}:${process.env.PATH}`,
    ASTRO_TELEMETRY_DISABLED: '1',
    NUXT_TELEMETRY_DISABLED: '1',
    DO_NOT_TRACK: '1',
    CI: 'true'
  })
  const r = await run('npm', ['run', 'build'], { cwd: dir, env, timeout })
  if (r.code !== 0) {
    throw new Error(`npm run build in examples/frameworks/${name} failed (${r.code ?? r.signal}):\n` +
      r.output.slice(-3000))
  }
  fs.writeFileSync(stamp, hash)
  return { built: true, ms: Date.now() - started }
}

function sourceHash (dir) {
  const hash = crypto.createHash('sha256')
  const walk = (sub) => {
    for (const entry of fs.readdirSync(path.join(dir, sub), { withFileTypes: true })
      .sort((a, b) => a.name.localeCompare(b.name))) {
      if (GENERATED.has(entry.name)) continue
      const rel = path.join(sub, entry.name)
      if (entry.isDirectory()) walk(rel)
      else if (entry.isFile()) hash.update(rel).update('\0').update(fs.readFileSync(path.join(dir, rel))).update('\0')
    }
  }
  walk('')
  return hash.digest('hex')
}

function run (cmd, args, { cwd, env, timeout }) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout)
    child.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, output }) })
  })
}

// A browser's User-Agent: React Router's and Nuxt's servers send a bot the whole page at once.
const BROWSER = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0 Safari/537.36'

// GET `url` and note when each chunk of the body arrived (ms after the request was sent).
function chunksOf (url, { timeout = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const sent = performance.now()
    const req = http.get(url, { agent: false, headers: { 'user-agent': BROWSER } }, (res) => {
      const chunks = []
      res.setEncoding('utf8')
      res.on('data', (text) => chunks.push({ at: performance.now() - sent, text }))
      res.on('end', () => resolve({ status: res.statusCode, chunks, body: chunks.map((c) => c.text).join('') }))
      res.on('error', reject)
    })
    req.setTimeout(timeout, () => req.destroy(new Error(`request to ${url} timed out after ${timeout} ms`)))
    req.on('error', reject)
  })
}

// Where `marker` first appears: its offset in the body, the chunk that completed it and when
// that chunk arrived.
function arrival ({ chunks }, marker) {
  let text = ''
  for (const [index, chunk] of chunks.entries()) {
    text += chunk.text
    const offset = text.indexOf(marker)
    if (offset !== -1) return { offset, index, at: chunk.at }
  }
  return null
}

// Whether `version` (x.y.z) satisfies a range as package.json engines write them: alternatives
// joined by ||, each of comparators (>=, >, <=, <, =, ^, ~, or a bare version, x.y or x).
function satisfies (version, range) {
  const v = parse(version)
  return range.replace(/([<>=^~])\s+/g,
    '$1').split('||').some((alt) => alt.trim().split(/\s+/).filter(Boolean).every((comparator) => {
    const [, op = '', rest] = comparator.match(/^(>=|<=|>|<|=|\^|~)?v?(.*)$/)
    const want = parse(rest)
    const cmp = compare(v, want)
    switch (op) {
      case '>=': return cmp >= 0
      case '>': return cmp > 0
      case '<=': return cmp <= 0
      case '<': return cmp < 0
      case '^': return cmp >= 0 && v[0] === want[0] && (want[0] !== 0 || v[1] === want[1])
      case '~': return cmp >= 0 && v[0] === want[0] && v[1] === want[1]
      default: return rest === '*' || rest === '' || (compare(v.slice(0, want.given), want.slice(0, want.given)) === 0)
    }
  }))
}

function parse (text) {
  const parts = String(text).split('-')[0].split('.').filter((p) => /^\d+$/.test(p)).map(Number)
  const v = [parts[0] ?? 0, parts[1] ?? 0, parts[2] ?? 0]
  v.given = parts.length || 3
  return v
}

function compare (a, b) {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1
  return 0
}

module.exports = { EXAMPLES, cannotRun, buildOnce, chunksOf, arrival, satisfies }
