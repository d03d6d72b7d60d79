'use strict'

// The catalogue page as SSR is written today: streamed. React's renderToPipeableStream sends the
// page's shell (the catalogue, rendered on the CPU) as soon as it is rendered, and the
// "Recommended for you" section once its data arrives from a slow service (simulated: `delay`
// ms), through a Suspense boundary: the shell shows a placeholder, and the late part, sent after
// it, replaces the placeholder in the browser. What a user sees first comes at the shell's time,
// not the whole page's.

const React = require('react')
const { renderToPipeableStream } = require('react-dom/server')
const { ProductList } = require('./components')
const { catalogueDocument, generateCatalogue } = require('./render')

const h = React.createElement
const RECOMMENDED = 8

// Data a component waits for, in the shape React 18's Suspense takes on the server: read()
// throws the promise until it has settled, and React renders the boundary again then.
function resource (promise) {
  let state = 'pending'
  let value
  promise.then((v) => { state = 'done'; value = v }, (err) => { state = 'failed'; value = err })
  return {
    read () {
      if (state === 'pending') throw promise
      if (state === 'failed') throw value
      return value
    }
  }
}

function Recommendations ({ data }) {
  return h('section', { className: 'recommendations' },
    h('h2', null, 'Recommended for you'),
    h(ProductList, { products: data.read() })
  )
}

// Stream the page into `res`. The recommendations are the first products of another seed's
// catalogue, ready `delay` ms after the request, as a recommendation service would answer.
function streamPage (res, { items, seed, delay }) {
  let timer
  const data = resource(new Promise((resolve) => {
    timer = setTimeout(() => resolve(generateCatalogue({ items: RECOMMENDED, seed: (seed + 1) >>> 0 }).products), delay)
  }))
  const later = h(React.Suspense, { fallback: h('p', { className: 'recommendations-loading' }, 'Loading recommendations…') }, h(Recommendations, { data }))
  const stream = renderToPipeableStream(catalogueDocument(generateCatalogue({ items, seed }), { below: later }), {
    onShellReady () {
      // React writes the doctype itself for a document whose root is <html>.
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
      stream.pipe(res)
    },
    onShellError (err) {
      process.stderr.write(`pid ${process.pid}: streamed page failed: ${err.stack}\n`)
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
      res.end('internal error\n')
    },
    onError (err) {
      process.stderr.write(`pid ${process.pid}: streamed page: ${err.stack}\n`)
    }
  })
  // A client that leaves stops the render and the wait.
  res.on('close', () => {
    clearTimeout(timer)
    stream.abort()
  })
}

module.exports = { streamPage }
