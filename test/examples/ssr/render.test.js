'use strict'

// The pure render module of the SSR example: the page it produces, and that it is the same
// page every time. No HTTP here; the server's routes are exercised by the integration tests.

const t = require('tap')
const {
  renderPage,
  generateCatalogue,
  serializeForScript,
  DEFAULT_ITEMS,
  MAX_ITEMS,
  DEFAULT_SEED
} = require('../../../examples/ssr/render')

const CARD = /<article class="product-card" data-product-id="([^"]+)"/g
const DATA_SCRIPT = /<script id="__CATALOGUE_DATA__" type="application\/json">([^<]*)<\/script>/

function cardIds (html) {
  return [...html.matchAll(CARD)].map((m) => m[1])
}

function embeddedData (html) {
  const m = DATA_SCRIPT.exec(html)
  return m ? m[1] : null
}

function msSince (start) {
  return Number(process.hrtime.bigint() - start) / 1e6
}

const defaultPage = renderPage()

t.test('the page is a whole HTML document', async (t) => {
  t.ok(defaultPage.startsWith('<!DOCTYPE html><html lang="en">'), 'starts with the doctype and the html element')
  t.ok(defaultPage.endsWith('</html>'), 'ends with the closing html element')
  t.match(defaultPage, /<title>All products \| Pool Provisions<\/title>/)
  for (const part of ['site-header', 'breadcrumbs', 'filters', 'toolbar', 'product-grid', 'pagination',
    'site-footer']) {
    t.ok(defaultPage.includes(`class="${part}"`), `has the ${part}`)
  }
})

t.test('the default page has about 200 product cards, one per product', async (t) => {
  t.equal(DEFAULT_ITEMS, 200)
  const ids = cardIds(defaultPage)
  t.equal(ids.length, DEFAULT_ITEMS)
  t.equal(new Set(ids).size, ids.length, 'every card is a different product')
})

t.test('items=N renders exactly N cards', async (t) => {
  for (const items of [1, 7, 333, MAX_ITEMS]) {
    t.equal(cardIds(renderPage({ items })).length, items, `items=${items}`)
  }
})

t.test('every generated product is on the page, escaped', async (t) => {
  const { products } = generateCatalogue()
  const ids = cardIds(defaultPage)
  t.same(ids, products.map((p) => p.id), 'cards in catalogue order')
  const escape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
  const missing = products.filter((p) => !defaultPage.includes(`>${escape(p.name)}</a>`))
  t.same(missing, [], 'every product name is rendered')
  // Brands with HTML-significant characters are part of the data, so escaping is exercised.
  t.ok(products.some((p) => p.brand === 'Maison <Blanc>'), 'the data has a brand with < and >')
  t.ok(defaultPage.includes('>Maison &lt;Blanc&gt;</p>'), 'which is rendered escaped')
  t.notOk(defaultPage.includes('<Blanc>'), 'and never raw')
})

t.test('the same seed gives the same page; another seed another page', async (t) => {
  const again = renderPage({ items: DEFAULT_ITEMS, seed: DEFAULT_SEED })
  t.ok(again === defaultPage, 'default page rendered twice is byte-identical')
  t.equal(renderPage({ items: 50, seed: 7 }), renderPage({ items: 50, seed: 7 }),
    'seed 7 rendered twice is byte-identical')
  // Compared without the data script, which names the seed: the products themselves must differ.
  const markup = (seed) => renderPage({ items: 50, seed }).replace(DATA_SCRIPT, '')
  t.not(markup(8), markup(7), 'seed 8 renders other products than seed 7')
  // Products come from one stream, so a smaller page is a prefix of a larger one.
  t.same(generateCatalogue({ items: 10, seed: 3 }).products,
    generateCatalogue({ items: 40, seed: 3 }).products.slice(0, 10))
})

t.test('the page carries its props, tens of KB of them, as safe JSON', async (t) => {
  const json = embeddedData(defaultPage)
  t.ok(json, 'has the data script')
  t.ok(Buffer.byteLength(json) > 20 * 1024, `serialized props are > 20 KB (${Buffer.byteLength(json)} bytes)`)
  const data = JSON.parse(json)
  t.equal(data.products.length, DEFAULT_ITEMS)
  t.same(data, generateCatalogue(), 'they are exactly the data the page was rendered from')
})

t.test('serializeForScript cannot end the script element early', async (t) => {
  const hostile = { name: '</script><script>alert(1)</script>', line: 'a\u2028b\u2029c', comment: '<!--' }
  const text = serializeForScript(hostile)
  t.notOk(/<\/script/i.test(text), 'no </script in the output')
  t.notOk(text.includes('<!--'), 'no comment opener')
  t.notOk(/[\u2028\u2029]/.test(text), 'no raw line or paragraph separator')
  t.same(JSON.parse(text), hostile, 'still JSON for the same value')
})

t.test('bad arguments are refused, not rendered', async (t) => {
  for (const items of [0, -1, MAX_ITEMS + 1, 1.5, '5', NaN]) {
    t.throws(() => renderPage({ items }), RangeError, `items=${String(items)}`)
  }
  for (const seed of [-1, 2 ** 32, 0.5]) {
    t.throws(() => renderPage({ seed }), RangeError, `seed=${seed}`)
  }
})

t.test('rendering takes bounded time', async (t) => {
  // Generous bounds (development-mode React, a busy CI machine): they catch a render that has
  // become quadratic or stuck, not a few percent of slowdown.
  const times = []
  for (let i = 0; i < 5; i++) {
    const start = process.hrtime.bigint()
    renderPage()
    times.push(msSince(start))
  }
  times.sort((a, b) => a - b)
  t.ok(times[2] < 1000, `default page: median of 5 renders ${times[2].toFixed(1)} ms < 1000 ms`)

  const start = process.hrtime.bigint()
  renderPage({ items: MAX_ITEMS })
  const largest = msSince(start)
  t.ok(largest < 10000, `items=${MAX_ITEMS}: ${largest.toFixed(0)} ms < 10000 ms`)
})
