'use strict'

// The HAProxy front's status() in the shape every front's has (FrontStatus):
// where HAProxy is, what is wrong, and each worker<k> server as `pool status` and the status
// page show it.

const { slotOfServer } = require('../../haproxy/names')

// `servers`: { name: { wanted, seen, up, sessions } }; `front`: what the front knows of HAProxy.
function describeServers (servers, { backend, socket, reachable, lastError, haproxyPid, queue }) {
  const entries = Object.entries(servers)
  const bySlot = (value) => Object.fromEntries(entries.map(([name, s]) => [slotOfServer(name), value(s)]))
  const error = lastError ? `: ${lastError.message || lastError}` : ''
  return {
    target: `backend ${backend}`,
    detail: `via ${socket}${haproxyPid ? ` (HAProxy pid ${haproxyPid})` : ''}`,
    problem: reachable === false ? `unreachable${error}` : null,
    columns: [
      { title: 'WANTED', values: bySlot((s) => s.wanted ?? '-') },
      { title: 'HAPROXY', values: bySlot(haproxyState) },
      { title: 'SESS', right: true, values: bySlot((s) => s.sessions ?? '-') }
    ],
    table: {
      caption: `backend ${backend || '?'} via ${socket || '?'}: ${reachable ? 'reachable' : 'not reachable'}, ` +
        `queue ${queue ?? '–'}` +
        (lastError ? `; last error: ${lastError.message || lastError}` : ''),
      head: ['Server', 'Wanted', 'Seen', 'Up', 'Sessions'],
      rows: entries.map(([name, s]) => [name, s.wanted, s.seen,
        s.up === null ? null : { badge: s.up ? 'UP' : 'DOWN', tone: s.up ? 'ready' : 'bad' }, s.sessions])
    }
  }
}

// HAProxy's state of a server, with "down" when its health check says so.
function haproxyState (server) {
  if (!server || !server.seen) return '-'
  return server.up === false && server.seen !== 'maint' ? `${server.seen} (down)` : server.seen
}

module.exports = { describeServers }
