'use strict'

// What every part of the suite that bench/run.js runs has in common: its options (`--quick`,
// `--results DIR`, and its own `--key value` pairs), progress reports to run.js, the machine it
// ran on, its result file, and a clean stop on Ctrl-C.
//
// A part's result is bench/results/NAME.json (or DIR/NAME.json):
//   { part, version: 2, quick, command, startedAt, endedAt, machine, source, config, ...data }
// with raw numbers, so that the report can be rebuilt from it alone: `machine` has the CPU model,
// the cores and the load average before and after; `source` the commit the part ran on and
// whether the tree had changes (untracked files count). Cells measured several times keep
// each run (`runs: [...]`); the report takes their median and interval (bench/lib/stats.js).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { stopAll } = require('./procs')

const DEFAULT_RESULTS = path.join(__dirname, '..', 'results')

// `defaults`: { key: value } with numbers, strings, or arrays (comma lists on the command line).
function parseArgs (argv, defaults) {
  const args = { quick: false, results: DEFAULT_RESULTS, ...defaults }
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '')
    if (key === 'quick') { args.quick = true; continue }
    const value = argv[++i]
    if (!(key in args) || value === undefined) throw new Error(`unknown option or missing value: ${argv[i - 1]} (known: --quick, ${Object.keys(defaults).map((k) => `--${k}`).join(', ')}, --results)`)
    const d = defaults[key]
    args[key] = Array.isArray(d) ? value.split(',').map((v) => (typeof d[0] === 'number' ? Number(v) : v)) : typeof d === 'number' ? Number(value) : value
  }
  return args
}

// Fill in what --quick changes, unless given on the command line.
function applyQuick (args, argv, quickDefaults) {
  if (!args.quick) return args
  for (const [key, value] of Object.entries(quickDefaults)) if (!argv.includes(`--${key}`)) args[key] = value
  return args
}

const loadavg = () => os.loadavg().map((l) => Number(l.toFixed(2)))

function machine () {
  const cpus = os.cpus()
  return { cpus: cpus.length, model: cpus[0]?.model?.trim(), memGb: Number((os.totalmem() / 2 ** 30).toFixed(1)), kernel: `${os.type()} ${os.release()}`, node: process.version }
}

// The commit the bench runs on, and whether the tree differs from it: modified, staged or
// untracked files (a new file can change what is measured as much as an edit), except what the
// suite itself writes (results, the report and its charts), which earlier parts of the same run
// have just changed.
const MAX_PATHS_NAMED = 10
const WRITTEN_BY_THE_SUITE = [':!bench/results', ':!docs/benchmarks*.md', ':!docs/charts*']

function source (cwd = path.join(__dirname, '..', '..')) {
  const git = (...a) => spawnSync('git', a, { cwd, encoding: 'utf8' })
  const commit = git('rev-parse', '--short', 'HEAD')
  if (commit.status !== 0) return { commit: null, dirty: null, changedFiles: null, changedPaths: null }
  const changed = git('status', '--porcelain', '--untracked-files=all', '--', '.', ...WRITTEN_BY_THE_SUITE).stdout.split('\n').filter(Boolean)
  // Their paths too (the first few), so that a reader can tell an edit to the docs from one to
  // the code measured.
  const changedPaths = changed.slice(0, MAX_PATHS_NAMED).map((line) => line.slice(3))
  return { commit: commit.stdout.trim(), dirty: changed.length > 0, changedFiles: changed.length, changedPaths }
}

// Runs `run(cell, repeat)` for every cell, `repeats` times, the cells taking turns (repeat 1
// visits them all, then repeat 2...), each repeat starting one cell further along: a change in
// the machine's background load then falls on every cell alike rather than on whichever ran last.
async function interleaved ({ repeats, cells, run, label = (c) => String(c) }) {
  const total = repeats * cells.length
  let done = 0
  for (let r = 0; r < repeats; r++) {
    for (let k = 0; k < cells.length; k++) {
      const cell = cells[(k + r) % cells.length]
      progress(done, total, `${label(cell)}, run ${r + 1}/${repeats}`)
      await run(cell, r)
      done++
    }
  }
  progress(total, total, 'done')
}

// Progress for run.js's estimate of the time left (ignored when run by hand).
function progress (done, total, label) {
  if (process.send && process.connected) process.send({ benchProgress: { done, total, label } })
}

function log (line) { console.log(line) }

// Runs `main(args)` with the stop-everything path on errors and signals; `main` resolves the
// part's data, written with the envelope to RESULTS/NAME.json.
function runPart (name, { defaults, quick = {}, main }) {
  const argv = process.argv.slice(2)
  const started = new Date()
  const loadStart = loadavg()
  const sourceAtStart = source()
  let args
  try {
    args = applyQuick(parseArgs(argv, defaults), argv, quick)
  } catch (err) {
    console.error(err.message)
    process.exit(2)
  }
  const onSignal = () => stopAll().then(() => process.exit(130))
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  main(args).then(async (data) => {
    await stopAll()
    const { results, quick: isQuick, ...config } = args
    const envelope = {
      part: name,
      version: 2,
      quick: isQuick,
      command: `node bench/${name}.js${argv.length ? ' ' + argv.join(' ') : ''}`,
      startedAt: started.toISOString(),
      endedAt: new Date().toISOString(),
      machine: { ...machine(), loadavgStart: loadStart, loadavgEnd: loadavg() },
      source: sourceAtStart,
      config,
      ...data
    }
    fs.mkdirSync(results, { recursive: true })
    const file = path.join(results, `${name}.json`)
    fs.writeFileSync(file, JSON.stringify(envelope, null, 1) + '\n')
    log(`(written to ${path.relative(process.cwd(), file)})`)
    process.exit(0) // nothing measured is left; do not wait for stray timers or sockets
  }).catch(async (err) => {
    console.error(err)
    await stopAll()
    process.exit(1)
  })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const round = (x, digits = 2) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null)

module.exports = { runPart, progress, interleaved, source, machine, sleep, round, log }
