'use strict'

// The pool's status page, GET / on the stats listener, for a person
// with a browser: the workers, the queue, latency histograms, recent exits, redrawn every second.
//
// One self-contained document: its style and script are inline and it loads nothing from
// anywhere else. The server puts no data into it: the page's own script fetches ./status (JSON)
// and ./metrics (Prometheus text) beside it, so the document is the same for every request and
// its Content-Security-Policy names the inline script and style by their SHA-256 hashes instead
// of allowing inline code at large. Whatever comes from the pool (request URLs, app paths, exit
// reasons) is put on the page as text, never parsed as HTML.
//
// The page is three files beside this one: body.html, style.css, and client.js, the script, a
// function sent as `(client)()`: real code that the linter and the parser see, no templating.

const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')

const read = (name) => fs.readFileSync(path.join(__dirname, name), 'utf8')

// { html, contentSecurityPolicy }: built once, the same for every request.
let built = null
function statusPage () {
  if (built) return built
  const STYLE = read('style.css')
  const BODY = read('body.html')
  const script = `(${read('client.js').replace(/^[\s\S]*?(?=function client)/, '').trim()})()\n`
  const sha = (text) => `'sha256-${crypto.createHash('sha256').update(text, 'utf8').digest('base64')}'`
  const html = '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n' +
    '<meta name="color-scheme" content="light dark">\n<title>pool status</title>\n' +
    '<link rel="icon" href="data:,">\n' + // no favicon request
    `<style>${STYLE}</style>\n</head>\n<body>${BODY}<script>${script}</script>\n</body>\n</html>\n`
  const contentSecurityPolicy = [
    "default-src 'none'",
    `script-src ${sha(script)}`,
    `style-src ${sha(STYLE)}`,
    "connect-src 'self'", // ./status and ./metrics
    'img-src data:',
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join('; ')
  built = { html, contentSecurityPolicy }
  return built
}

module.exports = { statusPage }
