'use strict'

// What a process has used, read from /proc: CPU time to the nanosecond (every thread's
// schedstat, so that an idle cost of a tenth of a millisecond per second shows in a run of
// seconds), its wakes, its memory. Each reading is null once the process is gone.

const fs = require('node:fs')

// CPU time used so far by every thread of `pid`, in ns.
function cpuNs (pid) {
  let tids
  try { tids = fs.readdirSync(`/proc/${pid}/task`) } catch { return null }
  let total = 0
  for (const tid of tids) {
    try { total += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[0]) } catch {}
  }
  return total
}

// How often the process's main thread has slept and been woken so far (its voluntary context
// switches).
function wakes (pid) {
  try { return Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) } catch { return null }
}

function rssMb (pid) {
  try { return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) / 1024 } catch { return null }
}

// The process's own memory (private pages), in MB: what it costs besides the pages of the node
// binary and its snapshot, which every Node process on the machine shares.
function privateMb (pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1')
    const kb = (key) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? 0)
    return (kb('Private_Clean') + kb('Private_Dirty')) / 1024
  } catch { return null }
}

function threads (pid) {
  try { return fs.readdirSync(`/proc/${pid}/task`).length } catch { return null }
}

// CPU per second of each pid over `seconds` of wall time, in ms/s.
async function cpuRates (pids, seconds) {
  const before = pids.map(cpuNs)
  const t0 = performance.now()
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
  const wall = (performance.now() - t0) / 1000
  return pids.map((pid, i) => (cpuNs(pid) - before[i]) / 1e6 / wall)
}

module.exports = { cpuNs, wakes, rssMb, privateMb, threads, cpuRates }
