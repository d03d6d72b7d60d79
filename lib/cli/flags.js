'use strict'

// Turn an options table (lib/options.js format) into yargs flags, and parsed flags back into
// library options. Numbers are parsed here rather than by yargs so that `-n abc` says what
// was wrong with `abc` instead of a silent NaN.

const { parseDuration } = require('../options')
const { poolError, codes } = require('../errors')

function describeDefault (spec) {
  if (spec.defaultText) return spec.defaultText
  const d = spec.default
  if (typeof d === 'function') return undefined
  if (d === undefined || d === null) return 'none'
  if (spec.kind === 'duration') return d === Infinity ? 'none' : d % 1000 === 0 ? `${d / 1000}s` : `${d}ms`
  return String(d)
}

function toYargs (table) {
  const out = {}
  for (const spec of Object.values(table)) {
    out[spec.flag] = {
      type: spec.kind === 'bool' ? 'boolean' : spec.kind === 'list' ? 'array' : 'string',
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

function convert (spec, raw) {
  const bad = (what) => poolError(codes.BAD_OPTION, `--${spec.flag} ${what} (got '${raw}')`)
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
    case 'duration': return parseDuration(raw, spec.flag)
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

module.exports = { toYargs, fromArgv, describeDefault }
