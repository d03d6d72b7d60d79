'use strict'

// Node's cluster as people run it in production: round-robin scheduling and a primary that forks
// a new worker whenever one exits (bench/lib/cluster-primary.js does not respawn). It has no
// request timeout and no health check: a worker that hangs or is stopped keeps its share of new
// connections. $WORKERS workers serve the bench app on $PORT.
//
// Messages: 'pids' → { pids: [pid of each live worker, in fork order] }.

const cluster = require('node:cluster')
const http = require('node:http')
const { createApp } = require('./app')

cluster.schedulingPolicy = cluster.SCHED_RR

if (cluster.isPrimary) {
  const n = Number(process.env.WORKERS)
  let stopping = false
  let listening = 0
  cluster.on('listening', () => { if (++listening === n) process.send({ ready: true }) })
  cluster.on('exit', () => { if (!stopping) cluster.fork() })
  for (let i = 0; i < n; i++) cluster.fork()
  process.on('message', (m) => {
    if (m === 'pids') process.send({ pids: Object.values(cluster.workers).map((w) => w.process.pid) })
  })
  process.on('disconnect', () => {
    stopping = true
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGKILL')
    process.exit(0)
  })
} else {
  http.createServer(createApp()).listen(Number(process.env.PORT), '127.0.0.1')
}
