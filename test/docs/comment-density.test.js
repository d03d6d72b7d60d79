'use strict'

// Comments in lib/ at the density of the projects this one learns from (pino about 0.19, fastify
// 0.11 comment lines per code line): at most MAX whole comment lines per line of code, counted
// over lib/ (blank lines are neither; a trailing comment on a code line counts as code).

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')

const LIB = path.join(__dirname, '..', '..', 'lib')
const MAX = 0.18

function count (file) {
  let comments = 0
  let code = 0
  let inBlock = false
  for (const raw of fs.readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim()
    if (line === '') continue
    if (inBlock) {
      comments++
      if (line.includes('*/')) inBlock = false
    } else if (line.startsWith('//')) {
      comments++
    } else if (line.startsWith('/*')) {
      comments++
      inBlock = !line.includes('*/')
    } else {
      code++
    }
  }
  return { comments, code }
}

t.test(`lib/ has at most ${MAX} comment lines per code line`, async (t) => {
  const files = fs.readdirSync(LIB, { recursive: true }).filter((f) => f.endsWith('.js'))
  const totals = files.map((f) => count(path.join(LIB, f))).reduce((a, b) =>
    ({ comments: a.comments + b.comments, code: a.code + b.code }))
  t.ok(files.length > 100, `${files.length} modules read`)
  const density = totals.comments / totals.code
  t.ok(density <= MAX, `${totals.comments} comment lines over ${totals.code} code lines: ${density.toFixed(3)}`)
})
