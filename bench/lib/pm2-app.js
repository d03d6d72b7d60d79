'use strict'

// The bench app (bench/lib/app.js) as PM2 runs it in cluster mode (`pm2 start pm2-app.js -i N`):
// PM2's daemon is the cluster primary and deals the connections. On SIGINT (what `pm2 reload`
// and `pm2 stop` send) it stops accepting and exits once its requests are answered, as PM2's
// graceful-shutdown documentation asks an app to; PM2 SIGKILLs it after its kill_timeout.

const http = require('node:http')
const { createApp } = require('./app')

// $APP: an app that listens on $PORT itself (the SSR demo), closed on SIGINT the same way.
const servers = []
const listen = http.Server.prototype.listen
http.Server.prototype.listen = function (...args) { servers.push(this); return listen.apply(this, args) }
if (process.env.APP) require(process.env.APP)
else http.createServer(createApp()).listen(Number(process.env.PORT), '127.0.0.1')
process.on('SIGINT', () => {
  let open = servers.length
  if (!open) process.exit(0)
  for (const server of servers) {
    server.close(() => { if (--open === 0) process.exit(0) })
    server.closeIdleConnections()
  }
})
