'use strict'

// Node's own answer: `cluster` with round-robin scheduling (the primary accepts and hands each
// connection to the next worker, busy or not). $WORKERS workers serve the bench app on $PORT.

const cluster = require('node:cluster')
const http = require('node:http')
const { createApp } = require('./app')

cluster.schedulingPolicy = cluster.SCHED_RR

if (cluster.isPrimary) {
  const n = Number(process.env.WORKERS)
  let listening = 0
  cluster.on('listening', () => { if (++listening === n) process.send({ ready: true }) })
  for (let i = 0; i < n; i++) cluster.fork()
  process.on('disconnect', () => {
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGKILL')
    process.exit(0)
  })
} else {
  http.createServer(createApp()).listen(Number(process.env.PORT), '127.0.0.1')
}
