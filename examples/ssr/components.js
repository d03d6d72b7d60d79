'use strict'

// The React components of the catalogue page. Plain `React.createElement` (aliased `h`)
// because the examples run without a build step, so there is no JSX.
//
// The tree is deliberately the shape of a real storefront list page (layout, header, filters,
// a grid of cards each made of several small components) so that rendering it costs what SSR
// costs in production: many elements, many props, many strings to escape.

const React = require('react')

const h = React.createElement

const SWATCH_COLORS = { Black: '#111111', White: '#f5f5f5', Navy: '#1f2a44', Olive: '#6b7340', Rust: '#b7410e', Sand: '#c2b280', Sky: '#87ceeb', Charcoal: '#36454f', Forest: '#228b22', Plum: '#8e4585' }

const CURRENCY_SYMBOLS = { USD: '$', EUR: '€', GBP: '£' }

// Prices are integer cents so that formatting never depends on floating point or on ICU data.
function formatMoney (cents, currency) {
  const whole = Math.floor(cents / 100).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',')
  const fraction = String(cents % 100).padStart(2, '0')
  return `${CURRENCY_SYMBOLS[currency] || currency + ' '}${whole}.${fraction}`
}

function productUrl (product) {
  return `/products/${product.name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${product.id.toLowerCase()}`
}

// Served by server.js (drawn, not stored): /images/p00001-400.svg.
function productImageUrl (product) {
  return `/images/${product.id.toLowerCase()}-400.svg`
}

function variantSku (productId, index) {
  return `${productId}-${index + 1}`
}

function Layout ({ title, description, styles, initialData, children }) {
  return h('html', { lang: 'en' },
    h('head', null,
      h('meta', { charSet: 'utf-8' }),
      h('meta', { name: 'viewport', content: 'width=device-width, initial-scale=1' }),
      h('meta', { name: 'description', content: description }),
      h('title', null, title),
      // No favicon: without this line every browser asks for /favicon.ico and gets a 404.
      h('link', { rel: 'icon', href: 'data:,' }),
      h('style', { dangerouslySetInnerHTML: { __html: styles } })
    ),
    h('body', null,
      h('div', { id: 'root' }, children),
      // The props the page was rendered from, as a client bundle would need them to hydrate.
      // `initialData` is already serialized safely for a <script> element by the caller.
      h('script', { id: '__CATALOGUE_DATA__', type: 'application/json', dangerouslySetInnerHTML: { __html: initialData } })
    )
  )
}

function Header ({ store, navigation, cart }) {
  return h('header', { className: 'site-header' },
    h('a', { className: 'logo', href: '/' }, store.name),
    h('nav', { 'aria-label': 'Main' },
      h('ul', null, navigation.map((item) =>
        h('li', { key: item.href }, h('a', { href: item.href }, item.label))
      ))
    ),
    h('form', { className: 'search', role: 'search', action: '/search', method: 'get' },
      h('label', { htmlFor: 'q', className: 'visually-hidden' }, 'Search the catalogue'),
      h('input', { id: 'q', name: 'q', type: 'search', placeholder: `Search ${store.name}` }),
      h('button', { type: 'submit' }, 'Search')
    ),
    h('a', { className: 'cart', href: '/cart' }, `Cart (${cart.count})`)
  )
}

function Breadcrumbs ({ trail }) {
  return h('nav', { className: 'breadcrumbs', 'aria-label': 'Breadcrumb' },
    h('ol', null, trail.map((crumb, i) =>
      h('li', { key: crumb.href },
        i === trail.length - 1
          ? h('span', { 'aria-current': 'page' }, crumb.label)
          : h('a', { href: crumb.href }, crumb.label)
      )
    ))
  )
}

function FacetGroup ({ title, name, options }) {
  return h('fieldset', { className: 'facet' },
    h('legend', null, title),
    h('ul', null, options.map((option) =>
      h('li', { key: option.value },
        h('label', null,
          h('input', { type: 'checkbox', name, value: option.value }),
          ` ${option.label} `,
          h('span', { className: 'count' }, `(${option.count})`)
        )
      )
    ))
  )
}

function Filters ({ facets }) {
  return h('aside', { className: 'filters' },
    h('h2', null, 'Filter'),
    h('form', { method: 'get', action: '/' },
      h(FacetGroup, { title: 'Category', name: 'category', options: facets.categories }),
      h(FacetGroup, { title: 'Brand', name: 'brand', options: facets.brands }),
      h(FacetGroup, { title: 'Price', name: 'price', options: facets.priceRanges }),
      h('button', { type: 'submit' }, 'Apply')
    )
  )
}

function Toolbar ({ shown, total, sortOptions }) {
  return h('div', { className: 'toolbar' },
    h('p', { className: 'result-count' }, `Showing ${shown} of ${total} products`),
    h('label', null, 'Sort by ',
      h('select', { name: 'sort', defaultValue: sortOptions[0].value },
        sortOptions.map((o) => h('option', { key: o.value, value: o.value }, o.label))
      )
    )
  )
}

function Price ({ price }) {
  const onSale = price.compareAtCents !== undefined && price.compareAtCents > price.cents
  return h('div', { className: 'price' },
    h('span', { className: onSale ? 'amount sale' : 'amount' }, formatMoney(price.cents, price.currency)),
    onSale && h('s', { className: 'compare-at' }, formatMoney(price.compareAtCents, price.currency)),
    onSale && h('span', { className: 'discount' }, `-${Math.round(100 - (100 * price.cents) / price.compareAtCents)}%`)
  )
}

function Rating ({ rating }) {
  const stars = []
  for (let i = 1; i <= 5; i++) {
    const fill = rating.average >= i ? 'full' : rating.average >= i - 0.5 ? 'half' : 'empty'
    stars.push(h('span', { key: i, className: `star star-${fill}`, 'aria-hidden': 'true' }, fill === 'empty' ? '☆' : '★'))
  }
  return h('div', { className: 'rating', 'aria-label': `Rated ${rating.average.toFixed(1)} out of 5 by ${rating.count} customers` },
    stars,
    h('span', { className: 'rating-count' }, `(${rating.count})`)
  )
}

function Tags ({ tags }) {
  if (tags.length === 0) return null
  return h('ul', { className: 'tags' }, tags.map((tag) =>
    h('li', { key: tag }, h('a', { href: `/?tag=${encodeURIComponent(tag)}` }, `#${tag}`))
  ))
}

function Swatches ({ productId, variants }) {
  return h('ul', { className: 'swatches', 'aria-label': 'Available options' }, variants.map((v, i) =>
    h('li', { key: variantSku(productId, i), className: v.stock > 0 ? 'swatch' : 'swatch sold-out', title: `${v.color} / ${v.size}` },
      h('span', { className: 'swatch-color', style: { backgroundColor: SWATCH_COLORS[v.color] || '#cccccc' } }),
      h('span', { className: 'swatch-size' }, v.size)
    )
  ))
}

function Badges ({ badges }) {
  if (badges.length === 0) return null
  return h('div', { className: 'badges' }, badges.map((b) => h('span', { key: b, className: `badge badge-${b}` }, b)))
}

function ProductCard ({ product }) {
  const inStock = product.variants.some((v) => v.stock > 0)
  const url = productUrl(product)
  return h('article', { className: 'product-card', 'data-product-id': product.id },
    h('a', { className: 'product-image', href: url },
      h('img', { src: productImageUrl(product), alt: `${product.name} by ${product.brand}`, width: 400, height: 400, loading: 'lazy' })
    ),
    h(Badges, { badges: product.badges }),
    h('h3', { className: 'product-name' }, h('a', { href: url }, product.name)),
    h('p', { className: 'product-brand' }, product.brand),
    h(Price, { price: product.price }),
    h(Rating, { rating: product.rating }),
    h('p', { className: 'product-description' }, product.description),
    h(Swatches, { productId: product.id, variants: product.variants }),
    h(Tags, { tags: product.tags }),
    h('p', { className: 'shipping' }, product.shipping.free ? `Free delivery in ${product.shipping.days} days` : `Delivery in ${product.shipping.days} days`),
    h('button', { type: 'button', className: 'add-to-cart', disabled: !inStock, 'data-sku': product.sku }, inStock ? 'Add to cart' : 'Sold out')
  )
}

function ProductList ({ products }) {
  return h('ul', { className: 'product-grid' }, products.map((product) =>
    h('li', { key: product.id }, h(ProductCard, { product }))
  ))
}

function Pagination ({ page, pages }) {
  const links = []
  for (let p = 1; p <= pages; p++) {
    links.push(h('li', { key: p },
      p === page ? h('span', { 'aria-current': 'page' }, String(p)) : h('a', { href: `/?page=${p}` }, String(p))
    ))
  }
  return h('nav', { className: 'pagination', 'aria-label': 'Pages' }, h('ol', null, links))
}

function Footer ({ store, columns }) {
  return h('footer', { className: 'site-footer' },
    columns.map((column) =>
      h('section', { key: column.title },
        h('h4', null, column.title),
        h('ul', null, column.links.map((link) => h('li', { key: link.href }, h('a', { href: link.href }, link.label))))
      )
    ),
    h('p', { className: 'legal' }, `© ${store.year} ${store.name}. All prices include VAT.`)
  )
}

// `below`: more of the page, between the results and the footer (the streamed page's
// recommendations, streamed.js).
function CataloguePage ({ catalogue, below = null }) {
  return h('div', { className: 'page' },
    h(Header, { store: catalogue.store, navigation: catalogue.navigation, cart: catalogue.cart }),
    h(Breadcrumbs, { trail: catalogue.breadcrumbs }),
    h('main', { className: 'catalogue' },
      h('h1', null, catalogue.title),
      h(Filters, { facets: catalogue.facets }),
      h('section', { className: 'results' },
        h(Toolbar, { shown: catalogue.products.length, total: catalogue.totalProducts, sortOptions: catalogue.sortOptions }),
        h(ProductList, { products: catalogue.products }),
        h(Pagination, { page: catalogue.page, pages: catalogue.pages })
      )
    ),
    below,
    h(Footer, { store: catalogue.store, columns: catalogue.footer })
  )
}

module.exports = {
  Layout,
  Header,
  Breadcrumbs,
  Filters,
  FacetGroup,
  Toolbar,
  Price,
  Rating,
  Tags,
  Swatches,
  Badges,
  ProductCard,
  ProductList,
  Pagination,
  Footer,
  CataloguePage,
  formatMoney,
  SWATCH_COLORS
}
