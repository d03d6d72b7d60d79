'use strict'
// A deploy by symlink: releases side by side, `current` pointing at the live one, the pool
// started on current/app.js. Switching the link and reloading under load brings up the new
// release in every slot without a failed request: the pool keeps the link in the app's path,
// and each new worker follows it when it loads the app.
const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { request } = require('../helpers')
const { startAppPool, reloadUnderLoad, stopLeavingNothing } = require('../helpers/app-pool')

const release = (name) => `module.exports = (req, res) => res.end(${JSON.stringify(name)})\n`

t.test('switch the current symlink, pool reload: every slot serves the new release', async (t) => {
  const dir = t.testdir({ releases: { a: { 'app.js': release('release a') }, b: { 'app.js': release('release b') } } })
  const current = path.join(dir, 'current')
  fs.symlinkSync(path.join('releases', 'a'), current)
  const p = await startAppPool(t, path.join(current, 'app.js'))
  for (const slot of [1, 2]) {
    t.equal((await request(p.workerUrl(slot))).body, 'release a', `slot ${slot} serves release a`)
  }

  // As `ln -sfn releases/b current.new && mv -T current.new current` does it: atomically.
  fs.symlinkSync(path.join('releases', 'b'), `${current}.new`)
  fs.renameSync(`${current}.new`, current)
  await reloadUnderLoad(t, p)
  for (const slot of [1, 2]) {
    t.equal((await request(p.workerUrl(slot))).body, 'release b', `slot ${slot} serves release b`)
  }
  await stopLeavingNothing(t, p)
})
