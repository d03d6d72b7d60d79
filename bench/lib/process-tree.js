'use strict'

// The processes of a front, found from its roots (a pool's supervisor, HAProxy, nginx's master,
// cluster's primary, PM2's daemon, a plain process) and every descendant of theirs, read from
// /proc: so the pool's workers and its reaper, nginx's workers, cluster's and PM2's workers all
// count without each front naming them. And their memory: VmRSS (resident pages, shared ones in
// every process that maps them) and Pss from smaps_rollup (each shared page split between the
// processes that map it, so that a sum over processes counts it once).

const fs = require('node:fs')

// pid → ppid of every process now.
function parents () {
  const map = new Map()
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1')
      // The command may hold spaces and parentheses: the fields start after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      map.set(Number(name), Number(fields[1]))
    } catch {}
  }
  return map
}

// The roots and all their descendants, each once, in no particular order.
function tree (roots) {
  const ppid = parents()
  const children = new Map()
  for (const [pid, parent] of ppid) {
    if (!children.has(parent)) children.set(parent, [])
    children.get(parent).push(pid)
  }
  const out = new Set()
  const todo = roots.filter((pid) => ppid.has(pid))
  while (todo.length) {
    const pid = todo.pop()
    if (out.has(pid)) continue
    out.add(pid)
    todo.push(...(children.get(pid) ?? []))
  }
  return [...out]
}

function kb (text, key) {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)
  return m ? Number(m[1]) : null
}

// { pid, name, rssKb, pssKb } of one process, or null once it is gone.
function memoryOf (pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'latin1')
    let pssKb = null
    try { pssKb = kb(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1'), 'Pss') } catch {}
    return { pid, name: /^Name:\s+(.*)$/m.exec(status)?.[1] ?? '?', rssKb: kb(status, 'VmRSS') ?? 0, pssKb }
  } catch { return null }
}

// The memory of the tree of `roots`: { rssKb, pssKb, processes: [{ pid, name, rssKb, pssKb }] }.
function treeMemory (roots) {
  const processes = tree(roots).map(memoryOf).filter(Boolean).sort((a, b) => a.pid - b.pid)
  const sum = (k) => processes.reduce((n, p) => n + (p[k] ?? 0), 0)
  return { rssKb: sum('rssKb'), pssKb: sum('pssKb'), processes }
}

module.exports = { tree, treeMemory, memoryOf }
