'use strict'

// A GET's path through the embedded balancer, counted: which of the balancer's objects and
// modules it goes through and how many calls it takes, from the client's request to the worker
// and from the worker's response back to the client; how deep the stack gets; how many calls go
// back up into an object already below on the stack (an owner called back); and whether a
// request is ever written to a worker from inside another response's socket callback (a
// re-entrant write).
//
//   node bench/request-path.js [--json]
//
// One worker (a plain Node server in a process of its own, so that none of its calls count),
// maxconn 1, and two GETs sent at once: the second waits in the queue and is handed the worker
// when the first ends, which is the hand-off a re-entrant write would come from. The balancer's
// modules are wrapped as they load: every method of their classes and every function they export.
// Counted for the first request, after a warm-up: "in" from its arrival to its write to the
// worker, "out" from the worker's first byte to the client's response end.

const Module = require('node:module')
const path = require('node:path')
const http = require('node:http')
const { spawn } = require('node:child_process')

const LIB = path.join(__dirname, '..', 'lib')
const TRACED = [path.join(LIB, 'fronts', 'balancer') + path.sep, path.join(LIB, 'protocol') + path.sep]
const WARM = 20

// ---- the wrapping ------------------------------------------------------------------------------

const stack = [] // { object, module } of the traced calls under way
const trace = { on: false, chains: { in: new Set(), out: new Set() }, names: new Map(), calls: 0, hops: 0, objects: new Set(), modules: new Set(), maxDepth: 0, reentrant: 0, kinds: new Set() }
const reentrantWrites = []
let inWorkerRead = 0 // depth of Connection.onData frames on the stack

function wrap (fn, name, module) {
  if (fn.__traced) return fn
  const traced = function (...args) {
    const object = this && typeof this === 'object' && this.constructor !== Object ? this : null
    if (trace.on) {
      trace.calls++
      const caller = stack.at(-1)
      if (!caller || caller.object !== object || object === null) trace.hops++
      trace.modules.add(module)
      trace.names.set(name, (trace.names.get(name) || 0) + 1)
      if (object) {
        trace.objects.add(object)
        // Called back: the callee is below on the stack, under a caller that is another object.
        if (caller && caller.object !== object && stack.some((frame) => frame.object === object)) {
          trace.reentrant++
          trace.kinds.add(`${stack.at(-1).name} → ${name}`)
        }
      }
    }
    stack.push({ object, name })
    trace.maxDepth = Math.max(trace.maxDepth, trace.on ? stack.length : 0)
    const reading = name === 'Connection.onData'
    if (reading) inWorkerRead++
    if (name === 'Connection.send' && inWorkerRead > 0 && trace.on) reentrantWrites.push(stack.map((f) => f.name))
    if (trace.on && (name === 'Connection.send' || name === 'ResponseRelay.write')) {
      const chain = trace.chains[name === 'Connection.send' ? 'in' : 'out']
      for (const frame of stack) if (frame.object) chain.add(frame.object.constructor.name)
    }
    try {
      return fn.apply(this, args)
    } finally {
      if (reading) inWorkerRead--
      stack.pop()
    }
  }
  traced.__traced = true
  Object.defineProperty(traced, 'name', { value: fn.name })
  return traced
}

function wrapClass (cls, module) {
  for (const key of Object.getOwnPropertyNames(cls.prototype)) {
    if (key === 'constructor') continue
    const d = Object.getOwnPropertyDescriptor(cls.prototype, key)
    if (typeof d.value !== 'function') continue
    cls.prototype[key] = wrap(d.value, `${cls.name}.${key}`, module)
  }
}

const isClass = (fn) => typeof fn === 'function' && /^class\b/.test(Function.prototype.toString.call(fn))

const load = Module.prototype.require
Module.prototype.require = function (id) {
  const exports = load.call(this, id)
  let file
  try { file = Module._resolveFilename(id, this) } catch { return exports }
  if (!TRACED.some((dir) => file.startsWith(dir)) || !exports || typeof exports !== 'object') return exports
  if (exports.__tracedModule) return exports
  const module = path.relative(LIB, file)
  for (const [key, value] of Object.entries(exports)) {
    if (isClass(value)) wrapClass(value, module)
    else if (typeof value === 'function') exports[key] = wrap(value, `${module}:${key}`, module)
  }
  Object.defineProperty(exports, '__tracedModule', { value: true })
  return exports
}

// ---- the run -----------------------------------------------------------------------------------

const WORKER_APP = `
  require('node:http').createServer((req, res) => {
    req.resume()
    setTimeout(() => { res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 3 }); res.end('ok\\n') }, 100)
  }).listen(0, '127.0.0.1', function () { process.stdout.write(this.address().port + '\\n') })
`

function get (url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)) }).on('error', reject)
  })
}

async function main () {
  const json = process.argv.includes('--json')
  const worker = spawn(process.execPath, ['-e', WORKER_APP], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise((resolve) => worker.stdout.once('data', (d) => resolve(Number(String(d)))))
  const { freePorts } = require('./lib/procs')
  const [front] = await freePorts(1)
  const { createBalancer } = require('../lib/fronts/balancer')
  const logger = Object.fromEntries(['trace', 'debug', 'info', 'warn', 'error', 'fatal'].map((l) => [l, () => {}]))
  const balancer = createBalancer({ port: front, maxconn: 1, workerConcurrency: 1 }, { logger })
  await balancer.start()
  balancer.workerReady({ slot: 1, name: 'worker1', pid: worker.pid, host: '127.0.0.1', port, state: 'ready' })
  const base = `http://127.0.0.1:${front}`
  for (let i = 0; i < WARM; i++) await Promise.all([get(base + '/'), get(base + '/')])

  const start = () => Object.assign(trace,
    { on: true, chains: { in: new Set(), out: new Set() }, names: new Map(), calls: 0, hops: 0, objects: new Set(), modules: new Set(), maxDepth: 0, reentrant: 0, kinds: new Set() })
  const snap = () => ({
    objects: trace.objects.size,
    classes: [...new Set([...trace.objects].map((o) => o.constructor.name))].sort(),
    modules: trace.modules.size,
    calls: trace.calls,
    hops: trace.hops,
    maxDepth: trace.maxDepth,
    callsBackUp: trace.reentrant,
    callBackKinds: [...trace.kinds],
    // The objects on the stack as the request is written to the worker, and as its response is
    // written to the client: the steps that carry it, rather than those they consult.
    steps: { in: [...trace.chains.in], out: [...trace.chains.out] },
    called: Object.fromEntries(trace.names)
  })
  const phases = {}
  start()
  await get(base + '/')
  trace.on = false
  phases.alone = snap()
  reentrantWrites.length = 0
  start()
  await Promise.all([get(base + '/'), get(base + '/')])
  trace.on = false
  phases.handOff = {
    sends: trace.names.get('Connection.send') ?? 0, // both requests went to the worker...
    queued: trace.names.get('Dispatcher.enqueue') ?? 0, // ...the second after waiting in the queue
    reentrantWrites: reentrantWrites.length,
    stack: reentrantWrites[0]?.join(' > ') ?? null
  }
  await balancer.stop()
  worker.kill()
  if (json) return console.log(JSON.stringify(phases, null, 2))
  const a = phases.alone
  console.log(`one GET: ${a.objects} objects of ${a.classes.length} classes, ${a.modules} modules, ${a.calls} calls (${a.hops} between objects or modules), ` +
    `stack ${a.maxDepth} deep, ${a.callsBackUp} calls back up (${a.callBackKinds.length} kinds)`)
  console.log(`  classes: ${a.classes.join(', ')}`)
  const steps = new Set([...a.steps.in, ...a.steps.out])
  console.log(`  ${steps.size} of them carry it: to the worker ${a.steps.in.join(' → ')}; ` +
    `to the client ${a.steps.out.join(' → ')}`)
  if (a.callBackKinds.length) console.log(`  back up: ${a.callBackKinds.join('; ')}`)
  console.log(`two GETs on one worker, the second handed the first's place: ${phases.handOff.reentrantWrites} ` +
    'request written from inside a response\'s socket callback')
  if (phases.handOff.stack) console.log(`  ${phases.handOff.stack}`)
}

main().catch((err) => { console.error(err); process.exit(1) })
