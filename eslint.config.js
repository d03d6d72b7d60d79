'use strict'

// `npm test` lints before it tests: neostandard (standard's style for ESLint 9).
const neostandard = require('neostandard')

module.exports = [
  ...neostandard({
    // The examples with packages of their own are their scaffolds' code, in their scaffolds'
    // style (tabs, semicolons, TypeScript, .svelte, .vue, .astro), built by their own tools.
    ignores: ['tmp/**', 'bench/results/**', 'docs/**', 'examples/frameworks/next/.next/**', '**/.next/**',
      'examples/frameworks/{sveltekit,nuxt,astro,react-router}/**']
  }),
  {
    rules: {
      // The suite waits on flags that another async function sets (`while (!stopped) await …`):
      // the rule cannot see that writer and flags every such loop.
      'no-unmodified-loop-condition': 'off',
      // The HTTP parser, the unit generator and the terminal tests match control characters on
      // purpose: that is what they refuse or look for.
      'no-control-regex': 'off'
    }
  },
  {
    // A line fits in 120 columns: code and comments are read in a terminal or a review.
    files: ['lib/**/*.js', 'bin/**/*.js', 'index.js'],
    rules: { '@stylistic/max-len': ['error', { code: 120, ignoreUrls: true, ignorePattern: '^\\s*\\* @(property|param|typedef|returns|type) ' }] }
  },
  {
    // The suite too; a regular expression literal may run past: split, it would read worse.
    files: ['test/**/*.js'],
    rules: { '@stylistic/max-len': ['error', { code: 120, ignoreUrls: true, ignoreRegExpLiterals: true }] }
  },
  {
    files: ['examples/frameworks/next/**/*.js'],
    languageOptions: { parserOptions: { ecmaFeatures: { jsx: true } } },
    // neostandard applies its JSX rules to .jsx files only; Next's pages are .js. Without this,
    // a component used only in JSX reads as unused.
    plugins: { react: neostandard.plugins.react },
    rules: { 'react/jsx-uses-vars': 'error' }
  },
  {
    // bin/pool.js is read by /bin/sh before Node (its first lines): the comment that hides the
    // shell from Node opens with '/*-', a glob that matches nothing, where '/* ' would make the
    // shell list the root directory.
    files: ['bin/pool.js'],
    rules: { '@stylistic/spaced-comment': ['error', 'always', { block: { markers: ['-'] } }] }
  },
  {
    // The status page's script runs in the browser.
    files: ['lib/observe/status-page/client.js'],
    languageOptions: { globals: { window: 'readonly', document: 'readonly', fetch: 'readonly', location: 'readonly' } }
  }
]
