'use strict'

// Looks at the charts as pictures: renders every SVG of a directory to a PNG with the system's
// headless Chromium (through playwright-core, which downloads no browser), to check axes, units,
// legends and labels before a report is committed.
//
//   node bench/report/preview.js [docs/charts] [OUT_DIR]    (default OUT_DIR: $TMPDIR/pool-bench-preview)

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium'

async function preview (svgDir, outDir) {
  const { chromium } = require('playwright-core')
  fs.mkdirSync(outDir, { recursive: true })
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
  const written = []
  try {
    const page = await browser.newPage({ deviceScaleFactor: 1 })
    for (const file of fs.readdirSync(svgDir).filter((f) => f.endsWith('.svg')).sort()) {
      const svg = fs.readFileSync(path.join(svgDir, file), 'utf8')
      const width = Number(/width="(\d+(?:\.\d+)?)"/.exec(svg)?.[1] ?? 800)
      const height = Number(/height="(\d+(?:\.\d+)?)"/.exec(svg)?.[1] ?? 600)
      await page.setViewportSize({ width: Math.ceil(width), height: Math.ceil(height) })
      await page.setContent(`<html><body style="margin:0">${svg}</body></html>`)
      const out = path.join(outDir, file.replace(/\.svg$/, '.png'))
      await page.screenshot({ path: out, fullPage: true })
      written.push(out)
    }
  } finally {
    await browser.close()
  }
  return written
}

if (require.main === module) {
  const svgDir = process.argv[2] || path.join(__dirname, '..', '..', 'docs', 'charts')
  const outDir = process.argv[3] || path.join(os.tmpdir(), 'pool-bench-preview')
  preview(svgDir, outDir).then((files) => { for (const f of files) console.log(f) }, (err) => { console.error(err.message); process.exit(1) })
}

module.exports = { preview }
