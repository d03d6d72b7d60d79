'use strict'

// `show servers state BACKEND`: each server's administrative state as HAProxy holds it.
//
// `show stat`'s status column cannot tell what the pool asked for: a server set DRAIN or READY
// whose health check fails reads `DOWN` either way. `srv_admin_state` is the bit field that
// `set server ... state` changes, so comparing it with the wanted state is exact. Verified on
// HAProxy 2.6: `disabled` in the config → 5 (FMAINT|CMAINT); `state ready` → 4; `state drain`
// → 12 (CMAINT|FDRAIN); `state maint` → 5. CMAINT only remembers the config's `disabled`.

const ADMIN = Object.freeze({ FMAINT: 0x01, IMAINT: 0x02, CMAINT: 0x04, FDRAIN: 0x08, IDRAIN: 0x10, RMAINT: 0x20 })
const OP_STATES = ['stopped', 'starting', 'running', 'stopping']

// The state `set server ... state X` leaves behind: 'maint', 'drain' or 'ready'. Only the
// forced bits count; inherited (IMAINT via `track`) or DNS (RMAINT) maintenance is not ours.
function adminStateName (bits) {
  if (bits & ADMIN.FMAINT) return 'maint'
  if (bits & ADMIN.FDRAIN) return 'drain'
  return 'ready'
}

// Reply text → { serverName: { admin, op, adminBits, addr, port } }. Returns null when the text
// is not a servers-state dump (an error message), for the caller to report.
function parseServersState (text) {
  const lines = text.split('\n')
  const headerAt = lines.findIndex((l) => l.startsWith('# be_id '))
  if (headerAt < 0) return null
  const names = lines[headerAt].slice(2).split(' ')
  const out = {}
  for (const line of lines.slice(headerAt + 1)) {
    if (line.trim() === '' || line.startsWith('#')) continue
    const fields = line.split(' ')
    const row = {}
    names.forEach((name, i) => { row[name] = fields[i] })
    const adminBits = Number(row.srv_admin_state)
    out[row.srv_name] = {
      admin: adminStateName(adminBits),
      op: OP_STATES[Number(row.srv_op_state)] ?? 'unknown',
      adminBits,
      addr: row.srv_addr,
      port: Number(row.srv_port)
    }
  }
  return out
}

module.exports = { ADMIN, adminStateName, parseServersState }
