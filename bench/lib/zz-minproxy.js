const http = require('http')
const { workers, port } = JSON.parse(process.env.CONFIG)
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
http.createServer((req, res) => {
  const up = http.request({ host: '127.0.0.1', port: workers[0].port, path: req.url, method: req.method, headers: req.headers, agent }, (ures) => {
    const chunks = []
    ures.on('data', c => chunks.push(c))
    ures.on('end', () => { res.writeHead(ures.statusCode, ures.rawHeaders); res.end(Buffer.concat(chunks)) })
  })
  up.end()
}).listen(port, '127.0.0.1', () => process.send({ ready: true }))
process.on('disconnect', () => process.exit(0))
