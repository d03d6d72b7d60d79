'use strict'

// Overload control's defaults on the loads of bench/overload.js (bench/lib/overload-shapes.js),
// decided by the real dispatcher on a simulated clock (bench/lib/dispatcher-sim.js) against a
// FIFO queue given the same requests: exactly the same every run, so the figures are asserted
// as they are. The rule: where a FIFO answers everyone within what clients wait, the defaults
// turn nobody away and answer nobody later; where it cannot, they keep answering in time.

const t = require('tap')
const { runShape } = require('../../../bench/lib/dispatcher-sim')
const { closedShapes, openShapes, mixedShapes } = require('../../../bench/lib/overload-shapes')

const both = (shape) => ({ fifo: runShape(shape, { fifo: true }), def: runShape(shape) })

t.test('issue 26 as reported: 8 closed-loop clients on 2 workers whose pages await 200 ms of data, ' +
  'right after a burst of fast requests', async (t) => {
  const { fifo, def } = both({ kind: 'closed', workers: 2, clients: 8, render: 'await', seconds: 20 })
  t.equal(def.turnedAway, 0, 'nothing turned away (was 36 in 20 s)')
  t.equal(def.stands, 0, 'the queue never stood')
  t.same([def.ok, def.p99], [fifo.ok, fifo.p99],
    `every request answered as a FIFO answers it (p99 ${Math.round(def.p99)} ms)`)
})

t.test('closed-loop clients on 2 and 15 workers, renders on the CPU and pages awaiting data, ' +
  'after a burst of fast requests: not overload, however many', async (t) => {
  for (const shape of closedShapes({ seconds: 20 })) {
    const { fifo, def } = both(shape)
    t.equal(def.turnedAway, 0, `${shape.id}: nothing turned away`)
    t.ok(def.p99 <= 1.1 * fifo.p99, `${shape.id}: p99 ${Math.round(def.p99)} ms, FIFO ${Math.round(fifo.p99)} ms`)
  }
})

t.test('open loop, clients that wait 1 s: below capacity and in a peak a FIFO rides out, exactly a FIFO; ' +
  'in steady overload, capacity in time', async (t) => {
  for (const shape of [...openShapes(), ...mixedShapes()]) {
    const { fifo, def } = both(shape)
    const figures = `defaults ${(def.share * 100).toFixed(0)}%, FIFO ${(fifo.share * 100).toFixed(0)}% of capacity ` +
      'in time'
    if (shape.load <= 1.2) {
      t.ok(def.share >= fifo.share, `${shape.id}: ${figures}`)
      if (fifo.gaveUp === 0) {
        t.equal(def.turnedAway, 0, `${shape.id}: the FIFO answers everyone in time, so nothing is turned away`)
      }
    } else {
      t.ok(def.share >= 0.95, `${shape.id}, after ${shape.warmup} s: ${figures}`)
    }
  }
})

t.test('below capacity, clients that never give up: nothing turned away, ' +
  'and no request waits longer than with a FIFO', async (t) => {
  for (const median of [30, 300]) {
    for (const workers of [1, 2, 15]) {
      for (const load of [0.5, 0.8, 0.9]) {
        const measure = 4000 * median * Math.exp(0.32) / workers / load / 1000
        const { fifo, def } = both({
          kind: 'open',
          workers,
          load,
          render: { median, sigma: 0.8 },
          deadline: Infinity,
          warmup: 0,
          measure,
          burst: false
        })
        t.ok(def.turnedAway === 0 && def.p99 <= fifo.p99,
          `${workers} workers, ${median} ms renders, ${load}× capacity: ${def.turnedAway} turned away, ` +
            `p99 ${Math.round(def.p99)} ms (FIFO ${Math.round(fifo.p99)})`)
      }
    }
  }
})
