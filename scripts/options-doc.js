'use strict'

// The options reference's tables (docs/reference/options.md) are generated from the option
// tables themselves, so docs and defaults cannot drift apart: `npm run docs` rewrites them, and a
// test fails when they differ. A development tool: not part of the npm package.

const fs = require('node:fs')
const path = require('node:path')
const { OPTIONS } = require('../lib/options/table')
const { FRONTS, available } = require('../lib/fronts/registry')
const { describeDefault } = require('../lib/cli/flags')

const OPTIONS_DOC = path.join(__dirname, '..', 'docs', 'reference', 'options.md')

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

// Each block: <!-- options:NAME --> ... <!-- /options:NAME --> in docs/reference/options.md.
function blocks () {
  const out = { pool: table(OPTIONS) }
  for (const name of available()) {
    const options = FRONTS[name].options()
    if (Object.keys(options).length > 0) out[name] = table(options)
  }
  return out
}

function render (doc) {
  let text = doc
  for (const [name, body] of Object.entries(blocks())) {
    const re = new RegExp(`(<!-- options:${name} -->\\n)[\\s\\S]*?(\\n<!-- /options:${name} -->)`)
    text = text.replace(re, (_, open, close) => `${open}${body}${close}`)
  }
  return text
}

function updateOptionsDoc () {
  const before = fs.readFileSync(OPTIONS_DOC, 'utf8')
  const after = render(before)
  if (after !== before) fs.writeFileSync(OPTIONS_DOC, after)
  return after !== before
}

module.exports = { render, updateOptionsDoc, OPTIONS_DOC }

if (require.main === module) process.stdout.write(updateOptionsDoc() ? 'docs/reference/options.md: tables updated\n' : 'docs/reference/options.md: tables already current\n')
