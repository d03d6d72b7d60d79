'use strict'

// docs/architecture.md draws lib's layers as the code has them: the drawing, the layers the
// rules are written from (.dependency-cruiser.js) and the folder graph dependency-cruiser reads
// from the code agree, every folder of lib/ is drawn once, and every require() between folders
// goes down the drawing.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { ROOT } = require('../helpers')
const { folderGraph } = require('../../scripts/layers')
const { LAYERS } = require('../../.dependency-cruiser')

const doc = fs.readFileSync(path.join(ROOT, 'docs', 'architecture.md'), 'utf8')

// The drawing's rows, bottom first: each a list of folders ('errors.js' stands for lib/'s files).
function drawnLayers () {
  const block = /```layers\n([\s\S]*?)```/.exec(doc)
  if (!block) return null
  return block[1].trim().split('\n').reverse().map((line) => {
    const names = []
    for (const cell of line.trim().split(/\s{2,}/)) {
      if (!/^([a-z-]+\/|[a-z-]+\.js)$/.test(cell)) break
      names.push(cell.replace(/\/$/, ''))
    }
    return names
  })
}

t.test('the drawing is the layers the rules are written from, and every folder of lib/ is in it once', async (t) => {
  const drawn = drawnLayers()
  t.ok(drawn, 'docs/architecture.md has a ```layers drawing')
  t.same(drawn.map((row) => row.filter((name) => !name.endsWith('.js'))), LAYERS,
    'the same rows, bottom first, as .dependency-cruiser.js')
  const folders = fs.readdirSync(path.join(ROOT, 'lib'), { withFileTypes: true }).filter((e) => e.isDirectory())
    .map((e) => e.name).sort()
  t.same(drawn.flat().filter((name) => !name.endsWith('.js')).sort(), folders, 'each folder of lib/, once')
})

t.test('every require() between lib\'s folders goes down the drawing: no cycle', async (t) => {
  const drawn = drawnLayers() ?? []
  // lib/'s files: the very bottom
  const rowOf = (folder) => folder === 'lib' ? -1 : drawn.findIndex((row) => row.includes(folder))
  const { edges, cycles } = await folderGraph(ROOT)
  t.same(cycles, [], 'no cycle between folders')
  const upward = [...edges.keys()].filter((key) => {
    const [from, to] = key.split(' → ')
    return !(rowOf(to) < rowOf(from))
  })
  t.same(upward, [], 'each edge from a row to a lower one')
})
