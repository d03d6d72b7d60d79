'use strict'

// Saturating load in a process of its own (forked by procs.forkReady), so that its event loop is
// not the one being measured: autocannon's keep-alive connections, each sending its next request
// the moment the last one is answered, for at most `seconds`. { cmd: 'stop' } ends it early;
// either way it answers { result: { rps, total, non2xx, errors } } and exits.
//
// CONFIG (environment, JSON): { url, connections, seconds }

const autocannon = require('autocannon')

const { url, connections, seconds } = JSON.parse(process.env.CONFIG)

const tracker = autocannon({ url, connections, duration: seconds }, (err, r) => {
  const result = err ? { error: err.message } : { rps: Math.round(r.requests.average), total: r.requests.total, non2xx: r.non2xx, errors: r.errors }
  process.send({ result }, () => process.exit(0))
})

process.on('message', (m) => { if (m && m.cmd === 'stop') tracker.stop() })
process.on('disconnect', () => process.exit(0))
process.send({ ready: true })
