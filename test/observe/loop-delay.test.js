'use strict'
// The supervisor's event-loop lag (lib/observe/loop-delay.js): an unscraped pool's registry wakes
// nobody, and once scraped the lag gauges keep prom-client's names and say lag, not period.
const t = require('tap')
const fs = require('node:fs')
const { spawn } = require('node:child_process')
const { PoolMetrics } = require('../../lib/observe/metrics')

// How often the process's main thread has slept and been woken so far.
function wakes (pid) {
  return Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'latin1'))[1])
}

// A process holding a pool's registry, scraped once (`scrape`) or never, then idle.
async function idleRegistry (t, { scrape }) {
  const code = `
    const { PoolMetrics } = require(${JSON.stringify(require.resolve('../../lib/observe/metrics'))})
    const metrics = new PoolMetrics(() => [])
    const ready = () => process.stdout.write('ready\\n')
    if (${scrape}) metrics.registry.metrics().then(ready); else ready()
    setInterval(() => {}, 1e9) // alive, and asleep
  `
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => child.kill('SIGKILL'))
  await new Promise((resolve) => child.stdout.once('data', resolve))
  await new Promise((resolve) => setTimeout(resolve, 300)) // its start settles
  return child.pid
}

t.test('an idle pool\'s registry wakes its process only once a second, ' +
  'and only once scraped', { skip: !fs.existsSync('/proc/self/status') && 'no /proc here' }, async (t) => {
  const quiet = await idleRegistry(t, { scrape: false })
  const scraped = await idleRegistry(t, { scrape: true })
  const before = [wakes(quiet), wakes(scraped)]
  await new Promise((resolve) => setTimeout(resolve, 2000))
  const [unscraped, sampling] = [wakes(quiet) - before[0], wakes(scraped) - before[1]]
  // prom-client's monitor alone samples every 10 ms: some 200 wakes in these 2 s.
  t.ok(unscraped <= 10, `never scraped: ${unscraped} wakes in 2 s`)
  t.ok(sampling <= 20, `scraped: ${sampling} wakes in 2 s (a sample a second)`)
})

t.test('the lag gauges: prom-client\'s names, the sampling period taken off, a held-up loop seen', async (t) => {
  const metrics = new PoolMetrics(() => [])
  t.teardown(() => metrics.close())
  const value = async (name) => {
    const text = await metrics.registry.getSingleMetricAsString(`pool_supervisor_nodejs_eventloop_lag_${name}`)
    return Number(/ ([\d.e+-]+)$/m.exec(text)[1])
  }
  const names = (await metrics.registry.getMetricsAsJSON()).map((m) => m.name).filter((n) => n.includes('eventloop'))
  const suffixes = ['seconds', 'max_seconds', 'mean_seconds', 'min_seconds', 'p50_seconds', 'p90_seconds',
    'p99_seconds', 'stddev_seconds']
  t.same(names.sort(),
    suffixes.map((n) => `pool_supervisor_nodejs_eventloop_lag_${n}`).sort(), 'one of each, under prom-client\'s names')
  await metrics.registry.metrics() // the first scrape: sampling begins, the first sample a second later
  await new Promise((resolve) => setTimeout(resolve, 1200))
  const until = Date.now() + 1500
  while (Date.now() < until) { /* the loop held up across the second sample */ }
  await new Promise((resolve) => setTimeout(resolve, 1300))
  await metrics.registry.metrics()
  const max = await value('max_seconds')
  const min = await value('min_seconds')
  t.ok(max >= 0.4 && max < 2, `the held-up sample's lag: ${max} s`)
  t.ok(min < 0.5, `the period is taken off: the least lag is ${min} s, not a second more`)
})
