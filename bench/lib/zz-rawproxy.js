const http = require('http'); const net = require('net')
const { workers, port } = JSON.parse(process.env.CONFIG)
const conns = workers.map(w => ({ port: w.port, socket: null, busy: false }))
const queue = []
function connect (c) { c.socket = net.connect(c.port, '127.0.0.1'); c.socket.setNoDelay(true); c.buf = null; c.socket.on('data', d => onData(c, d)); c.socket.on('close', () => { c.socket = null }) }
function onData (c, d) {
  c.buf = c.buf ? Buffer.concat([c.buf, d]) : d
  const he = c.buf.indexOf('\r\n\r\n'); if (he < 0) return
  const head = c.buf.toString('latin1', 0, he)
  const m = /content-length: *(\d+)/i.exec(head); const len = Number(m[1])
  if (c.buf.length < he + 4 + len) return
  const body = c.buf.subarray(he + 4, he + 4 + len); c.buf = null
  const lines = head.split('\r\n'); const status = Number(lines[0].split(' ')[1])
  const hdrs = []
  for (let i = 1; i < lines.length; i++) { const k = lines[i].indexOf(':'); const name = lines[i].slice(0, k); if (/^(connection|keep-alive)$/i.test(name)) continue; hdrs.push(name, lines[i].slice(k + 1).trim()) }
  const res = c.res; c.res = null; c.busy = false
  res.writeHead(status, hdrs); res.end(body)
  pump()
}
function pump () { while (queue.length) { const c = conns.find(c => !c.busy); if (!c) return; send(c, queue.shift()) } }
function send (c, { req, res }) {
  if (!c.socket) connect(c)
  c.busy = true; c.res = res
  let h = `${req.method} ${req.url} HTTP/1.1\r\n`
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (!/^(connection|keep-alive)$/i.test(req.rawHeaders[i])) h += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`
  h += 'Connection: keep-alive\r\n\r\n'
  c.socket.write(h, 'latin1')
}
http.createServer((req, res) => { queue.push({ req, res }); pump() }).listen(port, '127.0.0.1', () => process.send({ ready: true }))
process.on('disconnect', () => process.exit(0))
