'use strict'
// Sizes as the option tables read them: bytes, or a number with a unit as nginx writes sizes.
const t = require('tap')
const { parseSize, formatSize, resolveOptions } = require('../../lib/options/table')
const { OPTIONS: BALANCER } = require('../../lib/fronts/balancer/options')

t.test('a size: bytes, or k, m, g (with b, or KiB, MiB, GiB), each 1024, as nginx writes them', async (t) => {
  const sizes = {
    0: 0,
    1048576: 1048576,
    '100b': 100,
    '512k': 512 * 1024,
    '512K': 512 * 1024,
    '1mb': 1048576,
    '1MB': 1048576,
    '1MiB': 1048576,
    '256m': 256 * 1048576,
    ' 8m ': 8 * 1048576,
    '8 m': 8 * 1048576,
    '1g': 1024 ** 3,
    '2GiB': 2 * 1024 ** 3,
    '1.5k': 1536
  }
  for (const [text, bytes] of Object.entries(sizes)) {
    t.equal(parseSize(text, 'max-body'), bytes, `'${text}' is ${bytes} bytes`)
  }
  t.equal(parseSize(4096, 'max-body'), 4096, 'a number is bytes')
  t.equal(parseSize('1048576', 'max-body'), 1048576, 'so is a bare number in text')
  for (const bad of ['', 'm', '-1', '1t', '1kbb', '1 m b', 'lots', '0x10', '1e3']) {
    t.throws(() => parseSize(bad, 'max-body'),
      { code: 'BAD_OPTION', message: `--max-body must be a size like 1048576, 512k, 8m or 1g (got '${bad}')` },
      `'${bad}' is refused`)
  }
})

t.test('a size is written with the largest unit it is a whole number of', async (t) => {
  t.equal(formatSize(8 * 1048576), '8m')
  t.equal(formatSize(1024 ** 3), '1g')
  t.equal(formatSize(1536), '1536')
  t.equal(formatSize(512 * 1024), '512k')
  t.equal(formatSize(0), '0')
})

t.test('every byte-sized option of the embedded balancer is a size', async (t) => {
  for (const name of ['maxBody', 'bodyBudget', 'maxResponseBuffer']) t.equal(BALANCER[name].kind, 'size', name)
  t.throws(() => resolveOptions({ maxBody: 1.5 }, { maxBody: BALANCER.maxBody }),
    { message: 'maxBody (--max-body) must be a whole number of bytes >= 0 (got 1.5)' }, 'the library takes whole bytes')
})
