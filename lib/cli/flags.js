'use strict'

// Turn an options table into yargs flags, and flags or POOL_* environment variables back into
// library options. Values are parsed here rather than by yargs
// so that `-n abc` says what was wrong with `abc` instead of a silent NaN, and so that a flag and
// its environment variable are parsed alike.

const { parseDuration, parseSize, formatSize } = require('../options/table')
const { poolError, codes } = require('../errors')

const NUMERIC = new Set(['count', 'int', 'port', 'port-or-off', 'number'])

function describeDefault (spec) {
  if (spec.defaultText) return spec.defaultText
  const d = spec.default
  if (typeof d === 'function') return undefined
  if (d === undefined || d === null) return 'none'
  if (spec.kind === 'duration') return d === Infinity ? 'none' : d % 1000 === 0 ? `${d / 1000}s` : `${d}ms`
  if (spec.kind === 'size') return formatSize(d)
  return String(d)
}

// yargs shows the type it parses with. Numbers are declared both 'number' (what --help shows)
// and 'string' (which stops yargs converting them, so convert() sees the text as typed); a
// duration or a size gets no type at all (it is text like 500ms or 8m, and its default says
// so); the CLI turns
// yargs' own number parsing off for everything else (see index.js).
function yargsType (kind) {
  if (kind === 'bool') return { type: 'boolean' }
  if (kind === 'list') return { type: 'array' }
  if (NUMERIC.has(kind)) return { type: 'number', string: true }
  if (kind === 'duration' || kind === 'size') return {}
  return { type: 'string' }
}

function toYargs (table) {
  const out = {}
  for (const spec of Object.values(table)) {
    out[spec.flag] = {
      ...yargsType(spec.kind),
      describe: spec.describe,
      group: spec.group ? `${spec.group}:` : undefined,
      alias: spec.alias,
      choices: spec.choices,
      defaultDescription: describeDefault(spec),
      requiresArg: spec.kind !== 'bool'
    }
  }
  return out
}

const WHOLE_NUMBER = {
  count: 'must be a positive integer',
  int: 'must be a whole number >= 0',
  port: 'must be a port number 1-65535',
  'port-or-off': 'must be a port number 1-65535, or 0 for off'
}

const TRUE = new Set(['true', '1', 'yes', 'on'])
const FALSE = new Set(['false', '0', 'no', 'off'])

// `label` names where the value came from in errors: `--timeout` or `POOL_TIMEOUT`.
function convert (spec, raw, label = `--${spec.flag}`) {
  const bad = (what) => poolError(codes.BAD_OPTION, `${label} ${what} (got '${raw}')`)
  if (spec.kind === 'list') return [].concat(raw).map(String)
  if (Array.isArray(raw)) throw bad('was given more than once')
  switch (spec.kind) {
    case 'count':
    case 'int':
    case 'port':
    case 'port-or-off': {
      if (!/^\s*\d+\s*$/.test(String(raw))) throw bad(WHOLE_NUMBER[spec.kind])
      return Number(raw)
    }
    case 'number': {
      const n = Number(raw)
      if (String(raw).trim() === '' || !Number.isFinite(n)) throw bad('must be a number')
      return n
    }
    case 'duration':
      try {
        return parseDuration(raw, spec.flag)
      } catch {
        throw bad('must be a duration like 30, 2.5s or 500ms')
      }
    case 'size':
      try {
        return parseSize(raw, spec.flag)
      } catch {
        throw bad('must be a size like 1048576, 512k, 8m or 1g')
      }
    case 'choice':
      if (!spec.choices.includes(raw)) throw bad(`must be one of ${spec.choices.join(', ')}`)
      return raw
    case 'bool':
      if (typeof raw === 'boolean') return raw
      if (TRUE.has(String(raw).toLowerCase())) return true
      if (FALSE.has(String(raw).toLowerCase())) return false
      throw bad('must be true or false')
    default: return raw
  }
}

// yargs camel-cases flags, so argv[name] is there for every table key.
function fromArgv (argv, table) {
  const out = {}
  for (const [name, spec] of Object.entries(table)) {
    const raw = argv[spec.flag]
    if (raw === undefined) continue
    out[name] = convert(spec, raw)
  }
  return out
}

// The environment variable of a flag: POOL_ and the flag in capitals, '-' as '_'
// (--worker-port: POOL_WORKER_PORT).
function envName (flag) {
  return `POOL_${flag.toUpperCase().replace(/-/g, '_')}`
}

// Values are text, parsed as on the command line; a list (a repeatable flag) is comma-separated.
// An empty variable counts as unset, as the shell's `POOL_X= pool start` means.
function fromEnv (env, table) {
  const out = {}
  for (const [name, spec] of Object.entries(table)) {
    const raw = env[envName(spec.flag)]
    if (raw === undefined || raw === '') continue
    const value = spec.kind === 'list' ? raw.split(',').map((s) => s.trim()).filter(Boolean) : raw
    out[name] = convert(spec, value, envName(spec.flag))
  }
  return out
}

module.exports = { toYargs, fromArgv, fromEnv, envName, describeDefault }
