'use strict'

// The slot server's tunnels: connections the app took over from HTTP (WebSockets, CONNECT).
// Never requests (no render place, never busy nor hung), but a drain waits for them, and a worker
// leaving with some open says goodbye: a close frame (1001) after what the app wrote, then FIN.

// Server to client, unmasked: FIN + opcode 0x8, payload length, status, reason.
const GOING_AWAY = 1001
const REASON = 'server going away'
const CLOSE_FRAME = closeFrame(GOING_AWAY, REASON)

// ms a goodbye waits for the clients to answer and close.
const GOODBYE_WAIT = 200

class Tunnels {
  // onChange(open): a tunnel opened or closed.
  constructor ({ onChange = () => {} } = {}) {
    this.sockets = new Map() // socket → { websocket, said }
    this.opened = 0
    this.onChange = onChange
  }

  get open () { return this.sockets.size }

  // No 'upgrade' listener of ours: one would take Upgrade requests from an app that has none.
  // Node emits the event only to the app's listeners; counted before they run.
  track (server) {
    const emit = server.emit
    const tunnels = this
    server.emit = function emitSeeingTunnels (event, ...args) {
      const taken = (event === 'upgrade' || event === 'connect') && this.listenerCount(event) > 0
      if (taken) tunnels.add(event, args[0], args[1])
      return emit.call(this, event, ...args)
    }
  }

  add (event, req, socket) {
    if (!socket || typeof socket.once !== 'function' || socket.destroyed || this.sockets.has(socket)) return
    const upgrade = req?.headers?.upgrade
    const websocket = event === 'upgrade' && typeof upgrade === 'string' && upgrade.toLowerCase() === 'websocket'
    this.sockets.set(socket, { websocket })
    this.opened++
    socket.once('close', () => {
      this.sockets.delete(socket)
      this.onChange(this.open)
    })
    this.onChange(this.open)
  }

  // A WebSocket whose 101 was written gets the close frame and FIN, any other tunnel is destroyed.
  // Resolves once all closed, or after `wait` ms. The app's writes after it fail: errors handled.
  goodbye ({ wait = GOODBYE_WAIT } = {}) {
    const closing = []
    for (const [socket, tunnel] of this.sockets) {
      if (tunnel.said) continue
      tunnel.said = true
      socket.on('error', () => {})
      const answered = tunnel.websocket && socket.bytesWritten > 0 // its 101 at least
      if (answered && socket.writable && !socket.writableEnded) socket.end(CLOSE_FRAME)
      else socket.destroy()
      closing.push(new Promise((resolve) => socket.once('close', resolve)))
    }
    if (closing.length === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, wait)
      Promise.all(closing).then(() => { clearTimeout(timer); resolve() })
    })
  }

  counts () { return { tunnels: this.open, tunnelsOpened: this.opened } }
}

function closeFrame (code, reason) {
  const text = Buffer.from(reason)
  const frame = Buffer.alloc(4 + text.length)
  frame[0] = 0x88
  frame[1] = 2 + text.length // < 126: one length byte
  frame.writeUInt16BE(code, 2)
  text.copy(frame, 4)
  return frame
}

module.exports = { Tunnels, CLOSE_FRAME, GOING_AWAY, GOODBYE_WAIT }
