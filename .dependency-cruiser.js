'use strict'

// The layers of lib/, bottom first, and the rules that keep them (`npm test` runs
// `depcruise lib --config`). A folder may require only folders on a lower layer: so there is no
// cycle between lib's folders. docs/architecture.md draws the same layers, and a test checks
// that the drawing, these layers and the code agree.
const LAYERS = [
  ['shared'], //                                  what several layers use (with lib/errors.js)
  ['options', 'net', 'haproxy', 'protocol'], //   the options' schema, sockets, HAProxy's runtime API, the worker channel
  ['observe', 'control', 'worker'], //            the pool's own listeners and metrics, the control socket, a worker's process
  ['fronts'], //                                  what sits in front of the workers
  ['config', 'generate'], //                      the options assembled; configs for other programs
  ['supervisor'], //                              the pool
  ['cli'] //                                      the `pool` command
]

const folder = (name) => `^lib/${name}/`
const any = (names) => `^lib/(${names.join('|')})/`

// Layer i requires nothing from a layer above it, nor from another folder of its own.
const layerRules = LAYERS.flatMap((layer, i) => layer.map((name) => ({
  name: `layer-${name}`,
  comment: `lib/${name}/ may require only the layers below it: ${LAYERS.slice(0, i).flat().join(', ') || 'none'}`,
  severity: 'error',
  from: { path: folder(name) },
  to: { path: '^lib/[^/]+/', pathNot: [folder(name), ...(i > 0 ? [any(LAYERS.slice(0, i).flat())] : [])] }
})))

module.exports = {
  forbidden: [
    {
      name: 'no-folder-cycle',
      comment: 'No cycle between lib\'s folders',
      severity: 'error',
      scope: 'folder',
      from: { path: '^lib/' },
      to: { circular: true }
    },
    {
      name: 'worker-reaches-protocol-and-shared',
      comment: 'A worker process loads the protocol and the bottom layer only, never the supervisor\'s, the fronts\' or the observers\' modules',
      severity: 'error',
      from: { path: folder('worker') },
      to: { path: '^lib/', pathNot: [folder('worker'), any(['protocol', 'shared']), '^lib/errors\\.js$'] }
    },
    {
      name: 'nothing-below-fronts-imports-a-front',
      comment: 'Only the fronts, and what is above them, name a front',
      severity: 'error',
      from: { path: any(LAYERS.slice(0, LAYERS.findIndex((l) => l.includes('fronts'))).flat()) },
      to: { path: folder('fronts') }
    },
    {
      name: 'lib-root-is-bottom',
      comment: 'lib/errors.js is part of the bottom layer: it requires no folder of lib/',
      severity: 'error',
      from: { path: '^lib/[^/]+\\.js$' },
      to: { path: '^lib/[^/]+/' }
    },
    ...layerRules
  ],
  options: {
    includeOnly: '^lib/',
    moduleSystems: ['cjs'],
    reporterOptions: {
      text: { highlightFocused: false }
    }
  }
}

// For the test that checks docs/architecture.md's drawing (not part of the configuration, whose
// keys dependency-cruiser checks).
Object.defineProperty(module.exports, 'LAYERS', { value: LAYERS })
