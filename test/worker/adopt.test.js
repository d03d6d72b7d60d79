'use strict'
// The worker adopts exactly what Node itself binds to a TCP port: each argument form of
// net.Server#listen() is run through Node's own listen() (in a child, test/fixtures/listen-forms.js)
// and through the worker's reading of it, requestedPort(), on the Node running the suite. Where
// Node binds the port offered, the worker must name that port; where it binds any port, 0; a
// pipe, a handle, a descriptor or arguments Node refuses, null (the app's own business).
const t = require('tap')
const net = require('node:net')
const path = require('node:path')
const { once } = require('node:events')
const { spawn } = require('node:child_process')
const { FIXTURES, freePorts, parseJsonLines } = require('../helpers')

async function runForms (port) {
  // A listening socket for the descriptor form, passed as the child's fd 3.
  const other = net.createServer().listen(0, '127.0.0.1')
  await once(other, 'listening')
  try {
    const child = spawn(process.execPath, [path.join(FIXTURES, 'listen-forms.js')], {
      stdio: ['ignore', 'pipe', 'pipe', other._handle.fd],
      env: { ...process.env, PORT: String(port), FD_PORT: String(other.address().port) }
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { err += d })
    const [code] = await once(child, 'exit')
    if (code !== 0) throw new Error(`listen-forms.js exited ${code}: ${err}`)
    return parseJsonLines(out)
  } finally {
    other.close()
  }
}

t.test('requestedPort() reads every form of listen() as Node does', async (t) => {
  const [port] = await freePorts(1)
  const forms = await runForms(port)
  t.ok(forms.length >= 40, `${forms.length} forms run`)
  const expected = { port, any: 0, pipe: null, handle: null, throws: null }
  for (const { name, node, requested } of forms) {
    const does = node === 'port'
      ? 'binds PORT'
      : node === 'any' ? 'binds any port' : node === 'throws' ? 'refuses it' : `listens on a ${node}`
    t.equal(requested, expected[node],
      `listen${name}: ` +
        'Node ' +
        `${does}, the worker reads ${requested}`)
  }
  // The forms this project met, named: if Node changed its mind, the table above would follow
  // it silently; these say what the docs promise.
  const byName = Object.fromEntries(forms.map((f) => [f.name, f.node]))
  t.equal(byName['({ path: false, host, port }, cb) (SvelteKit)'], 'port',
    'SvelteKit adapter-node\'s listen is a TCP listen on PORT')
  t.equal(byName['({ path: PIPE, port }): the port wins'], 'port', 'a port beside a path wins')
  t.equal(byName['({ path: PIPE, port: false }) (SvelteKit with SOCKET_PATH)'], 'pipe',
    'SOCKET_PATH without PORT is a pipe')
})
