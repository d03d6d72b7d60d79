'use strict'

// --trust-proxy: the peers whose forwarding headers (X-Forwarded-For, X-Forwarded-Proto,
// Forwarded...) the balancer believes: a comma-separated list of addresses and CIDR ranges, or
// `none`. The default, loopback, fits a proxy on the same host (nginx in front); a client that
// reaches the balancer from anywhere else cannot make the app believe another address.

const net = require('node:net')

// The answers for this many addresses are remembered (a BlockList check builds a SocketAddress
// each time): clients come back, and a proxy in front is one address for all of them.
const REMEMBERED = 1024

// Returns (address) => boolean. Throws a plain Error naming the bad entry.
function trustedPeers (spec) {
  const list = new net.BlockList()
  const entries = String(spec).split(',').map((s) => s.trim()).filter(Boolean)
  if (entries.length === 1 && entries[0] === 'none') return () => false
  for (const entry of entries) add(list, entry)
  const known = new Map()
  return (address) => {
    if (!address) return false
    let trusted = known.get(address)
    if (trusted !== undefined) return trusted
    const plain = address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address
    const family = net.isIPv4(plain) ? 'ipv4' : net.isIPv6(plain) ? 'ipv6' : null
    trusted = family !== null && list.check(plain, family)
    if (known.size >= REMEMBERED) known.clear()
    known.set(address, trusted)
    return trusted
  }
}

const TRUSTED = Symbol('pool.trustedPeer')

// Whether the peer of `socket` is trusted (`isTrustedPeer`, from trustedPeers): decided once
// per connection.
function trustsPeerOf (socket, isTrustedPeer) {
  let trusted = socket[TRUSTED]
  if (trusted === undefined) trusted = socket[TRUSTED] = isTrustedPeer(socket.remoteAddress)
  return trusted
}

function add (list, entry) {
  const [address, bits, extra] = entry.split('/')
  const family = net.isIPv4(address) ? 'ipv4' : net.isIPv6(address) ? 'ipv6' : null
  const max = family === 'ipv4' ? 32 : 128
  if (family === null || extra !== undefined) throw new Error(`'${entry}' is not an IP address or CIDR range`)
  if (bits === undefined) return list.addAddress(address, family)
  const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : NaN
  if (!(prefix >= 0 && prefix <= max)) throw new Error(`'${entry}' has a bad prefix length (0-${max})`)
  list.addSubnet(address, prefix, family)
}

module.exports = { trustedPeers, trustsPeerOf }
