'use strict'
// SvelteKit, Nuxt, Astro and React Router, each as its scaffold writes it, with its real packages
// (examples/frameworks/NAME: its own package.json and lockfile, installed by scripts/setup) and
// its own production server, run unchanged under `pool start`: built once per lockfile and
// sources, served by every worker, its streamed page's shell sent before the late part (by order
// and by time) on a worker's port and through the embedded balancer, reloaded under a bounded
// load with 0 failed, stopped with nothing left. A framework that needs a newer Node than this
// one is skipped, saying so.
const t = require('tap')
const path = require('node:path')
const { request } = require('../helpers')
const { startAppPool, reloadUnderLoad, stopLeavingNothing } = require('../helpers/app-pool')
const { EXAMPLES, cannotRun, buildOnce, chunksOf, arrival } = require('../helpers/framework-example')

// Four builds on a cold cache (about 20 s in all on this 2-core box, Nuxt's the longest) and
// four pools: more than a file's default time.
t.setTimeout(600000)

// What the user runs (its server, and the arguments after `--`), and what its pages say.
const FRAMEWORKS = {
  sveltekit: { name: 'SvelteKit (adapter-node)', app: 'build', home: 'Welcome to SvelteKit' },
  nuxt: { name: 'Nuxt (Nitro node-server)', app: '.output/server/index.mjs', home: 'Welcome to Nuxt' },
  astro: { name: 'Astro (@astrojs/node standalone)', app: 'dist/server/entry.mjs', home: '<h1>Astro</h1>' },
  'react-router': {
    name: 'React Router (react-router-serve)',
    app: 'node_modules/.bin/react-router-serve',
    argv: ['build/server/index.js'],
    home: 'Welcome to React Router'
  }
}

const SHELL = 'A streamed page'
const LATE = 'the late part, resolved after 300 ms'

// The late part resolves 300 ms after the page starts rendering; its shell goes out at once. A
// buffering hop would deliver both together, within a millisecond or two: 100 ms apart leaves
// the scheduler of a loaded machine 200 ms.
async function streams (t, url, where) {
  const page = await chunksOf(url)
  t.equal(page.status, 200, `${where}: 200`)
  const shell = arrival(page, SHELL)
  const late = arrival(page, LATE)
  t.ok(shell && late, `${where}: the page has its shell and its late part`)
  if (!shell || !late) return
  t.ok(shell.offset < late.offset, `${where}: the shell comes first in the page`)
  t.ok(shell.index < late.index && late.at - shell.at >= 100,
    `${where}: the shell arrived before the late part was rendered (shell at ${shell.at.toFixed(0)} ms in chunk ` +
      `${shell.index}, late part at ${late.at.toFixed(0)} ms in chunk ${late.index} of ${page.chunks.length})`)
}

for (const [dir, { name, app, argv = [], home }] of Object.entries(FRAMEWORKS)) {
  const why = cannotRun(dir)
  t.test(`${name}, as its scaffold writes it: served, streamed, reloaded under load, ` +
    'stopped', { skip: why || false, timeout: 360000 }, async (t) => {
    const example = path.join(EXAMPLES, dir)
    const build = await buildOnce(dir, { output: argv[0] ?? app })
    t.comment(build.built ? `built in ${build.ms} ms` : 'build reused (same lockfile and sources)')
    const args = argv.length > 0 ? ['--', ...argv.map((a) => path.join(example, a))] : []
    const p = await startAppPool(t, path.join(example, app), { args, startTimeout: 60000 })
    const boots = p.child.logs.filter((l) => l.event === 'ready').map((l) => l.bootMs)
    t.comment(`workers ready in ${boots.join(', ')} ms`)
    for (const slot of [1, 2]) {
      const res = await request(p.workerUrl(slot))
      t.equal(res.status, 200, `slot ${slot}: 200`)
      t.ok(res.body.includes(home), `slot ${slot}: the home page`)
      t.match(res.body, new RegExp(`pool slot (<!-- -->)?${slot}(<!-- -->)?\\.`),
        `slot ${slot}: rendered by that worker, per request`)
    }
    await streams(t, `${p.workerUrl(1)}/streamed`, 'on a worker\'s port')
    await streams(t, `${p.url}/streamed`, 'through the embedded balancer')
    await reloadUnderLoad(t, p)
    t.ok((await request(p.url)).body.includes(home), 'the new workers serve')
    await stopLeavingNothing(t, p)
  })
}
