'use strict'

// The CLI's exit codes (lib/cli/exit-codes.js): one table from a PoolError's code, matching what
// each throw site chose before; a pool's error over the control socket maps the same way.

const t = require('tap')
const { poolError, codes } = require('../../lib/errors')
const { EXIT, EXIT_CODES, exitCodeOf } = require('../../lib/cli/exit-codes')
const { deserializeError, serializeError } = require('../../lib/control/protocol')

t.test('every code has an exit code: usage or failure', async (t) => {
  for (const code of Object.values(codes)) {
    t.ok(code in EXIT_CODES, `${code} is in the table`)
    t.ok([EXIT.USAGE, EXIT.FAILURE].includes(exitCodeOf(poolError(code, 'x'))),
      `${code} → ${exitCodeOf(poolError(code, 'x'))}`)
  }
})

t.test('exit codes: one table, matching what each throw site chose before', async (t) => {
  const exit = (code, details) => exitCodeOf(poolError(code, 'x', { details }))
  t.equal(exit(codes.BAD_OPTION), EXIT.USAGE)
  t.equal(exit(codes.PORT_IN_USE), EXIT.USAGE)
  t.equal(exit(codes.BOOT_FAILED, { headline: 'h', appError: { message: 'm' } }), EXIT.FAILURE)
  t.equal(exit(codes.RELOAD_FAILED, { appError: { message: 'm' }, replaced: [] }), EXIT.FAILURE)
  t.equal(exit(codes.STOPPING), EXIT.USAGE, 'refused because the pool stops')
  t.equal(exit(codes.STOPPING, { appError: { message: 'the pool is stopping' }, replaced: [] }), EXIT.FAILURE,
    'a reload cut short by a stop')
  for (const reason of ['missing', 'refused', 'denied', 'foreign']) {
    t.equal(exit(codes.CONTROL_UNREACHABLE, { reason }), EXIT.USAGE, reason)
  }
  for (const reason of ['io', 'timeout', 'closed']) {
    t.equal(exit(codes.CONTROL_UNREACHABLE, { reason }), EXIT.FAILURE, reason)
  }
  t.equal(exitCodeOf(new Error('a bug')), EXIT.FAILURE, 'anything else is an internal error')
  t.equal(exitCodeOf(poolError(codes.HAPROXY_SOCKET, 'x')), EXIT.USAGE)
})

t.test('a library error carries no CLI exit code; exitCode is not a constructor option', async (t) => {
  const err = poolError(codes.BAD_OPTION, 'x', { exitCode: EXIT.FAILURE })
  t.notOk('exitCode' in err)
  t.equal(exitCodeOf(err), EXIT.USAGE)
})

t.test('over the control socket: the code and the facts travel, the CLI maps them', async (t) => {
  t.same(serializeError(poolError(codes.BOOT_FAILED, 'b')), { code: codes.BOOT_FAILED, message: 'b' },
    'no exit code on the wire')
  const cutShort = poolError(codes.STOPPING, 'the pool is stopping',
    {
      details: {
        appError: { message: 'the pool is stopping', stack: 's' },
        replaced: [{ slot: 1, oldPid: 10, newPid: 11 }]
      }
    })
  const wire = JSON.parse(JSON.stringify(serializeError(cutShort)))
  t.same(wire.replaced, [{ slot: 1, oldPid: 10, newPid: 11 }], 'a reload that had begun says what it replaced')
  t.equal(exitCodeOf(deserializeError(wire)), EXIT.FAILURE,
    'a reload cut short by a stop: failure, as from the pool itself')
  t.equal(exitCodeOf(deserializeError({ code: codes.STOPPING, message: 'm' })), EXIT.USAGE, 'refused upfront: usage')
  t.equal(exitCodeOf(deserializeError({ code: codes.BAD_OPTION, message: 'm' })), EXIT.USAGE)
  t.equal(exitCodeOf(deserializeError({ code: codes.RELOAD_FAILED, message: 'm', appError: { message: 'boom' } })),
    EXIT.FAILURE)
  t.equal(exitCodeOf(deserializeError({ message: 'no code' })), EXIT.FAILURE, 'no code: internal')
  for (const code of Object.values(codes)) {
    const local = poolError(code, 'x')
    t.equal(exitCodeOf(deserializeError(serializeError(local))), exitCodeOf(local),
      `${code}: the same exit code through the socket`)
  }
})

t.test('a pool of an older version said the exit code itself: it is kept', async (t) => {
  const remote = deserializeError({ code: codes.BAD_OPTION, message: 'm', exitCode: 7 })
  t.equal(remote.exitCode, 7)
  t.equal(exitCodeOf(remote), 7)
  t.equal(exitCodeOf(deserializeError({ code: codes.STOPPING, message: 'm', exitCode: 1 })), EXIT.FAILURE)
  t.notOk('exitCode' in deserializeError({ code: codes.BAD_OPTION, message: 'm', exitCode: 0 }),
    'a zero is no failure code: ignored')
})
