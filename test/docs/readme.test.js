'use strict'
// The README's promises: it is a page (the manual is in docs/), it holds exactly the two set-up
// commands, the second of which is what .ci/run runs; and the options reference matches the code.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { render, OPTIONS_DOC } = require('../../scripts/options-doc')

const ROOT = path.join(__dirname, '..', '..')
const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')

t.test('options tables are generated from the code (npm run docs)', async (t) => {
  const doc = fs.readFileSync(OPTIONS_DOC, 'utf8')
  t.equal(render(doc), doc, 'docs/reference/options.md tables are current; run `npm run docs`')
  t.match(doc, /\| `--workers` \(`-n`\) \| `workers` \|/)
  t.match(doc, /<!-- options:embedded -->\n\| flag/, 'the embedded front\'s table')
  t.match(doc, /<!-- options:haproxy -->\n\| flag/, 'the HAProxy front\'s table')
})

t.test('the README is a page, and every relative link in it and in docs/ leads somewhere', async (t) => {
  t.ok(readme.split('\n').length <= 300,
    `README.md has ${readme.split('\n').length} lines (at most 300: the manual is in docs/)`)
  const files = ['README.md', ...listMarkdown(path.join(ROOT, 'docs')).map((f) => path.relative(ROOT, f))]
  for (const file of files) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '')
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue
      const [where, anchor] = target.split('#')
      const dest = where ? path.resolve(path.dirname(path.join(ROOT, file)), where) : path.join(ROOT, file)
      t.ok(fs.existsSync(dest), `${file}: link to ${target}: ${path.relative(ROOT, dest)} exists`)
      if (anchor && dest.endsWith('.md') && fs.existsSync(dest)) {
        t.ok(anchorsOf(dest).has(anchor), `${file}: link to ${target}: the heading #${anchor} exists`)
      }
    }
  }
})

t.test('exactly two set-up commands, and CI runs the test one', async (t) => {
  const quick = readme.split('## Quick start')[1].split('\n## ')[0]
  const commands = [...quick.matchAll(/```sh\n([^`]+)```/g)].map((m) => m[1].trim())
  t.equal(commands.length, 2, 'two commands')
  t.match(commands[0], /pool start examples\/ssr\/server\.js/, 'the first starts the demo')
  t.match(commands[1], /npm test/, 'the second runs the tests')
  t.equal(commands[1], 'scripts/setup && npm test', 'the second is the setup script, then the tests')
  // CI runs the same two steps, the test command once on each Node.js version the suite is
  // tested on (22, 24 and 26, which scripts/setup fetched), and the script installs what the tests
  // start, Debian 13's HAProxy and nginx among them.
  const ci = fs.readFileSync(path.join(ROOT, '.ci', 'run'), 'utf8')
  t.match(ci, /^scripts\/setup\n/m)
  t.match(ci,
    /^for version in "\$\{NODE_VERSIONS\[@\]\}"; do\n(.*\n)*?.*PATH="\$\(node_bin "\$version"\):\$PATH" npm test\b.*\n(.*\n)*?done$/m, 'npm test under each version')
  t.match(ci, /exit 1/, 'and fails when a run failed')
  const versions = fs.readFileSync(path.join(ROOT, 'scripts', 'nodes.sh'), 'utf8')
    .match(/^NODE_VERSIONS=\((.*)\)$/m)[1].split(' ')
  t.same(versions.map((v) => v.split('.')[0]), ['22', '24', '26'], 'Node.js 22, 24 and 26')
  t.match(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).engines.node, '>=22',
    'engines says what is tested')
  const setup = fs.readFileSync(path.join(ROOT, 'scripts', 'setup'), 'utf8')
  t.match(setup, /PACKAGES=\(haproxy nginx iproute2 chromium dnsmasq-base faketime redis-server debootstrap\)/)
  t.match(setup, /debootstrap --variant=minbase --include="\$DEBIAN13_PACKAGES" "\$DEBIAN13_SUITE"/,
    'a Debian 13 root for its HAProxy and nginx')
  t.match(setup, /npm ci/)
})

function listMarkdown (dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const file = path.join(dir, e.name)
    if (e.isDirectory()) return listMarkdown(file)
    return e.name.endsWith('.md') ? [file] : []
  })
}

// GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes.
function anchorsOf (file) {
  const text = fs.readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '')
  const slugs = [...text.matchAll(/^#{1,6} (.+)$/gm)].map(([, h]) => h.trim().toLowerCase().replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-'))
  return new Set(slugs)
}
