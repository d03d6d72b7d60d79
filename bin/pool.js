#!/usr/bin/env node
'use strict'

// This process is pool's own, so it may have what `node --expose-gc` gives (globalThis.gc), set
// up here before anything else is loaded: the embedded balancer uses it to hand the memory of a
// burst of request bodies back to the system once the burst is over (lib/fronts/balancer/reclaim.js).
// The flag only adds `gc` to contexts created after it is set, so it is set for one new context
// and cleared again. Without it (a V8 that refuses) pool works the same; memory comes back when
// V8 next collects on its own.
if (typeof globalThis.gc !== 'function') {
  const v8 = require('node:v8')
  try {
    v8.setFlagsFromString('--expose-gc')
    globalThis.gc = require('node:vm').runInNewContext('gc')
  } catch {} finally {
    v8.setFlagsFromString('--no-expose-gc')
  }
}

require('../lib/cli').run(process.argv.slice(2))
