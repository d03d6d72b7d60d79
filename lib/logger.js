'use strict'

// pino, JSON lines on stdout; readable lines when a person watches a terminal.
const pino = require('pino')

function wantsPretty (format, stream = process.stdout) {
  if (format === 'pretty') return true
  if (format === 'json') return false
  return Boolean(stream.isTTY)
}

function createLogger ({ level = 'info', format = 'auto', base } = {}) {
  const options = { level, base: base === undefined ? { pid: process.pid } : base }
  if (!wantsPretty(format)) return pino(options, pino.destination({ fd: 1, sync: true }))
  const pretty = require('pino-pretty')({ colorize: process.stdout.isTTY, sync: true, ignore: 'hostname', translateTime: 'HH:MM:ss.l' })
  return pino(options, pretty)
}

module.exports = { createLogger }
