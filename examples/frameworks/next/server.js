// Next.js's custom server, as its docs write it. One change: `dir: __dirname`, so that it finds
// its pages and its build wherever it is started from (pool start runs the app in the pool's
// working directory), and so that a release switched by a symlink is found where it now is.
const { createServer } = require('node:http')
const next = require('next')

const port = parseInt(process.env.PORT || '3000', 10)
const dev = process.env.NODE_ENV !== 'production'
const app = next({ dev, dir: __dirname })
const handle = app.getRequestHandler()

app.prepare().then(() => {
  createServer((req, res) => {
    handle(req, res)
  }).listen(port)

  console.log(`> Server listening at http://localhost:${port} as ${dev ? 'development' : process.env.NODE_ENV}`)
})
