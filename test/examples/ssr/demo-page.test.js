'use strict'
// The first page a newcomer opens, `npx pool start examples/ssr/server.js` then
// http://127.0.0.1:9001/, is whole: everything it loads (its images, its icon) answers through
// the pool, not 404.
const t = require('tap')
const path = require('node:path')
const { ROOT, freePorts, request, startPool, tempDir } = require('../../helpers')

// The URLs a browser fetches to show the page: src= of any element, and <link> hrefs.
function subresources (html) {
  const sources = [...html.matchAll(/\ssrc="([^"]*)"/g)].map((m) => m[1])
  const links = [...html.matchAll(/<link\b[^>]*\shref="([^"]*)"/g)].map((m) => m[1])
  return [...new Set([...sources, ...links])]
}

t.test('the SSR demo page: every image and link it loads answers through the pool', async (t) => {
  const ports = await freePorts(3)
  const dir = tempDir(t, 'pool-demo-')
  const pool = startPool(['start', path.join(ROOT, 'examples/ssr/server.js'), '-n', '2', '--port', String(ports[0]),
    '--worker-port', String(ports[1]), '--control', path.join(dir, 'pool.sock'), '--log-format', 'json'])
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started', 30000)
  const front = `http://127.0.0.1:${ports[0]}`
  const page = await request(`${front}/`)
  t.equal(page.status, 200)
  const urls = subresources(page.body)
  const images = urls.filter((u) => u.startsWith('/images/'))
  t.equal(images.length, 200, 'one picture per product on the default page')
  const fetched = urls.filter((u) => !u.startsWith('data:'))
  t.same(fetched.filter((u) => !u.startsWith('/')), [], 'nothing from another site')
  const failed = []
  for (const url of fetched) {
    const res = await request(`${front}${url}`)
    if (res.status !== 200 || res.headers['content-type'] !== 'image/svg+xml' || !res.body.startsWith('<svg ')) {
      failed.push(`${url}: ${res.status} ${res.headers['content-type']}`)
    }
  }
  t.same(failed, [], `all ${fetched.length} answer 200 with an SVG picture`)
  const again = await request(`${front}${images[0]}`)
  t.equal(again.body, (await request(`${front}${images[0]}`)).body, 'the same picture each time')
  t.match(again.headers['cache-control'], /max-age=\d+/, 'cacheable, so a browser asks once')
  t.equal((await request(`${front}/images/p1-400.png`)).status, 404, 'a name the page never uses is still 404')
})
