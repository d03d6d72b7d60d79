'use strict'

// The floor of a Node balancer for the pool's rule, against which bench/costs.js reads the
// embedded balancer's cost: Node's http server, one central FIFO, at most one request per
// worker, kept-alive connections to the workers, buffered responses; no logs, no metrics, no
// retries, no limits. $CONFIG: JSON { port, workers: [{ port }], cap }. With `cap` above 1 (at
// most that many requests per worker, dealt in turn, whatever the worker is doing) it is a plain
// relay for pages on which holding several requests costs a worker nothing: bench/concurrency.js
// reads it against Node's cluster on pages awaiting data.

const http = require('node:http')

const { port, workers, cap = 1 } = JSON.parse(process.env.CONFIG)
const targets = workers.map((w) => ({ port: w.port, agent: new http.Agent({ keepAlive: true, maxSockets: cap }) }))
// One entry per place, the workers interleaved, so that a burst is dealt across them in turn.
const free = Array.from({ length: cap }, () => targets).flat()
const queue = []

function dispatch () {
  while (queue.length > 0 && free.length > 0) forward(queue.shift(), free.shift())
}

function forward ({ req, res, body }, worker) {
  const headers = { ...req.headers }
  delete headers.connection // the client's, not the worker connection's (kept alive)
  // Once per request, however it ends: the worker's place is free again.
  let settled = false
  const settle = (status, answerHeaders, answerBody) => {
    if (settled) return
    settled = true
    free.push(worker)
    dispatch()
    res.writeHead(status, answerHeaders)
    res.end(answerBody)
  }
  const upstream = http.request({ host: '127.0.0.1', port: worker.port, method: req.method, path: req.url, headers, agent: worker.agent }, (answer) => {
    const chunks = []
    answer.on('data', (chunk) => chunks.push(chunk))
    answer.on('end', () => settle(answer.statusCode, answer.headers, Buffer.concat(chunks)))
    answer.on('close', () => { if (!answer.complete) settle(502) }) // cut short by the worker
  })
  upstream.on('error', () => settle(502))
  upstream.end(body)
}

http.createServer((req, res) => {
  const chunks = []
  req.on('data', (chunk) => chunks.push(chunk))
  req.on('end', () => {
    queue.push({ req, res, body: Buffer.concat(chunks) })
    dispatch()
  })
}).listen(port, '127.0.0.1', () => process.send({ ready: true }))

process.on('disconnect', () => process.exit(0))
