'use strict'

// The embedded balancer in a process of its own, as in `pool start` (where it lives in the
// supervisor), told about already-running workers through its Front hooks.
// $CONFIG: JSON { options, workers: [{ slot, port }] }.

const { createBalancer } = require('./internals')

const { options, workers } = JSON.parse(process.env.CONFIG)
const balancer = createBalancer({ accessLog: false, ...options })
balancer.start().then(() => {
  for (const w of workers) balancer.workerReady({ slot: w.slot, name: `worker${w.slot}`, host: '127.0.0.1', port: w.port, state: 'ready' })
  process.send({ ready: true })
})
process.on('message', async (m) => {
  if (m === 'status') process.send({ status: balancer.statusDetail() })
})
process.on('disconnect', async () => {
  await balancer.stop()
  process.exit(0)
})
