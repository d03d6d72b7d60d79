'use strict'
// Which requests are long-lived (lib/protocol/long-lived.js): the one rule the embedded balancer
// applies and the generated HAProxy config writes, and a bad --stream-routes refused at start.
const t = require('tap')
const { streamRoutes, isLongLived, declaredLongLived } = require('../../lib/protocol/long-lived')
const { createBalancer } = require('../../lib/fronts/balancer')
const { haproxyConfig } = require('../../lib/generate/haproxy')

const req = (url, headers = {}) => ({ url, headers })

t.test('an event stream, or a path under a stream route; nothing else', async (t) => {
  const routes = streamRoutes(' /api/chat, /events ,')
  t.same(routes, ['/api/chat', '/events'])
  t.ok(isLongLived(req('/', { accept: 'text/html, text/event-stream' }), []), 'a client that accepts text/event-stream')
  t.ok(isLongLived(req('/api/chat?id=1'), routes), 'a path under a route, its query aside')
  t.ok(isLongLived(req('/api/chatty'), routes), 'a prefix, as HAProxy\'s path_beg')
  t.notOk(isLongLived(req('/x?to=/api/chat'), routes), 'a route in the query is not the path')
  t.notOk(isLongLived(req('/', { accept: 'text/html' }), routes), 'a page')
  t.notOk(isLongLived(req('/api/chat'), []), 'no routes: only event streams')
  t.ok(declaredLongLived({ 'x-pool-stream': '1' }))
  t.notOk(declaredLongLived({ 'x-pool-stream': 'yes' }))
})

t.test('a route that is not a path prefix is refused before anything starts, by both fronts', async (t) => {
  t.throws(() => streamRoutes('api/chat'), /"api\/chat" is not a path prefix/)
  t.throws(() => createBalancer({ streamRoutes: '/a,b' }), /streamRoutes \(--stream-routes\): "b" is not a path prefix/)
  t.throws(() => haproxyConfig({ workers: 2, streamRoutes: '/a b' }), /--stream-routes: "\/a b" is not a path prefix/)
  t.match(haproxyConfig({ workers: 2, streamRoutes: '/api/chat' }), /acl pool_long_lived path_beg \/api\/chat/)
})
