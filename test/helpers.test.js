'use strict'
// The suite's own port picker (helpers.js freePorts): a port is handed out once per test file,
// bound or not, so that two parts of one test never get the same one.
const t = require('tap')
const { freePorts } = require('./helpers')

t.test('a port given and not yet bound is not given again, even from the same draw', async (t) => {
  const random = Math.random
  t.teardown(() => { Math.random = random })
  const draws = [0.5, 0.5, 0.5 + 1e-3]
  Math.random = () => draws.shift() ?? random()
  const lab = await freePorts(4) // as a lab HAProxy's ports, none bound: its servers wait for a pool
  const other = await freePorts(2)
  t.equal(draws.length, 0, 'the repeated draw was taken, then left for the next')
  t.notOk(other.some((p) => lab.includes(p)), `${other} share none of ${lab}`)
})

t.test('calls made at once, drawing the same base, get runs apart', async (t) => {
  const random = Math.random
  t.teardown(() => { Math.random = random })
  let same = 20
  Math.random = () => same-- > 0 ? 0.25 : random()
  const runs = await Promise.all(Array.from({ length: 20 }, () => freePorts(3)))
  const all = runs.flat()
  t.equal(new Set(all).size, all.length, 'no port twice')
})
