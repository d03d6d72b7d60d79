'use strict'

// `show servers state` parsing, and the periodic comparison that uses it: a server state changed
// behind the pool's back is put back to what the pool wants.

const t = require('tap')
const { parseServersState, adminStateName } = require('../../lib/haproxy/servers-state')
const { resolveHaproxyFrontOptions } = require('../../lib/fronts/haproxy/options')
const { waitFor } = require('../helpers')
const { onPlatforms } = require('../helpers/haproxy')
const { startLabHaproxy, startHaproxyPool, statuses, allUp } = require('../helpers/haproxy-pool')

// Verbatim from HAProxy 2.6.12: worker1 after `state ready` (its check failing), worker2 after
// `state drain`, worker3 as the config's `disabled` left it.
const DUMP = '1\n' +
  '# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight ' +
  'srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state ' +
  'bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr ' +
  'srv_agent_addr srv_agent_port\n' +
  '3 pool 1 worker1 127.0.0.1 0 4 1 1 1 8 2 0 6 0 0 0 - 31002 - 0 0 - - 0\n' +
  '3 pool 2 worker2 127.0.0.1 2 12 1 1 1 1 0 1 6 0 0 0 - 31003 - 0 0 - - 0\n' +
  '3 pool 3 worker3 127.0.0.1 0 5 1 1 1 1 0 0 14 0 0 0 - 31004 - 0 0 - - 0\n\n'

t.test('show servers state: the admin state the pool set, whatever the health check says', async (t) => {
  const s = parseServersState(DUMP)
  t.same(Object.keys(s), ['worker1', 'worker2', 'worker3'])
  t.match(s.worker1, { admin: 'ready', op: 'stopped', adminBits: 4, addr: '127.0.0.1', port: 31002 },
    'ready though DOWN (show stat would only say DOWN)')
  t.match(s.worker2, { admin: 'drain', op: 'running', port: 31003 })
  t.match(s.worker3, { admin: 'maint', op: 'stopped' }, '`disabled` in the config reads as maint')
  t.equal(parseServersState("Can't find backend.\n\n"), null, 'an error reply is not a state')
  t.same([0, 1, 4, 5, 8, 12, 0x20].map(adminStateName), ['ready', 'maint', 'ready', 'maint', 'drain', 'drain', 'ready'],
    'only the forced bits count')
})

t.test('front options: defaults agree with `pool config haproxy`; bad values refused', async (t) => {
  t.same(resolveHaproxyFrontOptions({ haproxySocket: '/run/pool/haproxy-admin.sock' }),
    {
      haproxySocket: '/run/pool/haproxy-admin.sock',
      haproxyBackend: 'pool',
      haproxyCheckInterval: 2000,
      haproxyTimeout: 2000,
      stopAnnounce: 2000
    })
  t.throws(() => resolveHaproxyFrontOptions({}),
    { code: 'POOL_E_BAD_OPTION', message: /needs haproxySocket \(--haproxy-socket\)/ })
  t.throws(() => resolveHaproxyFrontOptions({ haproxySocket: '/x.sock', haproxyCheckInterval: 10 }),
    { message: /at least 100ms/ })
})

onPlatforms(t, 'a state changed behind the pool\'s back is re-asserted at the next check', async (t, platform) => {
  const lab = await startLabHaproxy(t, { platform, workers: 2 })
  const pool = await startHaproxyPool(t, lab, { workers: 2, args: ['--haproxy-check-interval', '300ms'] })
  await waitFor(allUp(lab.client), { timeout: 3000, what: 'both servers UP' })
  // An operator, or a stray script. (The pool may put it back before a read here could see it;
  // the reassert log line below is what proves the pool saw MAINT.)
  await lab.client.setServerState('pool', 'worker2', 'maint')
  await waitFor(async () => (await statuses(lab.client)).worker2 === 'UP',
    { timeout: 2000, interval: 20, what: 'worker2 UP again' })
  const line = await pool.waitLog((l) => l.event === 'haproxy-reassert')
  t.same(line.servers, [{ server: 'worker2', wanted: 'ready', seen: 'maint' }],
    'the pool owns worker<i> states and says what it put back')
})
