'use strict'

// The README's options tables are generated from the option tables themselves, so docs and
// defaults cannot drift apart: `npm run docs` rewrites them, and a test fails when they differ.

const fs = require('node:fs')
const path = require('node:path')
const { OPTIONS } = require('../options')
const { FRONTS, available } = require('../fronts')
const { describeDefault } = require('./flags')

const README = path.join(__dirname, '..', '..', 'README.md')

function row (name, spec) {
  const flag = `\`--${spec.flag}\`` + (spec.alias ? ` (\`-${spec.alias}\`)` : '')
  const def = describeDefault(spec) ?? (name === 'workers' ? '`$WEB_CONCURRENCY`, else CPUs' : '')
  const cell = (s) => String(s).replace(/\|/g, '\\|')
  return `| ${flag} | \`${name}\` | ${cell(def)} | ${cell(spec.describe)} |`
}

function table (options) {
  const lines = ['| flag | library option | default | meaning |', '| --- | --- | --- | --- |']
  for (const [name, spec] of Object.entries(options)) lines.push(row(name, spec))
  return lines.join('\n')
}

// Each block: <!-- options:NAME --> ... <!-- /options:NAME --> in README.md.
function blocks () {
  const out = { pool: table(OPTIONS) }
  for (const name of available()) {
    const options = FRONTS[name].options()
    if (Object.keys(options).length > 0) out[name] = table(options)
  }
  return out
}

function render (readme) {
  let text = readme
  for (const [name, body] of Object.entries(blocks())) {
    const re = new RegExp(`(<!-- options:${name} -->\\n)[\\s\\S]*?(\\n<!-- /options:${name} -->)`)
    text = text.replace(re, (_, open, close) => `${open}${body}${close}`)
  }
  return text
}

function updateReadme () {
  const before = fs.readFileSync(README, 'utf8')
  const after = render(before)
  if (after !== before) fs.writeFileSync(README, after)
  return after !== before
}

module.exports = { render, updateReadme, README }

if (require.main === module) process.stdout.write(updateReadme() ? 'README.md options tables updated\n' : 'README.md options tables already current\n')
