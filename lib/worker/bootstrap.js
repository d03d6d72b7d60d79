'use strict'

// The file the supervisor forks. It is not the app: it loads the app through the runtime so
// that all three app forms (a listener, a server, or a file calling listen()) behave alike.
const { WorkerRuntime } = require('./runtime')

new WorkerRuntime().boot(process.env.POOL_APP)
