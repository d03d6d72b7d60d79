'use strict'

// The benchmark suite in one command: runs every part (bench/report/parts.js), one after the
// other, then writes the report (docs/benchmarks.md with SVG charts in docs/charts/) from the
// results directory alone.
//
//   npm run bench                      the whole suite (about 65 minutes on an idle 2-core machine);
//                                      also rewrites README.md's measured figures
//   npm run bench -- --quick           fewer and shorter runs (about 14 minutes), written apart:
//                                      bench/results/quick/, docs/benchmarks-quick.md, docs/charts-quick/
//   npm run bench -- --only matrix,overhead    those parts, then the whole report again
//   npm run bench -- --report-only     the report from the stored results, nothing measured
//   npm run bench -- --list            the parts and what each measures
//   options: --results DIR, --out FILE.md, --charts DIR
//
// While it runs it prints each part's output, and every 15 s what is running and how long is
// left. Ctrl-C stops the running part and everything it started. Every part takes --quick and
// --results DIR (bench/lib/part.js).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')
const { spawn, spawnSync } = require('node:child_process')
const { PARTS } = require('./report/parts')
const { source } = require('./lib/part')
const { haproxyVersion, HAPROXY_30 } = require('./lib/stack')

const ROOT = path.join(__dirname, '..')
const BENCH_RESULTS = path.join(__dirname, 'results')
const TICK_MS = 15000

function usage () {
  return 'usage: npm run bench -- [--quick] [--only NAME,...] [--report-only] [--list] [--results DIR] [--out FILE.md] [--charts DIR]'
}

function fail (message) {
  process.stderr.write(`bench: ${message}\n${usage()}\n`)
  process.exit(2)
}

function parseArgs (argv) {
  const args = { quick: false, only: null, reportOnly: false, list: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => (argv[i + 1] !== undefined && !argv[i + 1].startsWith('--') ? argv[++i] : fail(`${a} needs a value`))
    if (a === '--quick') args.quick = true
    else if (a === '--report-only') args.reportOnly = true
    else if (a === '--list') args.list = true
    else if (a === '--only') args.only = value().split(',').filter(Boolean)
    else if (a === '--results') args.results = path.resolve(value())
    else if (a === '--out') args.out = path.resolve(value())
    else if (a === '--charts') args.charts = path.resolve(value())
    else if (a === '--help' || a === '-h') { console.log(usage()); process.exit(0) } else fail(`unknown option ${a}`)
  }
  for (const name of args.only ?? []) {
    if (!PARTS.some((p) => p.name === name)) fail(`no part named '${name}' (one of ${PARTS.map((p) => p.name).join(', ')})`)
  }
  if (args.only && args.reportOnly) fail('--only and --report-only do not go together')
  args.results ??= args.quick ? path.join(BENCH_RESULTS, 'quick') : BENCH_RESULTS
  args.out ??= path.join(ROOT, 'docs', args.quick ? 'benchmarks-quick.md' : 'benchmarks.md')
  args.charts ??= path.join(path.dirname(args.out), args.out.endsWith(`${path.sep}benchmarks.md`) ? 'charts' : `charts-${path.basename(args.out, '.md').replace(/^benchmarks-/, '')}`)
  return args
}

// ── what the report says about the machine and the software ──────────────────────────────────

const loadavg = () => os.loadavg().map((l) => Number(l.toFixed(2)))

function firstLine (cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', cwd: ROOT })
  if (r.status !== 0) return null
  return `${r.stdout || ''}${r.stderr || ''}`.split('\n')[0].trim() || null
}

function packageVersion (name) {
  try { return JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version } catch { return null }
}

async function versions () {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  const { commit, dirty } = source(ROOT)
  const { versions: chartVersions } = require('./report/vega')
  return {
    node: process.version,
    haproxy: firstLine(process.env.HAPROXY || '/usr/sbin/haproxy', ['-v'])?.replace(/^HAProxy version (\S+).*/, 'HAProxy $1') ?? null,
    // Debian 13's, for the rows marked HAProxy 3.0 (bench/lib/stack.js).
    haproxy30: haproxyVersion(HAPROXY_30),
    nginx: firstLine(process.env.NGINX || '/usr/sbin/nginx', ['-v'])?.replace(/^nginx version: nginx\//, 'nginx ') ?? null,
    pool: `${pkg.version}${commit ? ` (${commit}${dirty ? ' with local changes' : ''})` : ''}`,
    autocannon: packageVersion('autocannon'),
    pm2: packageVersion('pm2'),
    ...(await chartVersions())
  }
}

function machine () {
  const cpus = os.cpus()
  return { cpus: cpus.length, model: cpus[0]?.model?.trim(), memGb: Number((os.totalmem() / 2 ** 30).toFixed(1)), kernel: `${os.type()} ${os.release()} ${os.arch()}` }
}

// ── time left ────────────────────────────────────────────────────────────────────────────────

const clock = (s) => (s >= 60 ? `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s` : `${Math.round(s)}s`)

// Estimates are corrected by how this machine has done so far (finished parts' actual time over
// their estimate), and the running part by its own progress when it reports any.
function timeLeft (plan, index, elapsedS, fraction, mode, finished) {
  const spent = finished.reduce((a, f) => a + f.seconds, 0)
  const expected = finished.reduce((a, f) => a + f.estimate, 0)
  const speed = expected > 0 ? Math.min(3, Math.max(0.5, spent / expected)) : 1
  const estimate = plan[index].estimate[mode] * speed
  const current = fraction > 0.05 ? elapsedS / fraction - elapsedS : Math.max(estimate - elapsedS, estimate * 0.1)
  const later = plan.slice(index + 1).reduce((a, p) => a + p.estimate[mode] * speed, 0)
  return { current, all: current + later }
}

// ── running one part ─────────────────────────────────────────────────────────────────────────

let running = null // { child, name } of the part running now

function partArgs (args) {
  return [...(args.quick ? ['--quick'] : []), '--results', args.results]
}

// Runs the part's script with its output shown, prefixed by its name. Resolves its exit code.
function runScript (part, argv, onProgress) {
  const child = spawn(process.execPath, [path.join(__dirname, part.script), ...argv], {
    cwd: ROOT,
    // Its own process group, so that a stop reaches whatever it started (HAProxy, nginx...).
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc']
  })
  running = { child, name: part.name }
  const prefix = `  ${part.name} │ `
  for (const stream of [child.stdout, child.stderr]) {
    readline.createInterface({ input: stream }).on('line', (line) => console.log(prefix + line))
  }
  child.on('message', (m) => { if (m && m.benchProgress) onProgress(m.benchProgress) })
  return new Promise((resolve) => child.on('exit', (code, signal) => {
    running = null
    resolve(code ?? (signal ? 128 : 1))
  }))
}

// ── the run ──────────────────────────────────────────────────────────────────────────────────

function readRun (results) {
  try { return JSON.parse(fs.readFileSync(path.join(results, 'run.json'), 'utf8')) } catch { return null }
}

function writeRun (results, record) {
  fs.mkdirSync(results, { recursive: true })
  fs.writeFileSync(path.join(results, 'run.json'), JSON.stringify(record, null, 1) + '\n')
}

async function runParts (args, record) {
  const mode = args.quick ? 'quick' : 'full'
  const plan = PARTS.filter((p) => !args.only || args.only.includes(p.name))
  const total = plan.reduce((a, p) => a + p.estimate[mode], 0)
  console.log(`bench: ${plan.length} part${plan.length > 1 ? 's' : ''} (${plan.map((p) => p.name).join(', ')}), about ${clock(total)} on an idle 2-core machine; results in ${path.relative(ROOT, args.results) || '.'}`)
  const finished = []
  let failures = 0
  for (const [index, part] of plan.entries()) {
    const script = path.join(__dirname, part.script)
    if (!fs.existsSync(script)) {
      console.log(`\n[${index + 1}/${plan.length}] ${part.name}: bench/${part.script} does not exist; skipped`)
      record.parts[part.name] = { status: `skipped: bench/${part.script} does not exist`, command: `node bench/${part.script}`, startedAt: new Date().toISOString() }
      continue
    }
    const argv = partArgs(args)
    const command = `node bench/${part.script}${argv.length ? ' ' + argv.map((a) => (a.startsWith('/') ? path.relative(ROOT, a) : a)).join(' ') : ''}`
    console.log(`\n[${index + 1}/${plan.length}] ${part.name}: ${part.about}\n  $ ${command}`)
    const started = Date.now()
    const startedAt = new Date().toISOString()
    const loadBefore = loadavg()
    const sourceBefore = source(ROOT)
    let fraction = 0
    let step = ''
    const tick = setInterval(() => {
      const elapsed = (Date.now() - started) / 1000
      const left = timeLeft(plan, index, elapsed, fraction, mode, finished)
      console.log(`  ⏱ ${part.name} (${index + 1}/${plan.length})${step ? `, ${step}` : ''}: ${clock(elapsed)} so far, ~${clock(left.current)} left in this part, ~${clock(left.all)} in all`)
    }, TICK_MS)
    const code = await runScript(part, argv, (p) => {
      fraction = p.total > 0 ? p.done / p.total : 0
      step = p.label ?? ''
    })
    clearInterval(tick)
    const seconds = (Date.now() - started) / 1000
    const attempt = { command, startedAt, seconds: Math.round(seconds), loadavgBefore: loadBefore, loadavgAfter: loadavg(), quick: args.quick, source: sourceBefore }
    if (code === 0) record.parts[part.name] = { status: 'ok', ...attempt }
    else {
      // The results of the last run that worked (if any) stay, and say where they come from.
      failures++
      const earlier = record.parts[part.name]?.status === 'ok' ? record.parts[part.name] : { status: 'failed' }
      record.parts[part.name] = { ...earlier, lastFailure: { status: `failed (exit ${code})`, command, startedAt } }
    }
    finished.push({ seconds, estimate: part.estimate[mode] })
    writeRun(args.results, record)
    console.log(`  ${code === 0 ? 'done' : `FAILED (exit ${code})`} in ${clock(seconds)}`)
  }
  return failures
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  if (args.list) {
    for (const p of PARTS) console.log(`${p.name.padEnd(14)} ${p.about} (bench/${p.script}; ~${clock(p.estimate.full)} full, ~${clock(p.estimate.quick)} quick)`)
    return 0
  }
  const previous = readRun(args.results)
  const record = {
    quick: args.quick,
    resultsDir: path.relative(ROOT, args.results),
    startedAt: new Date().toISOString(),
    loadavgStart: loadavg(),
    machine: machine(),
    versions: await versions(),
    parts: { ...(previous?.parts ?? {}) }
  }
  let failures = 0
  if (!args.reportOnly) {
    const stop = (signal) => {
      console.log(`\nbench: ${signal}: stopping ${running ? running.name : ''}...`)
      if (running) {
        const { child } = running
        try { process.kill(-child.pid, 'SIGINT') } catch {}
        setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL') } catch {} }, 15000).unref()
        child.once('exit', () => process.exit(130))
      } else process.exit(130)
    }
    process.on('SIGINT', () => stop('SIGINT'))
    process.on('SIGTERM', () => stop('SIGTERM'))
    failures = await runParts(args, record)
  } else if (previous) {
    // The report describes the run that measured, not the moment it is rewritten: its machine,
    // its versions (the commit measured among them), its times.
    const { startedAt, loadavgStart, loadavgEnd, endedAt, machine, versions } = previous
    Object.assign(record, { startedAt, loadavgStart, loadavgEnd, endedAt, machine: machine ?? record.machine, versions: versions ?? record.versions })
  }
  if (!args.reportOnly) {
    record.endedAt = new Date().toISOString()
    record.loadavgEnd = loadavg()
    writeRun(args.results, record)
  }
  const { buildReport } = require('./report')
  const { outFile, charts } = await buildReport({ resultsDir: args.results, outFile: args.out, chartsDir: args.charts, run: record })
  // README's figures come from these results too, after a full run only (a quick one is not
  // for conclusions), when the report is the project's own.
  const readme = path.join(ROOT, 'README.md')
  const summarized = !args.quick && outFile === path.join(ROOT, 'docs', 'benchmarks.md') && require('./report/summary').writeSummary(args.results, readme)
  console.log(`\nbench: wrote ${path.relative(ROOT, outFile)}${summarized ? ', README.md\'s measured figures' : ''} and ${charts.length} charts in ${path.relative(ROOT, args.charts)}/` +
    (failures ? `; ${failures} part${failures > 1 ? 's' : ''} failed (see above)` : ''))
  return failures ? 1 : 0
}

main().then((code) => process.exit(code), (err) => {
  console.error(err)
  process.exit(1)
})
