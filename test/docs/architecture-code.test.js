'use strict'

// docs/architecture.md says what the code is, where a test can tell: every module of lib/ is
// named, under its folder; test/'s folders are lib's and the few it lists; every path it names
// exists; the supervisor's timers are where it says; the front hooks and the FrontContext are
// front.js's; and the timer table names every duration option, each with a module that arms it.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { ROOT } = require('../helpers')

const doc = fs.readFileSync(path.join(ROOT, 'docs', 'architecture.md'), 'utf8')
const LIB = path.join(ROOT, 'lib')
const TIMER = /\bset(Timeout|Interval|Timer)\(|\.setTimeout\(/

const source = (file) => fs.readFileSync(path.join(LIB, file), 'utf8')
const entries = (dir) => fs.readdirSync(path.join(LIB, dir), { withFileTypes: true })
  .map((e) => e.isDirectory() ? `${e.name}/` : e.name)
  .filter((name) => name.endsWith('/') || name.endsWith('.js'))

function section (heading) {
  const rest = doc.split(`\n## ${heading}\n`)[1]
  return rest.split('\n## ')[0]
}

// The "Where things live" drawing: folder (relative to lib/) → the names on its lines.
function whereThingsLive () {
  const block = /```\n(lib\/\n[\s\S]*?)```/.exec(section('Where things live'))[1]
  const named = new Map()
  let top = null
  let folder = null
  for (const line of block.split('\n')) {
    const head = /^( {2}| {4})([a-z-]+\/|[a-z-]+\.js)( |$)/.exec(line)
    if (head) {
      const name = head[2].replace(/\/$/, '')
      if (head[1].length === 2) top = name
      folder = head[1].length === 2 ? name : `${top}/${name}`
      named.set(folder, new Set())
    } else if (!/^ {16}/.test(line)) {
      folder = null // test/, or the end
    }
    if (!folder) continue
    const text = head ? line.slice(head[0].length) : line
    for (const [, name] of text.matchAll(/(?:^|[\s(`])([a-z][a-z0-9-]*(?:\.js|\/))(?=[\s,;:)`]|$)/g)) {
      named.get(folder).add(name)
    }
  }
  return named
}

t.test('every module of lib/ is named under its folder, and every name there is one', async (t) => {
  const named = whereThingsLive()
  const folders = (dir) => entries(dir).filter((n) => n.endsWith('/')).flatMap((n) => {
    const sub = dir ? `${dir}/${n.slice(0, -1)}` : n.slice(0, -1)
    return [sub, ...folders(sub)]
  })
  for (const folder of folders('').filter((f) => f !== 'observe/status-page')) {
    t.ok(named.has(folder), `lib/${folder}/ has its line`)
    if (folder === 'fronts/balancer') continue // its modules: below
    const names = named.get(folder) ?? new Set()
    const actual = entries(folder)
    const has = (n) => names.has(n) || named.has(`${folder}/${n.slice(0, -1)}`)
    t.same(actual.filter((n) => !has(n)), [], `lib/${folder}/: every module named`)
    t.same([...names].filter((n) => !actual.includes(n)), [], `lib/${folder}/: every name a module`)
  }
  t.ok(named.has('errors.js') && fs.existsSync(path.join(LIB, 'errors.js')), 'lib/errors.js')
  const balancer = /^- \*\*The embedded balancer\*\*[\s\S]*?(?=\n- \*\*)/m.exec(doc)[0]
  const mentioned = new Set([...balancer.matchAll(/`([a-z-]+\.js)`/g)].map((m) => m[1]))
  t.same(entries('fronts/balancer').filter((n) => !mentioned.has(n)), [],
    'every module of lib/fronts/balancer/ in the embedded balancer\'s paragraph')
  t.same([...mentioned].filter((n) => !fs.existsSync(path.join(LIB, 'fronts', 'balancer', n)) &&
    !fs.existsSync(path.join(ROOT, 'bench', 'lib', n))), [], 'and each one it names is one')
})

t.test('test/ has lib\'s folders and the ones the drawing lists, and the examples exist', async (t) => {
  const block = /```\n(lib\/\n[\s\S]*?)```/.exec(section('Where things live'))[1]
  const line = block.slice(block.indexOf('\ntest/'))
  const own = [...line.matchAll(/\b([a-z]+)\/(?= |$|\n)/g)].map((m) => m[1]).filter((n) => n !== 'test')
  t.ok(own.length >= 5, `the test/ line lists test's own folders (${own.join(' ')})`)
  const dirs = (dir) => fs.readdirSync(path.join(ROOT, 'test', dir), { withFileTypes: true })
    .filter((e) => e.isDirectory()).flatMap((e) => {
      const sub = dir ? `${dir}/${e.name}` : e.name
      return own.includes(sub.split('/')[0]) ? [sub] : [sub, ...dirs(sub)]
    })
  const strays = dirs('').filter((d) => !own.includes(d.split('/')[0]) && !fs.existsSync(path.join(LIB, d)))
  t.same(strays, [], 'every other folder of test/ is one of lib\'s')
  for (const [, file] of section('Where things live').matchAll(/`((?:lib|test)\/[a-z/-]+\.js)`/g)) {
    t.ok(fs.existsSync(path.join(ROOT, file)), `${file} exists`)
  }
})

t.test('every path the page names exists, and every Pool#method is one', async (t) => {
  const FOLDERS = 'cli|supervisor|config|generate|fronts|observe|control|worker|options|net|haproxy|protocol|shared'
  const paths = new Set()
  const named = new RegExp(`(?:^|[\\s(\`])((?:lib/)?(?:${FOLDERS})/[a-z0-9/-]*(?:\\.js|/))`, 'gm')
  for (const [, p] of doc.matchAll(named)) paths.add(p)
  for (const [, p] of doc.matchAll(/`((?:bench|bin|scripts|test)\/[a-z0-9/.-]+)`/g)) paths.add(p)
  t.ok(paths.size > 50, `${paths.size} paths`)
  const missing = [...paths].filter((p) => !fs.existsSync(path.join(ROOT, p)) && !fs.existsSync(path.join(LIB, p)))
  t.same(missing, [], 'each exists')
  const { Pool } = require('../../lib/supervisor/pool')
  const methods = [...new Set([...doc.matchAll(/Pool#([a-zA-Z]+)/g)].map((m) => m[1]))]
  t.same(methods.filter((m) => typeof Pool.prototype[m] !== 'function'), [], `Pool#${methods.join(', #')}`)
})

t.test('the supervisor\'s timers: the loop\'s one, and those the page lists', async (t) => {
  const said = /The other timers of `lib\/supervisor\/`([^]*?)\.\s/.exec(doc)
  t.ok(said, 'the page lists the other timers of lib/supervisor/')
  const listed = [...said[1].matchAll(/`([a-z-]+\.js)`/g)].map((m) => m[1]).sort()
  const arming = entries('supervisor').filter((f) => f.endsWith('.js') && TIMER.test(source(`supervisor/${f}`)))
  t.same(['pool.js', ...listed].sort(), arming.sort(), 'the modules of lib/supervisor/ arming a timer')
})

t.test('the front\'s hooks and its context are front.js\'s', async (t) => {
  const front = source('fronts/front.js')
  const hooks = [...front.matchAll(/^\/\/ {3}([a-zA-Z]+)\(/gm)].map((m) => m[1])
  const paragraph = /^- \*\*`lib\/fronts\/front\.js`[\s\S]*?(?=\n- \*\*)/m.exec(doc)[0]
  const told = /things \(([^)]*)\)/.exec(paragraph)[1].match(/`([a-zA-Z]+)`/g).map((s) => s.slice(1, -1))
  t.same(told.sort(), hooks.filter((h) => h !== 'checkScale').sort(), 'the hooks the supervisor tells')
  t.match(paragraph, /`checkScale\(n\)`/, 'and checkScale')
  const typedef = /@typedef \{object\} FrontContext([^]*?)\*\//.exec(front)[1]
  const properties = [...typedef.matchAll(/^ \* @property \{.*?\} ([a-zA-Z]+)/gm)].map((m) => m[1])
  t.equal(properties.length, typedef.match(/@property /g).length, 'each of FrontContext\'s properties read')
  const unnamed = properties.filter((p) => !new RegExp(`\\b${p}\\b`).test(paragraph))
  t.same(unnamed, [], 'every FrontContext property is named')
})

t.test('the timer table names every duration option, each owner arming a timer', async (t) => {
  const table = section('Who owns which timer').split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| timer |') && !l.startsWith('| ---'))
  t.ok(table.length >= 10, `${table.length} rows`)
  const flags = new Set(table.flatMap((row) => [...row.matchAll(/`--([a-z-]+)`/g)].map((m) => m[1])))
  const tables = [require('../../lib/options/table').OPTIONS, require('../../lib/fronts/balancer/options').OPTIONS,
    require('../../lib/fronts/haproxy/options').OPTIONS]
  const known = new Set(tables.flatMap((o) => Object.values(o).map((s) => s.flag)))
  const durations = new Set(tables.flatMap((o) => Object.values(o).filter((s) => s.kind === 'duration')
    .map((s) => s.flag)))
  t.same([...durations].filter((f) => !flags.has(f)), [], 'every duration option has its row')
  t.same([...flags].filter((f) => !known.has(f)), [], 'every flag named is an option')
  for (const row of table) {
    const owner = row.split('|')[2]
    const modules = [...owner.matchAll(/`([a-z-]+\/[a-z/-]+\.js)`/g)].map((m) => m[1])
    t.ok(modules.length > 0, `${row.slice(0, 40)}…: its owner names a module`)
    for (const file of modules) {
      t.ok(fs.existsSync(path.join(LIB, file)), `lib/${file} exists`)
      const arms = TIMER.test(source(file)) || /nextDeadline\s*\(\)\s*\{/.test(source(file))
      t.ok(arms, `lib/${file} arms a timer (or gives the loop its deadline)`)
    }
  }
})
