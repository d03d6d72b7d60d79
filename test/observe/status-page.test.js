'use strict'

// The status page at / on the stats listener, as a person sees it in a real browser: Debian's
// Chromium driven headless by playwright-core. Against a real pool with the embedded balancer:
// the worker rows and their states, the running request's URL, the queue, the latency
// histogram, an exit with its reason, the page redrawing itself without a reload, and the error
// banner once the pool is gone. Against a listener serving set data: what the pool does not
// produce on demand (CPU, its own list of exits, HAProxy, a hostile request URL) and the
// Content-Security-Policy actually holding. Screenshots: /tmp/status-page.png (running, with a
// queue) and /tmp/status-page-error.png (the pool gone).

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const crypto = require('node:crypto')
const pino = require('pino')
const { freePorts, request, waitFor, tempDir } = require('../helpers')
const { Pool } = require('../../lib/supervisor/pool')
const { createBalancer } = require('../../lib/fronts/balancer')
const { StatsListener } = require('../../lib/observe/stats-listener')

const CHROMIUM = '/usr/bin/chromium'
const SHOT = '/tmp/status-page.png'
const SHOT_ERROR = '/tmp/status-page-error.png'

// Why the browser tests cannot run here, or null.
function browserMissing () {
  try {
    require.resolve('playwright-core')
  } catch {
    return 'playwright-core is not installed (a devDependency: npm install)'
  }
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM} (apt-get install chromium)`
  return null
}
const MISSING = browserMissing()

// One browser for the file, launched on first use.
let browser = null
async function newPage (t) {
  if (!browser) {
    browser = await require('playwright-core')
      .chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] })
  }
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } })
  t.teardown(() => context.close())
  const page = await context.newPage()
  page.consoleErrors = []
  page.pageErrors = []
  page.on('console', (m) => { if (m.type() === 'error') page.consoleErrors.push(m.text()) })
  page.on('pageerror', (err) => page.pageErrors.push(err.message))
  return page
}
t.teardown(() => browser?.close())

const textOf = (page, selector) => page.locator(selector).first().innerText()

// Wait until the text on screen at `selector` matches `re` (the page redraws every second).
function untilShown (page, selector, re, what, timeout = 8000) {
  return waitFor(async () => re.test(await textOf(page, selector)),
    { timeout, interval: 100, what: `${what} (${selector} matching ${re})` })
}

// A request held open by the app until aborted; errors expected on abort.
function hold (url) {
  const req = http.get(url, { agent: false }, (res) => res.resume())
  req.on('error', () => {})
  return req
}

// An app whose requests take ?ms= milliseconds, or, with ?hold, until the file `release` exists
// (the balancer lets a worker finish a request whose client left, so aborting is not enough).
function writeApp (dir) {
  const file = path.join(dir, 'app.js')
  const release = path.join(dir, 'release')
  fs.writeFileSync(file, `'use strict'
const fs = require('node:fs')
module.exports = (req, res) => {
  const url = new URL(req.url, 'http://x')
  if (!url.searchParams.has('hold')) {
    return setTimeout(() => res.end('done\\n'), Number(url.searchParams.get('ms')) || 0)
  }
  const deadline = Date.now() + 20000
  const poll = setInterval(() => {
    if (!fs.existsSync(${JSON.stringify(release)}) && Date.now() < deadline) return
    clearInterval(poll)
    res.end('released\\n')
  }, 50)
}
`)
  return { file, release: () => fs.writeFileSync(release, '') }
}

t.test('GET /: the page with a strict Content-Security-Policy naming its inline script and style', async (t) => {
  const [port] = await freePorts(1)
  const listener = new StatsListener({
    host: '127.0.0.1',
    port,
    registry: () => ({ contentType: 'text/plain', metrics: async () => 'm 1\n' }),
    status: () => ({ phase: 'running' })
  })
  await listener.start()
  t.teardown(() => listener.stop())
  const base = `http://127.0.0.1:${port}`

  const page = await request(`${base}/`)
  t.equal(page.status, 200)
  t.equal(page.headers['content-type'], 'text/html; charset=utf-8')
  t.equal(page.headers['x-content-type-options'], 'nosniff')
  const csp = page.headers['content-security-policy']
  t.match(csp, /default-src 'none'/)
  t.match(csp, /connect-src 'self'/)
  t.match(csp, /frame-ancestors 'none'/)
  t.notMatch(csp, /unsafe-/, 'no unsafe-inline, unsafe-eval or unsafe-hashes')
  const hash = (text) => `'sha256-${crypto.createHash('sha256').update(text).digest('base64')}'`
  const script = page.body.match(/<script>([\s\S]*?)<\/script>/)[1]
  const style = page.body.match(/<style>([\s\S]*?)<\/style>/)[1]
  t.match(csp, new RegExp(`script-src ${literal(hash(script))}(;|$)`), 'the inline script, by hash, and nothing else')
  t.match(csp, new RegExp(`style-src ${literal(hash(style))}(;|$)`), 'the inline style, by hash')
  t.equal((page.body.match(/<script/g) || []).length, 1, 'one script element')
  t.notMatch(page.body, /\s(src|href)="(https?:)?\/\//, 'nothing loaded from elsewhere')
  t.notMatch(page.body, / on[a-z]+="/, 'no inline event handlers')

  const head = await request(`${base}/`, { method: 'HEAD' })
  t.equal(head.status, 200)
  t.equal(head.body, '', 'HEAD: headers only')
  t.equal((await request(`${base}/metrics`)).body, 'm 1\n', '/metrics as before')
  t.same(JSON.parse((await request(`${base}/status`)).body), { phase: 'running' }, '/status as before')
  t.equal((await request(`${base}/index.php`)).status, 404)
})

function literal (text) { return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&') }

t.test('a running pool in the browser: workers, queue, histogram, exits, live refresh, ' +
  'and the pool gone', { skip: MISSING }, async (t) => {
  const dir = tempDir(t, 'pool-status-page-')
  const [statsPort, frontPort, workerPort] = await freePorts(4)
  const app = writeApp(dir)
  const pool = new Pool({
    app: app.file,
    workers: 2,
    workerPort,
    statsPort,
    fronts: [createBalancer({ port: frontPort, stopAnnounce: 100, accessLog: false })],
    logger: pino({ level: 'silent' })
  })
  const held = []
  t.teardown(async () => {
    app.release()
    for (const req of held) req.destroy()
    await pool.kill()
  })
  await pool.start()
  const front = `http://127.0.0.1:${frontPort}`
  for (let i = 0; i < 3; i++) t.equal((await request(`${front}/fast?i=${i}`)).status, 200)
  // "first" balancing: slot 1 takes the slow request while slot 2 stays free.
  held.push(hold(`${front}/slow?hold&name=first-slow`))
  await waitFor(() => pool.workers().find((w) => w.request?.url.startsWith('/slow')),
    { what: 'the slow request running' })

  const page = await newPage(t)
  await page.goto(`http://127.0.0.1:${statsPort}/`)
  await untilShown(page, '#workers tbody', /busy/, 'the first draw')
  const rows = page.locator('#workers tbody tr')
  t.equal(await rows.count(), 2, 'one row per worker')
  const row = (slot) => page.locator(`#workers tbody tr[data-slot="${slot}"]`)
  t.equal(await row(1).locator('.badge').first().innerText(), 'busy', 'slot 1: busy, in words')
  t.equal(await row(2).locator('.badge').first().innerText(), 'ready', 'slot 2: ready')
  const [busyColour, readyColour] = await Promise.all([1, 2].map((slot) => row(slot).locator('.badge').first()
    .evaluate((el) => window.getComputedStyle(el).backgroundColor)))
  t.not(busyColour, readyColour, 'and in different colours')
  t.ok(await page.getByText('GET /slow?hold&name=first-slow').isVisible(), 'the running request\'s URL is on screen')
  t.match(await row(1).locator('td.age').innerText(), /^\d+\.\d s$/, 'with its age')
  const [w1, w2] = pool.workers()
  t.match(await row(1).innerText(), new RegExp(`\\b${w1.pid}\\b`), 'and the worker\'s pid')
  t.match(await row(1).innerText(), /\d MiB/, 'its RSS')
  t.notOk(await page.locator('#tunnels-head').isVisible(), 'no Tunnels column for workers that never had one')
  t.equal(await textOf(page, '#queue'), '0', 'nothing queued yet')
  t.match(await textOf(page, '#phase'), /running/)
  t.match(await textOf(page, '#front'), new RegExp(`embedded\\s+http://127\\.0\\.0\\.1:${frontPort}`))
  t.match(await textOf(page, '#h-duration figcaption'), /^Response time\s+3 requests, mean \d/,
    'the response-time histogram counts the 3 answered requests')
  const bars = await page.locator('#h-duration svg rect.bar')
    .evaluateAll((rects) => rects.map((r) => ({ count: Number(r.dataset.count), height: r.getBBox().height })))
  t.equal(bars.reduce((sum, b) => sum + b.count, 0), 3, 'its bars add up to them')
  t.ok(bars.some((b) => b.count > 0 && b.height > 10), 'and a bar is drawn for them')
  t.match(await textOf(page, '#updated'), /^updated \d+(\.\d)? s ago$/, '"updated … ago" is shown')

  // The page redraws by itself: an exit, a respawned worker, more requests, a queue.
  await page.evaluate(() => { window.notReloaded = true })
  process.kill(w2.pid, 'SIGKILL')
  await untilShown(page, '#exits tbody', /crashed/, 'the exit in the recent exits')
  t.match(await textOf(page, '#exits tbody tr'), /\b2\b[\s\S]*crashed[\s\S]*SIGKILL/, 'slot 2 crashed, by SIGKILL')
  await waitFor(() => pool.workers()[1].state === 'ready' && pool.workers()[1].pid !== w2.pid,
    { what: 'slot 2 respawned' })
  const respawned = pool.workers()[1].pid
  await untilShown(page, '#workers tbody tr[data-slot="2"]', new RegExp(`ready\\s+${respawned}\\b`),
    'the new pid of slot 2')
  t.match(await row(2).innerText(), /crashed \(SIGKILL\), \d/, 'its last exit, in its row')
  for (let i = 0; i < 2; i++) t.equal((await request(`${front}/fast?again=${i}`)).status, 200)
  await untilShown(page, '#h-duration figcaption', /\b5 requests\b/, 'the histogram counting two more')
  await untilShown(page, '#workers tfoot', /\b5\b/, 'the total requests')
  held.push(hold(`${front}/slow?hold&name=second-slow`))
  await waitFor(() => pool.workers().every((w) => w.state === 'busy'), { what: 'both workers busy' })
  held.push(hold(`${front}/slow?hold&name=queued`))
  await untilShown(page, '#queue', /^1$/, 'one request queued')
  await untilShown(page, '#workers tbody tr[data-slot="2"]', /second-slow/, 'the second slow request')
  t.equal(await page.evaluate(() => window.notReloaded), true, 'all of it without reloading the page')
  t.same(page.consoleErrors, [], 'no errors in the console (no CSP violation)')
  t.same(page.pageErrors, [], 'no exception in the page')
  await page.screenshot({ path: path.join(dir, 'running.png'), fullPage: true })
  fs.copyFileSync(path.join(dir, 'running.png'), SHOT)

  // The pool stops: a banner says so, and the data on screen is marked old.
  app.release()
  await pool.stop()
  await untilShown(page, '#banner', /The pool is not answering/, 'the error banner')
  t.ok(await page.locator('#banner').isVisible(), 'the banner is visible')
  t.equal(await page.locator('#banner').getAttribute('role'), 'alert', 'and announced')
  t.ok(await page.locator('main.stale').count(), 'the old data is dimmed')
  await untilShown(page, '#updated', /^updated ([2-9]|\d\d+)(\.\d)? s ago$/, 'the age of the data growing')
  await page.screenshot({ path: path.join(dir, 'error.png'), fullPage: true })
  fs.copyFileSync(path.join(dir, 'error.png'), SHOT_ERROR)
})

// Set data: what a pool shows only in rarer moments or with fields it may not have yet.
t.test('set data in the browser: CPU, the pool\'s own exit list, HAProxy, quantiles, a hostile URL kept as text, ' +
  'the policy enforced', { skip: MISSING }, async (t) => {
  const [port] = await freePorts(1)
  const now = () => Date.now()
  const worker = (slot, fields) => ({
    slot,
    name: `worker${slot}`,
    pid: 1000 + slot,
    host: '127.0.0.1',
    port: 9001 + slot,
    state: 'ready',
    startedAt: now() - 61000,
    readyAt: now() - 60000,
    uptime: 60000,
    requests: 7,
    totalRequests: 9,
    queued: 0,
    restarts: 1,
    rss: 100 * 1024 * 1024,
    request: null,
    lastExit: null,
    ...fields
  })
  const hostile = '/search?q=<img src=x onerror="window.pwned=1">'
  // CPU time as the pool reports it (/proc): each answer 1 s later, worker 1 having used 974 ms.
  let answers = 0
  const cpu = (perSecond) => ({ user: answers * perSecond * 1000, system: 0, at: 1e12 + answers * 1000 })
  const status = () => ({
    pid: 4242,
    app: '/srv/app/server.js',
    phase: 'running',
    target: 3,
    front: [
      { type: 'embedded', url: 'http://127.0.0.1:9001', queue: 4, inFlight: 1, notes: { 1: {}, 2: { badge: 'benched', text: '3 failed' } } },
      {
        type: 'haproxy',
        target: 'backend app',
        queue: 0,
        table: {
          caption: 'backend app via /run/haproxy.sock: reachable, queue 0',
          head: ['Server', 'Wanted', 'Seen', 'Up', 'Sessions'],
          rows: [['worker1', 'ready', 'ready', { badge: 'UP', tone: 'ready' }, 1],
            ['worker2', 'maint', 'maint', { badge: 'DOWN', tone: 'bad' }, 0]]
        }
      }
    ],
    queue: 4,
    reload: { stage: 'rolling', pending: 1, active: [], replaced: 1 },
    workers: answers++ >= 0 && [
      worker(1,
        {
          state: 'busy',
          cpu: cpu(974),
          open: 3,
          request: { method: 'GET', url: hostile, startedAt: now() - 1500, age: 1500 }
        }),
      worker(2, { cpu: cpu(4), tunnels: 12, tunnelsOpened: 15 }),
      worker(3,
        {
          state: 'dead',
          pid: null,
          readyAt: null,
          uptime: 0,
          rss: null,
          lastExit: { code: null, signal: 'SIGKILL', reason: 'timeout', at: now() - 5000 }
        })
    ],
    recentExits: [
      { slot: 3, pid: 777, code: null, signal: 'SIGKILL', reason: 'timeout', planned: false, at: now() - 5000 },
      { slot: 2, pid: 666, code: 0, signal: null, reason: 'reload', planned: true, at: now() - 90000 }
    ]
  })
  // 10 responses: 8 × 200 and 2 × 503, all between 100 and 250 ms, 2 s in all.
  const bucket = (le, code, n) =>
    `pool_request_duration_seconds_bucket{le="${le}",code="${code}"} ${le === 0.1 ? 0 : n}`
  const buckets = (code, n) => [0.1, 0.25, 0.5].map((le) => bucket(le, code, n)).join('\n') +
    `\npool_request_duration_seconds_bucket{le="+Inf",code="${code}"} ` +
    `${n}\npool_request_duration_seconds_sum{code="${code}"} ` +
    `${n / 5}\npool_request_duration_seconds_count{code="${code}"} ${n}\n`
  const metrics = '# HELP pool_request_duration_seconds x\n# TYPE pool_request_duration_seconds histogram\n' +
    buckets('200', 8) + buckets('503', 2) +
    'pool_failures_total{reason="queue_timeout"} 2\npool_failures_total{reason="worker_hung"} ' +
    '0\npool_redispatches_total{reason="refused"} 1\npool_queue_length 4\n'
  const listener = new StatsListener({
    host: '127.0.0.1',
    port,
    registry: () => ({ contentType: 'text/plain; version=0.0.4', metrics: async () => metrics }),
    status
  })
  await listener.start()
  t.teardown(() => listener.stop())

  const page = await newPage(t)
  await page.goto(`http://127.0.0.1:${port}/`)
  await untilShown(page, '#workers tbody', /busy/, 'the first draw')
  t.equal(await page.locator('#workers tbody tr').count(), 3)
  t.ok(await page.locator('#cpu-head').isVisible(), 'a CPU column when the pool reports CPU')
  t.ok(await page.locator('#tunnels-head').isVisible(), 'a Tunnels column once a worker has had WebSockets')
  t.equal(await page.locator('#workers tbody tr[data-slot="2"] td.tunnels').innerText(), '12', 'its WebSockets open')
  await untilShown(page, '#workers tbody tr[data-slot="1"]', /\b97 %/, 'CPU % from two answers\' CPU time')
  t.ok(await page.getByText(`GET ${hostile}`).isVisible(), 'a request URL with markup in it is shown as it is')
  t.equal(await page.locator('#workers img').count(), 0, 'and never becomes an element')
  t.match(await page.locator('#workers tbody tr[data-slot="2"]').innerText(), /ready\s+benched\s+3 failed/,
    'the balancer\'s view beside the pool\'s')
  t.match(await page.locator('#workers tbody tr[data-slot="3"]').innerText(),
    /dead[\s\S]*timeout \(SIGKILL\), 5\.\d s ago/, 'a dead slot and why')

  t.match(await textOf(page, '#exits-caption'), /The pool's last 20 worker exits/,
    'the pool\'s own list of exits, when it has one')
  const exits = await page.locator('#exits tbody tr').allInnerTexts()
  t.equal(exits.length, 2)
  t.match(exits[0], /5\.\d s ago[\s\S]*\b3\s+777\s+timeout\s+–\s+SIGKILL/, 'newest first: slot, pid, reason, signal')
  t.match(exits[1], /1m 30s ago[\s\S]*\b2\s+666\s+reload\s+0\b/)

  t.equal(await textOf(page, '#queue'), '4')
  t.equal(await textOf(page, '#in-flight'), '3',
    'in flight: the requests the workers hold, 3 on one worker (--worker-concurrency), not the workers holding one')
  t.match(await page.locator('#workers tbody tr[data-slot="1"]').innerText(), /onerror="window\.pwned=1">\s*\+2 more/,
    'the oldest request shown, and how many more the worker holds')
  t.match(await textOf(page, '#ready'), /^2\s*\/ 3 wanted$/)
  t.equal(await textOf(page, '#reload'), 'rolling, 1 replaced, 1 pending')
  t.match(await textOf(page, '#front'), /embedded[\s\S]*; haproxy/, 'both fronts')
  t.ok(await page.locator('#front-tables').isVisible(), 'the HAProxy section')
  t.match(await textOf(page, '#front-tables-list table'), /worker2\s+maint\s+maint\s+DOWN\s+0/)

  t.match(await textOf(page, '#h-duration figcaption'), /10 requests, mean 200 ms, p50 175 ms, p90 235 ms/,
    'the response codes added up; quantiles as Prometheus estimates them')
  t.notOk(await page.locator('#h-wait').isVisible(), 'no chart for a histogram the pool does not have')
  t.match(await page.locator('#codes tbody').innerText(), /200\s+8\s+80\.0 %\s+503\s+2\s+20\.0 %/)
  t.match(await page.locator('#failures tbody').innerText(), /^queue_timeout\s+2\s+redispatched \(refused\)\s+1$/,
    'failures that happened, none of those that did not')

  await page.selectOption('#window', '60')
  await untilShown(page, '#h-duration figcaption', /no requests/, 'nothing new in the last minute')

  await page.getByRole('button', { name: 'Pause' }).click()
  t.equal(await page.locator('#pause').getAttribute('aria-pressed'), 'true')
  await untilShown(page, '#updated', /\(paused\)/, 'paused')

  t.same(page.consoleErrors, [], 'no errors in the console so far')
  // The policy is in force: an inline handler, even one put into the page, does not run.
  await page.evaluate(() => document.body.insertAdjacentHTML('beforeend',
    '<img src="data:x" onerror="window.pwned = 2">'))
  await waitFor(() => page.consoleErrors.some((e) => /Content Security Policy/.test(e)),
    { what: 'the CSP violation report', interval: 50 })
  t.equal(await page.evaluate(() => window.pwned), undefined, 'the injected handler was refused')
  t.same(page.pageErrors, [], 'no exception in the page')
})
