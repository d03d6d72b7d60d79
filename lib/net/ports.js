'use strict'

// The kernel's ephemeral ports (ip_local_port_range less ip_local_reserved_ports): a worker's port there
// may be taken as a source port while its worker is down, and the respawn cannot listen.

const fs = require('node:fs')

const RANGE = '/proc/sys/net/ipv4/ip_local_port_range'
const RESERVED = '/proc/sys/net/ipv4/ip_local_reserved_ports'

function read (file) {
  try { return fs.readFileSync(file, 'utf8').trim() } catch { return null }
}

function ephemeralRange (text = read(RANGE)) {
  const [low, high] = String(text ?? '').split(/\s+/).map(Number)
  return Number.isInteger(low) && Number.isInteger(high) && low <= high ? { low, high } : null
}

// [[from, to], ...] from "1000-1005,2000".
function reservedRanges (text = read(RESERVED)) {
  if (!text) return []
  return text.split(',').map((part) => part.split('-').map(Number)).filter(([a]) => Number.isInteger(a)).map(([a,
    b]) => [a, b ?? a])
}

// The first and last of ports first..last that the kernel may hand out, or null when none is.
function ephemeralOverlap (first, last, { range = ephemeralRange(), reserved = reservedRanges() } = {}) {
  if (!range) return null
  const free = []
  for (let p = Math.max(first, range.low); p <= Math.min(last, range.high); p++) {
    if (!reserved.some(([a, b]) => p >= a && p <= b)) free.push(p)
  }
  return free.length > 0 ? { first: free[0], last: free.at(-1), range } : null
}

module.exports = { ephemeralRange, reservedRanges, ephemeralOverlap }
