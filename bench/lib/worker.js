'use strict'

// A plain forked worker: the bench app on $PORT (127.0.0.1). Tells its parent when it listens,
// and, with $REPORT_BUSY, how long each request kept it busy.

const http = require('node:http')
const { createApp } = require('./app')

const onBusy = process.env.REPORT_BUSY ? (m) => process.send({ busy: m }) : undefined
const server = http.createServer(createApp({ onBusy }))
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.send({ ready: true }))
process.on('disconnect', () => process.exit(0))
