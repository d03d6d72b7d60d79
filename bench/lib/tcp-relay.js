'use strict'

// The floor of one extra hop for the websocket part (bench/websocket.js): a minimal TCP relay in
// a process of its own, in front of one app process. Each connection is joined to one of its own
// to the app, both ways, with Node's pipe(): no parsing, no queue, no limits.
//
//   node bench/lib/tcp-relay.js LISTEN_PORT APP_PORT

const net = require('node:net')

const [listenPort, appPort] = process.argv.slice(2).map(Number)

net.createServer((client) => {
  const app = net.connect(appPort, '127.0.0.1')
  client.setNoDelay(true)
  app.setNoDelay(true)
  client.pipe(app)
  app.pipe(client)
  const end = () => { client.destroy(); app.destroy() }
  for (const socket of [client, app]) {
    socket.on('error', end)
    socket.on('close', end)
  }
}).listen(listenPort, '127.0.0.1')
