'use strict'

// What /proc tells of a process; a pid with its start time names one process. Null where /proc cannot tell.

const fs = require('node:fs')

// { state, pgrp, session, startTime }
function readStat (pid) {
  let text
  try { text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1') } catch { return null }
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ') // fields 3.. (comm may hold spaces)
  return { state: f[0], pgrp: Number(f[2]), session: Number(f[3]), startTime: f[19] }
}

// { user, system } in µs, `at` in ms. From /proc: a worker blocked in a render reports nothing.
const TICKS_PER_SECOND = 100 // USER_HZ: 100 on every Linux architecture Node runs on

function cpuTime (pid, now = performance.now()) {
  let text
  try { text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1') } catch { return null }
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ')
  const toMicros = (ticks) => Number(ticks) * (1e6 / TICKS_PER_SECOND)
  return { user: toMicros(f[11]), system: toMicros(f[12]), at: now }
}

// Live (non-zombie) processes of session `sid`: Map pid → start time.
function sessionMembers (sid) {
  let names
  try { names = fs.readdirSync('/proc') } catch { return null }
  const members = new Map()
  for (const name of names) {
    const pid = Number(name)
    if (!Number.isInteger(pid)) continue
    const stat = readStat(pid)
    if (stat && stat.session === sid && stat.state !== 'Z') members.set(pid, stat.startTime)
  }
  return members
}

module.exports = { readStat, cpuTime, sessionMembers }
