#!/usr/bin/env node
'use strict'

// `npm run layers [-- DIR]`: lib's folder graph as dependency-cruiser reads it (DIR: another
// checkout, by default this one): how many require() calls go from each folder of lib/ to each
// other one (lib/'s own files count as the folder "lib"), and the folders that form a cycle.
// The rules that keep the layers are in .dependency-cruiser.js; this only shows the graph.

const path = require('node:path')

// { edges: Map "from → to" → count, cycles: [[folder...]] } for the checkout at `root`.
async function folderGraph (root) {
  const { cruise } = await import('dependency-cruiser')
  const cwd = process.cwd()
  process.chdir(root)
  let result
  try {
    result = (await cruise(['lib'], { includeOnly: '^lib/', moduleSystems: ['cjs'] })).output
  } finally {
    process.chdir(cwd)
  }
  const folderOf = (file) => /^lib\/([^/]+)\//.exec(file)?.[1] ?? 'lib'
  const edges = new Map()
  for (const m of result.modules) {
    for (const d of m.dependencies) {
      const [from, to] = [folderOf(m.source), folderOf(d.resolved)]
      if (from === to) continue
      const key = `${from} → ${to}`
      edges.set(key, (edges.get(key) ?? 0) + 1)
    }
  }
  return { edges, cycles: cyclesOf(edges) }
}

// The strongly connected components of more than one folder (Tarjan).
function cyclesOf (edges) {
  const next = new Map()
  for (const key of edges.keys()) {
    const [from, to] = key.split(' → ')
    if (!next.has(from)) next.set(from, [])
    if (!next.has(to)) next.set(to, [])
    next.get(from).push(to)
  }
  let counter = 0
  const index = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const cycles = []
  const visit = (v) => {
    index.set(v, counter)
    low.set(v, counter++)
    stack.push(v)
    onStack.add(v)
    for (const w of next.get(v)) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), index.get(w)))
      }
    }
    if (low.get(v) !== index.get(v)) return
    const component = []
    let w
    do {
      w = stack.pop()
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1) cycles.push(component.sort())
  }
  for (const v of next.keys()) if (!index.has(v)) visit(v)
  return cycles
}

async function main () {
  const root = path.resolve(process.argv[2] ?? path.join(__dirname, '..'))
  const { edges, cycles } = await folderGraph(root)
  const lines = [...edges].sort(([a], [b]) => a.localeCompare(b)).map(([key, n]) => `${String(n).padStart(4)}  ${key}`)
  const total = [...edges.values()].reduce((a, b) => a + b, 0)
  process.stdout.write(`requires between lib's folders (${root}): ${total}, over ${edges.size} pairs\n${lines.join('\n')}\n`)
  process.stdout.write(cycles.length === 0 ? 'cycles: none\n' : `cycles: ${cycles.map((c) => `{ ${c.join(', ')} }`).join(' ')}\n`)
}

if (require.main === module) main().catch((err) => { process.stderr.write(`layers: ${err.stack}\n`); process.exitCode = 1 })

module.exports = { folderGraph, cyclesOf }
