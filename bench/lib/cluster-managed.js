'use strict'

// Node's cluster as people run it in production: round-robin scheduling, a primary that forks a
// new worker whenever one exits, and the rolling restart of the cluster docs' pattern: for each
// worker in turn, fork its replacement, wait until it listens, then `disconnect()` the old one
// (it stops accepting, finishes what it has, and exits). It has no request timeout and no health
// check: a worker that hangs or is stopped keeps its share of new connections.
// $WORKERS workers serve the bench app on $PORT, or $APP, an app that listens on $PORT itself.
//
// Messages: 'pids' → { pids: [pid of each live worker, in fork order] };
//           'reload' → { reloaded: { ms, replaced } } once every worker has been replaced.

const cluster = require('node:cluster')
const http = require('node:http')
const { createApp } = require('./app')

cluster.schedulingPolicy = cluster.SCHED_RR

if (cluster.isPrimary) {
  const n = Number(process.env.WORKERS)
  let stopping = false
  let listening = 0
  const retiring = new Set() // workers a reload disconnected on purpose: not respawned
  const onListening = () => { if (++listening === n) process.send({ ready: true }) }
  cluster.on('listening', onListening)
  cluster.on('exit', (worker) => {
    if (retiring.delete(worker)) return
    if (!stopping) cluster.fork()
  })
  for (let i = 0; i < n; i++) cluster.fork()

  const listeningOf = (worker) => new Promise((resolve) => worker.once('listening', resolve))
  async function rollingRestart () {
    cluster.off('listening', onListening)
    const started = performance.now()
    const old = Object.values(cluster.workers)
    for (const worker of old) {
      if (worker.isDead()) continue
      const next = cluster.fork()
      await listeningOf(next)
      retiring.add(worker)
      const gone = new Promise((resolve) => worker.once('exit', resolve))
      worker.disconnect()
      await gone
    }
    return { ms: Math.round(performance.now() - started), replaced: old.length }
  }

  let reloading = null
  process.on('message', async (m) => {
    if (m === 'pids') process.send({ pids: Object.values(cluster.workers).filter((w) => !w.isDead()).map((w) => w.process.pid) })
    if (m === 'reload') {
      reloading ??= rollingRestart().finally(() => { reloading = null })
      process.send({ reloaded: await reloading })
    }
  })
  process.on('disconnect', () => {
    stopping = true
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGKILL')
    process.exit(0)
  })
} else if (process.env.APP) {
  require(process.env.APP) // an app that listens on $PORT itself (the SSR demo)
} else {
  http.createServer(createApp()).listen(Number(process.env.PORT), '127.0.0.1')
}
