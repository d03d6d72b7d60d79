'use strict'

// `show servers state BACKEND`: `srv_admin_state`, the bits `set server ... state` changes (`show stat` reads
// DOWN for drain and ready alike under a failing check). HAProxy 2.6: `disabled` 5, then ready 4, drain 12, maint 5.

const ADMIN = Object.freeze({ FMAINT: 0x01, IMAINT: 0x02, CMAINT: 0x04, FDRAIN: 0x08, IDRAIN: 0x10, RMAINT: 0x20 })
const OP_STATES = ['stopped', 'starting', 'running', 'stopping']

// Only the forced bits count: IMAINT (`track`) and RMAINT (DNS) are not ours.
function adminStateName (bits) {
  if (bits & ADMIN.FMAINT) return 'maint'
  if (bits & ADMIN.FDRAIN) return 'drain'
  return 'ready'
}

// → { serverName: { admin, op, adminBits, addr, port } }, or null for an error reply.
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
