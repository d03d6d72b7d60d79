'use strict'
// The README's promises: its options tables match the code, and it holds exactly the two
// set-up commands, the second of which is what .ci/run runs.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { render, README } = require('../lib/cli/options-doc')

const readme = fs.readFileSync(README, 'utf8')

t.test('options tables are generated from the code (npm run docs)', async (t) => {
  t.equal(render(readme), readme, 'README.md options tables are current; run `npm run docs`')
  t.match(readme, /\| `--workers` \(`-n`\) \| `workers` \|/)
})

t.test('exactly two set-up commands, and CI runs the test one', async (t) => {
  const quick = readme.split('## Quick start')[1].split('\n## ')[0]
  const commands = [...quick.matchAll(/```sh\n([^`]+)```/g)].map((m) => m[1].trim())
  t.equal(commands.length, 2, 'two commands')
  t.match(commands[0], /pool start examples\/ssr\/server\.js/, 'the first starts the demo')
  t.match(commands[1], /npm test/, 'the second runs the tests')
  t.equal(commands[1], 'scripts/setup && npm test', 'the second is the setup script, then the tests')
  // CI runs the same two steps, and the script installs what the tests start.
  const ci = fs.readFileSync(path.join(__dirname, '..', '.ci', 'run'), 'utf8')
  t.match(ci, /^scripts\/setup\nnpm test$/m)
  const setup = fs.readFileSync(path.join(__dirname, '..', 'scripts', 'setup'), 'utf8')
  t.match(setup, /PACKAGES=\(haproxy nginx iproute2 chromium\)/)
  t.match(setup, /npm ci/)
})
