'use strict'

// The options' assembly, which `new Pool()` and `pool start` both call: every front is known by
// its registry entry alone, and checking a front's options builds nothing.

const t = require('tap')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { ROOT, FIXTURES } = require('../helpers')
const { assemblePool, PoolConfig } = require('../../lib/config/pool')
const { FRONTS, frontNamed, listenerOf, listenerPortOption } = require('../../lib/fronts/registry')
const { codes } = require('../../lib/errors')

const APP = path.join(FIXTURES, 'handler.js')

t.test('a front\'s options are checked by its registry entry, which builds nothing', async (t) => {
  for (const name of Object.keys(FRONTS)) {
    const entry = frontNamed(name)
    for (const key of ['describe', 'options', 'resolve', 'failures', 'create']) t.ok(entry[key], `${name}: ${key}`)
  }
  t.same(FRONTS.embedded.resolve({}).port, 9001, 'the defaults filled')
  t.throws(() => FRONTS.embedded.resolve({ port: 70000 }), { code: codes.BAD_OPTION, message: /--port/ })
  t.throws(() => FRONTS.haproxy.resolve({}), { code: codes.BAD_OPTION, message: /--haproxy-socket/ })
  t.throws(() => frontNamed('nginx'),
    { code: codes.BAD_OPTION, message: /balancer must be one of embedded, haproxy, none/ })
  t.same(listenerOf('embedded', { port: 8080 }), { name: 'port', flag: 'port', port: 8080, host: '127.0.0.1' },
    'where the embedded balancer listens')
  t.equal(listenerOf('haproxy', {}), null, 'HAProxy\'s listener is HAProxy\'s')
  t.equal(listenerPortOption().spec.flag, 'port')
})

t.test('the assembly: resolved once, the front\'s port checked with the pool\'s own', async (t) => {
  const config = assemblePool({ app: APP, balancer: 'embedded', port: 7001, workers: 2 })
  t.ok(config instanceof PoolConfig)
  t.equal(config.options.workers, 2)
  t.same({ name: config.front.name, port: config.front.options.port }, { name: 'embedded', port: 7001 })
  t.equal(assemblePool(config), config, 'an assembled configuration is taken as it is')
  t.equal(config.with({ logger: console }).options.logger, console)
  t.throws(() => config.with({ workers: 3 }), { code: codes.BAD_OPTION }, 'only library-only keys are added afterwards')
  t.throws(() => assemblePool({ app: APP, balancer: 'embedded', port: 9003, workers: 2 }),
    { code: codes.BAD_OPTION, message: /port \(--port\) 9003 is one of the workers' ports/ })
  t.throws(() => assemblePool({ app: APP, balancer: 'embedded', prot: 1 }),
    { code: codes.BAD_OPTION, message: /unknown option prot \(did you mean port\?\)/ })
})

// In a process of its own, counting the embedded balancers made: one per pool, the one it runs.
t.test('new Pool() makes its front once: its options are not checked by building one', async (t) => {
  const script = `
    const balancer = require(${JSON.stringify(path.join(ROOT, 'lib/fronts/balancer/balancer.js'))})
    let made = 0
    const Made = balancer.EmbeddedBalancer
    balancer.EmbeddedBalancer = class extends Made { constructor (...args) { super(...args); made++ } }
    const { Pool } = require(${JSON.stringify(ROOT)})
    new Pool({ app: ${JSON.stringify(APP)}, balancer: 'embedded', workers: 1 })
    process.stdout.write(String(made))
  `
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stdout, '1', 'one balancer made')
})
