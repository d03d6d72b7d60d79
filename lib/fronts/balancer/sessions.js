'use strict'

// Socket.IO sessions (Engine.IO, its transport): with its default transports a client opens a
// session with a long-polling GET, goes on polling and posting with the session's id in the
// query (`sid`), then upgrades to a WebSocket with the same id. Only the worker that opened the
// session knows it: every other answers 400 "Session ID unknown". The balancer learns which
// worker opened it from the handshake's answer (`0{"sid":"…"`), and sends every later request
// naming that id there. Engine.IO requests are long-lived (a poll waits for data up to its
// pingInterval): they hold no render place.

// Sessions remembered at most; past it the least recently used is forgotten (its next request
// goes to any worker, whose 400 makes the client open a new session).
const MAX_SESSIONS = 100000
// The handshake's answer names its id in its first bytes; no more of it is looked at.
const SNIFF_BYTES = 256
const SID_IN_ANSWER = /"sid":"([\w\-.~]{1,64})"/
const SID_IN_QUERY = /[?&]sid=([\w\-.~%]{1,96})(?:&|$)/
// Engine.IO's own parameters, by their exact names: its protocol version and a transport it has.
const ENGINE_QUERY = /[?&]EIO=[34](?:&|$)/
const TRANSPORT = /[?&]transport=(?:polling|websocket|webtransport)(?:&|$)/

// What an Engine.IO request is: null for any other request, 'open' for a handshake (no sid),
// or its session id.
function engineRequest (url) {
  const q = url.indexOf('?')
  if (q < 0) return null
  const query = url.slice(q)
  if (!ENGINE_QUERY.test(query) || !TRANSPORT.test(query)) return null
  const sid = SID_IN_QUERY.exec(query)
  return sid ? decodeURIComponentSafe(sid[1]) : 'open'
}

class Sessions {
  constructor ({ max = MAX_SESSIONS } = {}) {
    this.max = max
    this.workers = new Map() // sid → WorkerRecord, least recently used first
  }

  get size () { return this.workers.size }

  // The worker holding session `sid`, if it is still there.
  workerOf (sid) {
    const record = this.workers.get(sid)
    if (record === undefined) return undefined
    this.workers.delete(sid)
    if (record.gone) return undefined
    this.workers.set(sid, record) // the most recently used now
    return record
  }

  // The first bytes of a handshake's answer from `record`: its session id, if they name it.
  // Returns true once there is nothing more to look for.
  learn (seen, record) {
    const text = seen.toString('latin1', 0, Math.min(seen.length, SNIFF_BYTES))
    const sid = SID_IN_ANSWER.exec(text)
    if (sid) {
      this.workers.set(sid[1], record)
      if (this.workers.size > this.max) this.workers.delete(this.workers.keys().next().value)
    }
    return sid !== null || seen.length >= SNIFF_BYTES
  }

  // A worker left: its sessions went with it.
  forget (record) {
    for (const [sid, r] of this.workers) if (r === record) this.workers.delete(sid)
  }
}

function decodeURIComponentSafe (s) {
  try { return decodeURIComponent(s) } catch { return s }
}

module.exports = { Sessions, engineRequest, SNIFF_BYTES }
