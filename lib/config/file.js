'use strict'

// `pool start --config FILE` (and `pool config TARGET --config FILE`): a pool's settings kept in
// a file, as operators keep a gunicorn.conf.py or a PM2 ecosystem file. The file is JSON, or a
// CommonJS module (.js, .cjs) exporting an object. Its keys are the library's option names
// (camelCase, as `new Pool()` takes them) plus `app` and `balancer`; its values are typed as in
// the library (durations in milliseconds, ports and counts as numbers), not text as on the
// command line, except sizes: bytes, or text with a unit as nginx writes sizes ("512k", "8m").
// Everything wrong with the file is one PoolError naming the file (BAD_OPTION: the CLI exits 2
// before anything starts).

const fs = require('node:fs')
const path = require('node:path')
const { OPTIONS, checkOption, parseSize } = require('../options/table')
const { FRONTS, available, DEFAULT_FRONT } = require('../fronts/registry')
const { closest } = require('../shared/closest')
const { poolError, codes } = require('../errors')
const { removedOption } = require('../options/removed')

function fileError (file, message) {
  return poolError(codes.BAD_OPTION, `${file}: ${message}`)
}

// Returns { file, path, values }: `file` as the user named it (for messages), its absolute
// path, and the checked values, `app` made absolute (relative to the file's directory, so the
// file works from any directory), keys set to null dropped (null means "the default").
function readConfigFile (file, { cwd = process.cwd() } = {}) {
  const abs = path.resolve(cwd, file)
  const raw = load(file, abs)
  const values = {}
  for (const [key, value] of Object.entries(raw)) if (value !== null) values[key] = value
  checkValues(file, values)
  if (values.app !== undefined) values.app = path.resolve(path.dirname(abs), values.app)
  return { file, path: abs, values }
}

function load (file, abs) {
  const ext = path.extname(abs)
  if (!['.json', '.js', '.cjs'].includes(ext)) {
    throw fileError(file, 'a config file is .json, or .js/.cjs (a CommonJS module exporting an object)')
  }
  let stat
  try {
    stat = fs.statSync(abs)
  } catch (err) {
    throw fileError(file, err.code === 'ENOENT' ? `no such file (looked for ${abs})` : `cannot read it: ${err.message}`)
  }
  if (!stat.isFile()) throw fileError(file, 'not a file')
  const exported = ext === '.json' ? loadJson(file, abs) : loadModule(file, abs)
  if (exported === null || typeof exported !== 'object' || Array.isArray(exported)) {
    throw fileError(file,
      `must ${ext === '.json' ? 'hold' : 'export'} an object of options, like { "workers": 4 } ` +
        `(got ${kindOf(exported)})`)
  }
  return exported
}

function loadJson (file, abs) {
  let text
  try {
    text = fs.readFileSync(abs, 'utf8')
  } catch (err) {
    throw fileError(file, `cannot read it: ${err.message}`)
  }
  try {
    return JSON.parse(text)
  } catch (err) {
    throw fileError(file,
      `invalid JSON${where(text, err.message)}: ${err.message.replace(/ in JSON at position \d+.*$/, '')}`)
  }
}

// " at line 3, column 5", from the position JSON.parse names (its message has no line before
// Node 21).
function where (text, message) {
  const m = / at position (\d+)/.exec(message)
  if (!m) return ''
  const before = text.slice(0, Number(m[1]))
  const line = before.split('\n').length
  return ` at line ${line}, column ${before.length - before.lastIndexOf('\n')}`
}

function loadModule (file, abs) {
  try {
    return require(abs)
  } catch (err) {
    if (err instanceof SyntaxError) {
      // Node puts "FILE:LINE" on the first line of a syntax error's stack.
      const line = new RegExp(`^${escape(abs)}:(\\d+)`).exec(err.stack || '')?.[1]
      throw fileError(line ? `${file}:${line}` : file, `SyntaxError: ${err.message}`)
    }
    throw fileError(file, `loading it threw: ${err.message}`)
  }
}

function escape (s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

function kindOf (x) {
  if (x === null) return 'null'
  if (Array.isArray(x)) return 'an array'
  if (typeof x === 'function') return 'a function'
  return `${typeof x} ${JSON.stringify(x)}`
}

// Every key known, each value of its option's type; a front's option only with that front.
function checkValues (file, values) {
  const fronts = {}
  for (const name of available()) fronts[name] = FRONTS[name].options()
  const frontOf = new Map()
  for (const [name, table] of Object.entries(fronts)) for (const key of Object.keys(table)) frontOf.set(key, name)
  const known = new Set(['app', 'balancer', ...Object.keys(OPTIONS), ...frontOf.keys()])
  for (const key of Object.keys(values)) {
    if (known.has(key)) continue
    const removed = removedOption(key)
    if (removed) throw fileError(file, removed)
    const near = closest(key, known)
    throw fileError(file,
      `unknown key ${key}${near ? ` (did you mean ${near}?)` : ''}; the keys are the library's option names, as in ` +
        'new Pool(), plus app and balancer')
  }
  const { app, balancer = DEFAULT_FRONT } = values
  if (app !== undefined && (typeof app !== 'string' || app === '')) {
    throw fileError(file, `app must be a non-empty string, the app's path (got ${JSON.stringify(app)})`)
  }
  if (!Object.hasOwn(fronts, balancer)) {
    throw fileError(file, `balancer must be one of ${Object.keys(fronts).join(', ')} (got ${JSON.stringify(balancer)})`)
  }
  for (const [key, value] of Object.entries(values)) {
    if (key === 'app' || key === 'balancer') continue
    const front = frontOf.get(key)
    if (front && front !== balancer) {
      throw fileError(file,
        `${key} is an option of balancer ${front}, and this file's balancer ` +
          `is ${balancer}${values.balancer === undefined ? ' (the default)' : ''}`)
    }
    values[key] = checkValue(file, key, front ? fronts[front][key] : OPTIONS[key], value)
  }
}

// The value, checked; a size given as text ("8m") in bytes.
function checkValue (file, key, spec, value) {
  if (spec.kind === 'duration' && typeof value === 'string') {
    throw fileError(file,
      `${key} is a number of milliseconds in a config file, as in the library (got ${JSON.stringify(value)})`)
  }
  if (spec.kind === 'size' && typeof value === 'string') {
    try {
      value = parseSize(value, spec.flag)
    } catch {
      throw fileError(file,
        `${key} must be a number of bytes, or a size like "512k", "8m" or "1g" (got ${JSON.stringify(value)})`)
    }
  }
  try {
    checkOption(key, spec, value)
  } catch (err) {
    throw fileError(file, err.message)
  }
  return value
}

module.exports = { readConfigFile }
