'use strict'

// Vega-Lite spec → SVG text, in Node, with no browser and no native module: vega-lite compiles
// the spec to Vega, and Vega's headless View renders SVG (text widths are estimated without a
// canvas, so the specs leave room around labels). Both packages are ES modules: loaded once,
// with import().

let libs = null

async function load () {
  if (!libs) {
    const [vega, vegaLite] = await Promise.all([import('vega'), import('vega-lite')])
    libs = { vega, vegaLite }
  }
  return libs
}

async function toSvg (spec) {
  const { vega, vegaLite } = await load()
  const compiled = vegaLite.compile(spec).spec
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' })
  const svg = await view.toSVG()
  view.finalize()
  return svg
}

async function versions () {
  const { vega, vegaLite } = await load()
  return { vega: vega.version, vegaLite: vegaLite.version }
}

module.exports = { toSvg, versions }
