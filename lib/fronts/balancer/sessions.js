'use strict'

// Socket.IO (Engine.IO) sessions: only the worker that opened a session knows its `sid` (others
// answer 400), so the balancer learns the worker from the handshake's answer (`0{"sid":"…"`) and
// sends every later request naming that sid there. Engine.IO requests are long-lived.

// Past this, the least recently used session is forgotten (a 400 then makes the client reopen).
const MAX_SESSIONS = 100000
const SNIFF_BYTES = 256
const SID_IN_ANSWER = /"sid":"([\w\-.~]{1,64})"/
const SID_IN_QUERY = /[?&]sid=([\w\-.~%]{1,96})(?:&|$)/
const ENGINE_QUERY = /[?&]EIO=[34](?:&|$)/
const TRANSPORT = /[?&]transport=(?:polling|websocket|webtransport)(?:&|$)/

// null for a non-Engine.IO request, 'open' for a handshake, else its session id.
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

  workerOf (sid) {
    const record = this.workers.get(sid)
    if (record === undefined) return undefined
    this.workers.delete(sid)
    if (record.gone) return undefined
    this.workers.set(sid, record) // the most recently used now
    return record
  }

  // Learns the sid from a handshake answer's first bytes; true once nothing more is to be found.
  learn (seen, record) {
    const text = seen.toString('latin1', 0, Math.min(seen.length, SNIFF_BYTES))
    const sid = SID_IN_ANSWER.exec(text)
    if (sid) {
      this.workers.set(sid[1], record)
      if (this.workers.size > this.max) this.workers.delete(this.workers.keys().next().value)
    }
    return sid !== null || seen.length >= SNIFF_BYTES
  }

  forget (record) {
    for (const [sid, r] of this.workers) if (r === record) this.workers.delete(sid)
  }
}

function decodeURIComponentSafe (s) {
  try { return decodeURIComponent(s) } catch { return s }
}

module.exports = { Sessions, engineRequest, SNIFF_BYTES }
