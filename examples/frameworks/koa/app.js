// Koa's "Hello World", as its docs write it, with the port from $PORT.
const Koa = require('koa')
const app = new Koa()

app.use(async ctx => {
  ctx.body = 'Hello World'
})

app.listen(process.env.PORT || 3000)
