'use strict'

// A streamed page through each way of running the pool (issue 24): the SSR demo's /streamed
// (React's renderToPipeableStream; its recommendations wait DELAY ms for their data) reaches the
// client shell first, placeholder and all, and the late part DELAY later, through the embedded
// balancer, `--balancer haproxy` and nginx → HAProxy → pool, each from its generated config;
// and Chromium shows the shell while the late part is still on its way, then the late part in
// the placeholder's place. On main the embedded balancer sent the page once it was whole.

const t = require('tap')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { ROOT, freePorts, startPool, waitFor } = require('../helpers')
const { startNginxInFront, onPlatforms, NGINX_WORKER_USER } = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool, allUp } = require('../helpers/haproxy-pool')

const SSR = path.join(ROOT, 'examples/ssr/server.js')
const DELAY = 1500
const SHELL = '<main class="catalogue">'
const PLACEHOLDER = 'Loading recommendations'
const LATE = '<section class="recommendations">'

// GET `pathname` on a raw connection: the text, and when each marker first arrived.
function timedGet (port, pathname) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    const got = { text: '', sentAt: performance.now(), shellAt: null, lateAt: null }
    socket.setEncoding('latin1')
    socket.on('data', (d) => {
      got.text += d
      if (got.shellAt === null && got.text.includes(SHELL)) got.shellAt = performance.now()
      if (got.lateAt === null && got.text.includes(LATE)) got.lateAt = performance.now()
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(got))
    socket.write(`GET ${pathname} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
  })
}

async function streamsThrough (t, front, port) {
  const got = await timedGet(port, `/streamed?delay=${DELAY}`)
  t.match(got.text, /^HTTP\/1\.1 200 /, `${front}: 200`)
  const at = (marker) => got.text.indexOf(marker)
  t.ok(at(SHELL) > 0 && at(SHELL) < at(PLACEHOLDER) && at(PLACEHOLDER) < at(LATE),
    `${front}: the shell with its placeholder, then the late part`)
  const ahead = got.lateAt - got.shellAt
  t.ok(ahead >= DELAY / 2,
    `${front}: the shell arrived ${Math.round(ahead)} ms before the late part, ` +
      `${Math.round(got.shellAt - got.sentAt)} ms after the request (the late part's data comes ${DELAY} ms after it)`)
}

t.test('the embedded balancer', async (t) => {
  const [port, statsPort, workerPort] = await freePorts(4)
  const pool = startPool(['start', SSR, '-n', '2', '--port', String(port), '--worker-port', String(workerPort),
    '--stats-port', String(statsPort), '--log-format', 'json'])
  t.teardown(() => pool.stop())
  await pool.waitLog((l) => l.event === 'started', 30000)
  await streamsThrough(t, 'embedded balancer', port)
  await inChromium(t, `http://127.0.0.1:${port}/streamed?delay=${DELAY}`)
})

onPlatforms(t, '--balancer haproxy, and nginx → HAProxy → pool', { nginx: true }, async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2, nginxUser: NGINX_WORKER_USER })
  await startHaproxyPool(t, lab, { workers: 2, app: SSR })
  await waitFor(allUp(lab.client), { timeout: 5000, what: 'both servers UP' })
  await streamsThrough(t, 'HAProxy', lab.port)

  const nginx = await startNginxInFront(t, lab.dir, { platform })
  await streamsThrough(t, 'nginx → HAProxy', nginx.port)
})

// ---- Chromium --------------------------------------------------------------------------------

const CHROMIUM = '/usr/bin/chromium'

function browserMissing () {
  try {
    require.resolve('playwright-core')
  } catch {
    return 'playwright-core is not installed (a devDependency: npm install)'
  }
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM} (apt-get install chromium)`
  return null
}

// The browser shows the catalogue and the placeholder while the recommendations are still on
// their way; then React's inline script puts them in the placeholder's place.
async function inChromium (t, url) {
  const missing = browserMissing()
  if (missing) return t.skip(`in Chromium: ${missing}`)
  const browser = await require('playwright-core')
    .chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] })
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  const errors = []
  page.on('pageerror', (err) => errors.push(err.message))
  const loaded = page.goto(url, { waitUntil: 'load', timeout: 20000 })
  await page.waitForSelector('main.catalogue', { timeout: 10000 })
  const early = await page.evaluate(() => ({
    products: document.querySelectorAll('main.catalogue .product-card').length,
    placeholder: document.querySelector('.recommendations-loading') !== null,
    late: document.querySelector('.recommendations') !== null
  }))
  t.same(early, { products: 200, placeholder: true, late: false },
    'Chromium shows the shell, its placeholder, and no recommendations yet')
  await loaded
  await page.waitForSelector('section.recommendations .product-card', { timeout: 10000 })
  const after = await page.evaluate(() => ({
    recommended: document.querySelectorAll('section.recommendations .product-card').length,
    placeholder: document.querySelector('.recommendations-loading') !== null
  }))
  t.same(after, { recommended: 8, placeholder: false }, 'then the recommendations, in the placeholder\'s place')
  t.same(errors, [], 'no error in the page')
}
