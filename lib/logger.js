'use strict'

// pino, JSON lines on stdout; readable lines when a person watches a terminal.
const pino = require('pino')

function wantsPretty (format, stream = process.stdout) {
  if (format === 'pretty') return true
  if (format === 'json') return false
  return Boolean(stream.isTTY)
}

// No `pid` in the supervisor's base: a line about a worker carries that worker's pid, once (a
// second `pid` key would be dropped by JSON parsers, which keep the last). The supervisor's pid
// is on its `starting` line (`supervisorPid`) and in `pool status`.
function createLogger ({ level = 'info', format = 'auto', base = null } = {}) {
  const options = { level, base }
  if (!wantsPretty(format)) return pino(options, pino.destination({ fd: 1, sync: true }))
  const pretty = require('pino-pretty')({ colorize: process.stdout.isTTY, sync: true, ignore: 'hostname', translateTime: 'HH:MM:ss.l' })
  return pino(options, pretty)
}

module.exports = { createLogger }
