'use strict'

// `npm run layers`: lib's folder graph, the requires between folders counted, and its cycles.

const t = require('tap')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { ROOT } = require('../helpers')
const { cyclesOf } = require('../../scripts/layers')

t.test('cycles: every set of folders that require each other round, and only those', async (t) => {
  const edges = (...pairs) => new Map(pairs.map((p) => [p, 1]))
  t.same(cyclesOf(edges('a → b', 'b → c')), [])
  t.same(cyclesOf(edges('a → b', 'b → c', 'c → a', 'c → d', 'd → e', 'e → d')).sort(), [['a', 'b', 'c'], ['d', 'e']])
})

t.test('the command prints the counts and says there is no cycle', async (t) => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'layers.js')], { encoding: 'utf8' })
  t.equal(r.status, 0, r.stderr)
  t.match(r.stdout, /^requires between lib's folders \(.*\): \d+, over \d+ pairs\n/)
  t.match(r.stdout, /^ +\d+ {2}supervisor → fronts$/m)
  t.match(r.stdout, /\ncycles: none\n$/)
})
