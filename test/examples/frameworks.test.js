'use strict'
// Express, Koa, Fastify and hapi under `pool start`, with the real packages: each example in
// examples/frameworks/ is the app as its framework's docs write it (it listens on $PORT itself)
// and runs unchanged: served by every worker, reloaded under load without a failed request,
// stopped with nothing left. And each framework's app object, exported instead, is served as is.
const t = require('tap')
const path = require('node:path')
const { ROOT, request } = require('../helpers')
const { startAppPool, reloadUnderLoad, stopLeavingNothing } = require('../helpers/app-pool')

const EXAMPLES = path.join(ROOT, 'examples', 'frameworks')

const DOCS_FORM = {
  express: { app: 'express/app.js', body: 'Hello World!' },
  koa: { app: 'koa/app.js', body: 'Hello World' },
  fastify: { app: 'fastify/server.mjs', body: '{"hello":"world"}' },
  hapi: { app: 'hapi/server.js', body: 'Hello World!' }
}

for (const [framework, { app, body }] of Object.entries(DOCS_FORM)) {
  t.test(`${framework}, as its docs write it: served, reloaded under load, stopped`, async (t) => {
    const p = await startAppPool(t, path.join(EXAMPLES, app))
    for (const slot of [1, 2]) t.equal((await request(p.workerUrl(slot))).body, body, `slot ${slot} serves`)
    t.equal((await request(p.url)).body, body, 'and so does the balancer')
    await reloadUnderLoad(t, p)
    t.equal((await request(p.url)).body, body, 'the new workers serve')
    await stopLeavingNothing(t, p)
  })
}

// Each framework's app object, exported. Fastify's route is in a plugin, and hapi's answer
// needs initialize() to have run (onPreStart): neither is there unless the pool waited for it.
const EXPORTED = {
  express: `const app = require('express')()
app.get('/', (req, res) => res.send('exported express'))
module.exports = app
`,
  koa: `const Koa = require('koa')
const app = new Koa()
app.use(async (ctx) => { ctx.body = 'exported koa' })
module.exports = app
`,
  fastify: `const fastify = require('fastify')()
fastify.register(async (instance) => { instance.get('/', async () => 'exported fastify') })
module.exports = fastify
`,
  hapi: `const Hapi = require('@hapi/hapi')
const server = Hapi.server()
let initialized = false
server.ext('onPreStart', () => { initialized = true })
server.route({ method: 'GET', path: '/', handler: () => initialized ? 'exported hapi' : 'not initialized' })
module.exports = server
`
}

for (const [framework, source] of Object.entries(EXPORTED)) {
  t.test(`${framework}: the app object, exported, is served as it is`, async (t) => {
    // In the repository's tree (tap's fixtures), so that require() finds the frameworks.
    const dir = t.testdir({ 'app.js': source })
    const p = await startAppPool(t, path.join(dir, 'app.js'))
    for (const slot of [1, 2]) {
      const res = await request(p.workerUrl(slot))
      t.equal(res.status, 200, `slot ${slot}: 200`)
      t.equal(res.body, `exported ${framework}`, `slot ${slot} serves`)
    }
    await stopLeavingNothing(t, p)
  })
}
