'use strict'

// A worker process loads the pool's protocol and bottom layer, and nothing of the supervisor's,
// the fronts' or the observers': asked, a real worker lists its require.cache. Whatever the app's
// form, and with require('pool') in the app (the package's entry must not load the supervisor).

const t = require('tap')
const path = require('node:path')
const { FIXTURES, freePorts, request, startPool } = require('../helpers')

const ALLOWED = /^(lib\/(worker|protocol|shared)\/|lib\/errors\.js$|index\.js$|package\.json$)/
const NEVER = /^lib\/(supervisor|fronts|observe|config|cli|control|generate|net|options|haproxy)\//
// Loaded only on the rare path that needs them, not by a worker that booted and serves: each
// module loaded at boot adds to the heap a worker starts with (a tiny app's worker then outgrew
// its first young generation and doubled it, +1 MB of RSS over a cluster worker). The app's
// processes are looked for on the way out; the pool's errors only for an app that cannot be
// served (index.js, which an app calling listen() loads, has them anyway); package.json only
// when require() of the package's npm name fails; node:os for a refused listen().
const LAZY = ['lib/worker/app-processes.js', 'lib/shared/proc.js', 'package.json']
const LAZY_EXPORTED = ['lib/errors.js']
const LAZY_BUILTINS = ['os']

for (const form of ['export', 'listen']) {
  t.test(`a worker (the app ${form === 'listen' ? 'calls require(\'pool\').listen()' : 'exports a listener'}) loads ` +
    'only the protocol and the bottom layer', async (t) => {
    const [port] = await freePorts(1)
    const pool = startPool(['start', path.join(FIXTURES, 'loaded-modules.js'), '-n', '1', '--worker-port', String(port),
      '--balancer', 'none'], { env: { MODULES_FORM: form } })
    t.teardown(() => pool.stop('SIGKILL'))
    await pool.waitLog((l) => l.event === 'started')
    const loaded = JSON.parse((await request(`http://127.0.0.1:${port}/`)).body)
    t.ok(loaded.includes('lib/worker/runtime.js') && loaded.includes('lib/protocol/channel.js'),
      'the list is the worker\'s own')
    t.same(loaded.filter((file) => NEVER.test(file)), [], 'nothing of the supervisor, the fronts, the observers')
    t.same(loaded.filter((file) => !ALLOWED.test(file)), [],
      'only lib/worker/, lib/protocol/, lib/shared/ and lib/errors.js')
    const lazy = form === 'export' ? [...LAZY, ...LAZY_EXPORTED] : LAZY
    t.same(loaded.filter((file) => lazy.includes(file)), [], 'not what only the way out or an error needs')
    const builtins = JSON.parse((await request(`http://127.0.0.1:${port}/?builtins`)).body)
    t.ok(builtins.includes('http'), 'the list of Node.js modules is the worker\'s own')
    t.same(builtins.filter((name) => /^(tls|_tls_|https|crypto)/.test(name)), [],
      'no TLS: an HTTP app\'s worker does not pay for it (5 MB of RSS on Node.js 24)')
    t.same(builtins.filter((name) => LAZY_BUILTINS.includes(name)), [], 'no node:os until a listen() is refused')
  })
}
