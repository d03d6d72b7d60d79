'use strict'

// The bench app (bench/lib/app.js) as PM2 runs it in cluster mode (`pm2 start pm2-app.js -i N`):
// PM2's daemon is the cluster primary and deals the connections. On SIGINT (what `pm2 reload`
// and `pm2 stop` send) it stops accepting and exits once its requests are answered, as PM2's
// graceful-shutdown documentation asks an app to; PM2 SIGKILLs it after its kill_timeout.

const http = require('node:http')
const { createApp } = require('./app')

const server = http.createServer(createApp())
server.listen(Number(process.env.PORT), '127.0.0.1')
process.on('SIGINT', () => {
  server.close(() => process.exit(0))
  server.closeIdleConnections()
})
