'use strict'

// index.d.ts against the option tables and the TypeScript compiler: every option the library
// accepts is typed, with the right kind of value; what the library refuses does not compile.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { ROOT, tempDir } = require('../helpers')
const { OPTIONS: POOL } = require('../../lib/options/table')
const { OPTIONS: EMBEDDED } = require('../../lib/fronts/balancer')
const { OPTIONS: HAPROXY } = require('../../lib/fronts/haproxy/options')

const TSC = path.join(ROOT, 'node_modules', '.bin', 'tsc')

// A sample value of each kind, as TypeScript source.
const SAMPLE = {
  count: '2',
  int: '0',
  port: '9001',
  'port-or-off': '0',
  duration: '1000',
  number: '1.5',
  string: "'x'",
  bool: 'true'
}
const sample = (spec) => spec.kind === 'choice' ? `'${spec.choices[0]}'` : SAMPLE[spec.kind]
const literal = (table, skip = []) => Object.entries(table).filter(([k]) => !skip.includes(k))
  .map(([k, spec]) => `  ${k}: ${sample(spec)},`).join('\n')

// Compile `source` (a .ts file importing the package) with --strict; { ok, output }.
function compile (t, source) {
  const dir = tempDir(t, 'pool-types-')
  const file = path.join(dir, 'use.ts')
  fs.writeFileSync(file, `import { Pool, PoolOptions, codes } from ${JSON.stringify(ROOT)}\n${source}\n`)
  const r = spawnSync(TSC,
    ['--noEmit', '--strict', '--esModuleInterop', '--module', 'commonjs', '--moduleResolution', 'node', '--target',
      'es2022', '--types', 'node', '--typeRoots', path.join(ROOT, 'node_modules', '@types'), file],
    { encoding: 'utf8', timeout: 60000, cwd: ROOT })
  return { ok: r.status === 0, output: (r.stdout || '') + (r.stderr || '') }
}

t.test('every option of every table is typed, with its kind', async (t) => {
  const source = `
const supervisor: PoolOptions = {
${literal(POOL, ['control'])}
  app: 'app.js',
  balancer: 'embedded',
${literal(EMBEDDED)}
}
const haproxy: PoolOptions = {
  app: 'app.js',
  balancer: 'haproxy',
${literal(HAPROXY)}
}
const pool = new Pool(supervisor)
pool.start().then((p) => {
  const s = p.status()
  const n: number = s.queue
  const stats: string | null = s.stats
  return [n, stats, haproxy, codes.BAD_OPTION]
})
`
  const r = compile(t, source)
  t.ok(r.ok, 'compiles', { output: r.output })
})

t.test('what the library refuses does not compile', async (t) => {
  // Each refused for its own reason, named in tsc's message (not for some other error).
  const cases = {
    'a misspelt option': ["new Pool({ app: 'a.js', gracefullTimeout: 1 })", /gracefullTimeout/],
    "the balancer's options without balancer": ["new Pool({ app: 'a.js', port: 9001 })",
      /port: number; }' is not assignable/],
    'HAProxy without its socket': ["new Pool({ app: 'a.js', balancer: 'haproxy' })", /haproxySocket/],
    'a duration as a string': ["new Pool({ app: 'a.js', timeout: '30s' })",
      /'string' is not assignable to type 'number'/],
    'no app': ['new Pool({ workers: 2 })', /'app'/]
  }
  // One compile: case i on line i + 2 of the file (after the import); errors are mapped back.
  const entries = Object.entries(cases)
  const r = compile(t, entries.map(([, [line]]) => line).join('\n'))
  t.notOk(r.ok, 'refused by tsc')
  const errors = r.output.split(/\n(?=\S)/).filter((e) => / error TS/.test(e))
  for (const [i, [what, [, reason]]] of entries.entries()) {
    const mine = errors.filter((e) => e.includes(`use.ts(${i + 2},`))
    t.equal(mine.length, 1, `${what}: refused, once`, { output: r.output })
    t.match(mine[0], reason, `${what}: for that reason`)
  }
})

t.test('a front of your own (`fronts`) is typed, with the FrontContext it is started with', async (t) => {
  const source = `
import type { Front, FrontContext } from ${JSON.stringify(ROOT)}
import { Counter } from ${JSON.stringify(path.join(ROOT, 'node_modules', 'prom-client'))}
class Mine implements Front {
  name = 'mine'
  ports: number[] = []
  async start (context: FrontContext) {
    context.logger.info('starting')
    const seen = new Counter({ name: 'mine_seen_total', help: 'x', registers: [context.metrics.registry] })
    seen.inc()
    context.metrics.failures.inc({ reason: 'mine_failed' })
    this.ports = context.workers().map((w) => context.portOf(w.slot)).slice(0, context.target())
  }
  workerReady () {}
  workerGone () {}
  async drain () {}
  async stop () {}
  status () { return { type: 'mine' } }
  async checkScale (n: number) { if (n > 8) throw new Error('no') }
}
const pool = new Pool({ app: 'app.js', fronts: [new Mine()] })
void pool
`
  const r = compile(t, source)
  t.ok(r.ok, 'compiles', { output: r.output })
})
