'use strict'

// The pool's cost targets, read from one run of bench/costs.js (its result, raw runs): the
// embedded balancer against the minimal Node balancer at each load, its pinned ceiling against
// the minimal balancer's, the HAProxy-mode supervisor per request, an idle supervisor and worker,
// a worker's memory over a plain cluster worker's. Ratios are taken round by round (the fronts
// took turns within a round) and their median given. Used by the part itself (its closing lines)
// and by the report.

const { median } = require('./stats')

const TARGETS = {
  cpuRatio: 1.25, // the embedded balancer's CPU per request ≤ this × the minimal balancer's
  pinnedRatio: 0.8, // what one pinned core of it serves at saturation ≥ this × the minimal balancer's
  haproxySupervisorUs: 20, // the supervisor's µs per request in HAProxy mode
  supervisorIdleMsPerS: 2,
  workerIdleMsPerS: 0.1,
  workerRssOverClusterMb: 1
}

const finite = (x) => typeof x === 'number' && Number.isFinite(x)
const mid = (xs) => { const v = xs.filter(finite); return v.length ? median(v) : null }

// Round by round ratio of `f` on front a's runs to front b's.
function pairedRatio (a, b, f) {
  if (!a || !b) return null
  const n = Math.min(a.runs.length, b.runs.length)
  return mid(Array.from({ length: n }, (_, i) => f(a.runs[i]) / f(b.runs[i])))
}

// [{ what, value, op, target, unit, met }]: one line per figure a target names; value null when
// the run did not measure it.
function costTargets (data) {
  const lines = []
  const add = (what, value, op, target, unit) => lines.push({ what, value, op, target, unit, met: finite(value) ? (op === '≤' ? value <= target : value >= target) : null })
  const cell = (front, load) => data.requests?.find((c) => c.front === front && c.load === load)
  for (const load of data.loads ?? []) {
    add(`embedded CPU/request ÷ minimal, ${load.label}`, pairedRatio(cell('embedded', load.key), cell('minimal', load.key), (x) => x.frontUsPerRequest), '≤', TARGETS.cpuRatio, '×')
  }
  const pinned = (front) => data.pinned?.find((c) => c.front === front)
  add('embedded req/s per pinned core ÷ minimal', pairedRatio(pinned('embedded'), pinned('minimal'), (x) => x.perCore), '≥', TARGETS.pinnedRatio, '×')
  for (const load of data.loads ?? []) {
    const c = cell('haproxy', load.key)
    add(`HAProxy mode: the supervisor's CPU µs/request, ${load.label}`, c ? mid(c.runs.map((x) => x.processes.supervisor?.cpuUsPerRequest)) : null, '≤', TARGETS.haproxySupervisorUs, 'µs')
  }
  const idle = data.idle ?? []
  add('idle supervisor, CPU ms/s', mid(idle.map((x) => x.supervisorMsPerS)), '≤', TARGETS.supervisorIdleMsPerS, 'ms/s')
  add('idle worker, CPU ms/s', mid(idle.map((x) => x.workerMsPerS)), '≤', TARGETS.workerIdleMsPerS, 'ms/s')
  add('a worker\'s RSS over a plain cluster worker\'s', mid(idle.map((x) => x.workerRssMb - x.clusterWorkerRssMb)), '≤', TARGETS.workerRssOverClusterMb, 'MB')
  return lines
}

module.exports = { costTargets, TARGETS }
