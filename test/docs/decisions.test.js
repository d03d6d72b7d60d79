'use strict'

// docs/decisions/: the index lists every record by its title, and each record has its date, the
// code it is about (links that lead somewhere: readme.test.js), and its context, decision and
// consequences.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { ROOT } = require('../helpers')

const DIR = path.join(ROOT, 'docs', 'decisions')
const index = fs.readFileSync(path.join(DIR, 'README.md'), 'utf8')
const records = fs.readdirSync(DIR).filter((f) => /^\d{4}-[a-z0-9-]+\.md$/.test(f)).sort()

t.test('every record is in the index, by its number and title', async (t) => {
  t.ok(records.length >= 10, `${records.length} records`)
  const listed = [...index.matchAll(/^\| \[(\d{4})\]\(([^)]+)\) \| (.+?) \|$/gm)]
  t.same(listed.map((m) => m[2]), records, 'the index links each record, in order')
  for (const [, number, file, title] of listed) {
    const text = fs.existsSync(path.join(DIR, file)) ? fs.readFileSync(path.join(DIR, file), 'utf8') : ''
    t.equal(text.split('\n')[0], `# ${Number(number)}. ${title}`, `${file}: its title is the index's`)
    t.ok(file.startsWith(`${number}-`), `${file}: numbered as listed`)
  }
})

t.test('each record says when, about what code, and why', async (t) => {
  for (const file of records) {
    const text = fs.readFileSync(path.join(DIR, file), 'utf8')
    t.match(text, /^- Date: \d{4}-\d{2}-\d{2} \(`[0-9a-f]{7}`/m, `${file}: a date and a commit`)
    t.match(text, /^- Code: .*\]\(\.\.\/\.\.\/lib\//m, `${file}: links the code`)
    for (const heading of ['## Context', '## Decision', '## Consequences']) {
      t.ok(text.includes(`\n${heading}\n`), `${file}: ${heading}`)
    }
    for (const [, linked] of text.matchAll(/\]\(\.\.\/\.\.\/(lib\/[^)]+)\)/g)) {
      t.ok(fs.existsSync(path.join(ROOT, linked)), `${file}: ${linked} exists`)
    }
    t.ok(text.split('\n').length <= 40, `${file}: short (${text.split('\n').length} lines)`)
  }
})
