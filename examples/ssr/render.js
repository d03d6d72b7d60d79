'use strict'

// Pure rendering of the catalogue page: a seeded data generator and `renderPage`, with no
// HTTP and no I/O, so that the same (items, seed) always gives the same bytes and the page
// can be tested and timed on its own.

const React = require('react')
const { renderToString } = require('react-dom/server')
const { Layout, CataloguePage, SWATCH_COLORS } = require('./components')

const DEFAULT_ITEMS = 200
const MAX_ITEMS = 2000
const DEFAULT_SEED = 1
const MAX_SEED = 0xffffffff

// mulberry32: tiny, fast and good enough for fake data. Math.random cannot be seeded, and the
// page must be reproducible.
function createRandom (seed) {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min, max) => min + Math.floor(next() * (max - min + 1))
  const pick = (list) => list[Math.floor(next() * list.length)]
  const chance = (p) => next() < p
  // `count` distinct elements, in list order, so output does not depend on sort stability.
  const sample = (list, count) => {
    const chosen = new Set()
    while (chosen.size < Math.min(count, list.length)) chosen.add(Math.floor(next() * list.length))
    return [...chosen].sort((a, b) => a - b).map((i) => list[i])
  }
  return { next, int, pick, chance, sample }
}

const ADJECTIVES = ['Classic', 'Everyday', 'Premium', 'Lightweight', 'Rugged', 'Compact', 'Vintage', 'Modern', 'Essential', 'Deluxe', 'Organic', 'Recycled', 'Handmade', 'Foldable', 'Insulated', 'Waterproof']
const MATERIALS = ['Cotton', 'Linen', 'Wool', 'Leather', 'Bamboo', 'Oak', 'Walnut', 'Steel', 'Ceramic', 'Glass', 'Canvas', 'Merino', 'Cork', 'Copper', 'Denim', 'Suede']
const NOUNS = {
  Apparel: ['T-Shirt', 'Hoodie', 'Jacket', 'Scarf', 'Beanie', 'Shirt', 'Cardigan', 'Socks'],
  Home: ['Mug', 'Vase', 'Lamp', 'Blanket', 'Cushion', 'Tray', 'Planter', 'Clock'],
  Kitchen: ['Knife', 'Pan', 'Cutting Board', 'Teapot', 'Bowl', 'Carafe', 'Whisk', 'Apron'],
  Outdoor: ['Backpack', 'Water Bottle', 'Tent', 'Hammock', 'Lantern', 'Camp Chair', 'Daypack', 'Poncho'],
  Office: ['Notebook', 'Desk Mat', 'Pen Set', 'Laptop Sleeve', 'Monitor Stand', 'Organizer', 'Bookends', 'Lamp']
}
const CATEGORIES = Object.keys(NOUNS)
// Some brands carry characters that must be escaped in HTML, as real data does.
const BRANDS = ['Northwind', 'Hale & Finch', 'Otter "Co"', 'Birch Lane', 'Kōbō', 'Aster & Moss', 'Fjell', 'Maison <Blanc>', 'Tidewater', 'Ridgeline']
const COLORS = Object.keys(SWATCH_COLORS)
const SIZES = ['XS', 'S', 'M', 'L', 'XL', 'One size']
const TAGS = ['bestseller', 'eco', 'gift-idea', 'limited', 'new-season', 'vegan', 'fair-trade', 'made-in-eu', 'lifetime-warranty', 'staff-pick', 'bundle', 'clearance']
const OPENERS = ['Built to last', 'Designed in our studio', 'A customer favourite', 'Made in small batches', 'Our most versatile piece', 'Thoughtfully sourced']
const BENEFITS = ['it softens with every use', 'it packs down to almost nothing', 'it looks as good on day one thousand as on day one', 'it pairs with everything you own', 'it is easy to clean and quick to dry', 'it is backed by our repair promise']
const BADGES = ['new', 'sale', 'bestseller']

// Derived fields (URLs, image paths, variant SKUs, swatch colours) are left to the components, as a client
// would derive them, which keeps the serialized props to what an API would really send.
function slugify (text) {
  return text.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '')
}

function generateProduct (random, index) {
  const category = random.pick(CATEGORIES)
  const brand = random.pick(BRANDS)
  const name = `${random.pick(ADJECTIVES)} ${random.pick(MATERIALS)} ${random.pick(NOUNS[category])}`
  const id = `P${String(index + 1).padStart(5, '0')}`
  const cents = random.int(5, 400) * 100 - random.pick([1, 5, 51, 100])
  const onSale = random.chance(0.3)
  const colors = random.sample(COLORS, random.int(1, 3))
  const variants = colors.map((color) => ({
    color,
    size: category === 'Apparel' ? random.pick(SIZES.slice(0, 5)) : 'One size',
    stock: random.chance(0.15) ? 0 : random.int(1, 250)
  }))
  const badges = BADGES.filter((badge) => (badge === 'sale' ? onSale : random.chance(0.12)))
  return {
    id,
    sku: `${brand.slice(0, 3).toUpperCase().replace(/[^A-Z]/g, 'X')}-${random.int(100000, 999999)}`,
    name,
    brand,
    category,
    description: `${random.pick(OPENERS)}: ${random.pick(BENEFITS)}.`,
    // Like most catalogue APIs, a price carries a compare-at amount only when it is reduced.
    price: onSale ? { cents, compareAtCents: Math.round(cents * (1.1 + random.next() * 0.5)), currency: 'USD' } : { cents, currency: 'USD' },
    rating: { average: Math.round((2.5 + random.next() * 2.5) * 10) / 10, count: random.int(0, 4000) },
    tags: random.sample(TAGS, random.int(0, 4)),
    variants,
    badges,
    shipping: { free: cents >= 5000, days: random.int(1, 7) }
  }
}

function countBy (products, key) {
  const counts = new Map()
  for (const product of products) counts.set(key(product), (counts.get(key(product)) || 0) + 1)
  return [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([value, count]) => ({ value: slugify(value), label: value, count }))
}

const PRICE_RANGES = [[0, 2500, 'Under $25'], [2500, 10000, '$25 to $100'], [10000, 25000, '$100 to $250'], [25000, Infinity, '$250 and over']]

function buildFacets (products) {
  return {
    categories: countBy(products, (p) => p.category),
    brands: countBy(products, (p) => p.brand),
    priceRanges: PRICE_RANGES.map(([min, max, label]) => ({
      value: `${min}-${max === Infinity ? '' : max}`,
      label,
      count: products.filter((p) => p.price.cents >= min && p.price.cents < max).length
    }))
  }
}

function assertIntegerInRange (name, value, min, max) {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max} (got ${value})`)
  }
}

// Everything the page is rendered from: the props a client bundle would hydrate with.
// Products are drawn in order from one stream, so the first k products of a page are the same
// whatever `items` is; only the facet counts and paging differ.
function generateCatalogue ({ items = DEFAULT_ITEMS, seed = DEFAULT_SEED } = {}) {
  assertIntegerInRange('items', items, 1, MAX_ITEMS)
  assertIntegerInRange('seed', seed, 0, MAX_SEED)
  const random = createRandom(seed)
  const products = Array.from({ length: items }, (_, i) => generateProduct(random, i))
  const totalProducts = MAX_ITEMS + random.int(0, 999)
  return {
    seed,
    title: 'All products',
    store: { name: 'Pool Provisions', year: 2025 },
    navigation: CATEGORIES.map((c) => ({ label: c, href: `/?category=${slugify(c)}` })).concat([{ label: 'Sale', href: '/?badge=sale' }]),
    cart: { count: random.int(0, 5) },
    breadcrumbs: [{ label: 'Home', href: '/' }, { label: 'Shop', href: '/' }, { label: 'All products', href: '/' }],
    facets: buildFacets(products),
    sortOptions: [
      { value: 'featured', label: 'Featured' },
      { value: 'price-asc', label: 'Price: low to high' },
      { value: 'price-desc', label: 'Price: high to low' },
      { value: 'rating', label: 'Customer rating' },
      { value: 'newest', label: 'Newest' }
    ],
    products,
    totalProducts,
    page: 1,
    // Only a window of page links is rendered, as storefronts do; `items=1` would otherwise
    // mean thousands of links.
    pages: Math.min(10, Math.ceil(totalProducts / items)),
    footer: [
      { title: 'Shop', links: CATEGORIES.map((c) => ({ label: c, href: `/?category=${slugify(c)}` })) },
      { title: 'Help', links: [{ label: 'Delivery', href: '/help/delivery' }, { label: 'Returns', href: '/help/returns' }, { label: 'Contact us', href: '/help/contact' }] },
      { title: 'Company', links: [{ label: 'About', href: '/about' }, { label: 'Careers', href: '/careers' }, { label: 'Press', href: '/press' }] }
    ]
  }
}

// JSON inside a <script> element ends at the first `</script`, and U+2028/9 break older JS
// parsers; escaping `<` and those two keeps the text valid JSON that means the same thing.
function serializeForScript (data) {
  return JSON.stringify(data)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029')
}

const STYLES = [
  'body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#222}',
  '.site-header{display:flex;gap:1rem;align-items:center;padding:1rem;border-bottom:1px solid #ddd}',
  '.site-header ul,.breadcrumbs ol,.pagination ol,.tags,.swatches,.product-grid{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:.5rem}',
  '.catalogue{display:grid;grid-template-columns:16rem 1fr;gap:1.5rem;padding:1rem}',
  '.catalogue h1{grid-column:1/-1}',
  '.product-grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(14rem,1fr));gap:1rem}',
  '.product-card{border:1px solid #eee;border-radius:8px;padding:.75rem}',
  '.product-card img{width:100%;height:auto;background:#f3f3f3}',
  '.price .sale{color:#b00020;font-weight:600}.compare-at{margin:0 .5rem;color:#777}',
  '.star-full,.star-half{color:#e0a800}.star-empty{color:#bbb}',
  '.swatch-color{display:inline-block;width:1rem;height:1rem;border-radius:50%;border:1px solid #ccc}',
  '.sold-out{opacity:.4}.badge{font-size:.75rem;text-transform:uppercase;margin-right:.25rem}',
  '.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}',
  '.site-footer{display:flex;gap:3rem;padding:2rem 1rem;background:#fafafa;border-top:1px solid #ddd}'
].join('')

// The React tree of the catalogue page's whole document; `below`, more of the page between the
// results and the footer.
function catalogueDocument (catalogue, { below = null } = {}) {
  return React.createElement(Layout, {
    title: `${catalogue.title} | ${catalogue.store.name}`,
    description: `Browse ${catalogue.totalProducts} products from ${catalogue.store.name}.`,
    styles: STYLES,
    initialData: serializeForScript(catalogue)
  }, React.createElement(CataloguePage, { catalogue, below }))
}

// The whole HTML document for the catalogue list page.
function renderPage ({ items = DEFAULT_ITEMS, seed = DEFAULT_SEED } = {}) {
  // renderToString cannot emit a doctype, and without one browsers render in quirks mode.
  return '<!DOCTYPE html>' + renderToString(catalogueDocument(generateCatalogue({ items, seed })))
}

module.exports = {
  renderPage,
  catalogueDocument,
  generateCatalogue,
  serializeForScript,
  createRandom,
  DEFAULT_ITEMS,
  MAX_ITEMS,
  DEFAULT_SEED,
  MAX_SEED
}
