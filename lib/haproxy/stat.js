'use strict'

// Parsing of HAProxy's `show stat` CSV. Fields may be quoted and hold commas, doubled quotes and
// newlines (agent and check descriptions do), so lines cannot simply be split on ',' and '\n'.

// RFC 4180 style records: a field that starts with '"' runs to the next lone '"'; '""' inside it
// is one '"'. Blank lines are skipped. Returns an array of records, each an array of strings.
function parseCsv (text) {
  const records = []
  let record = []
  let field = ''
  let i = 0
  const endField = () => { record.push(field); field = '' }
  const endRecord = () => {
    endField()
    if (record.length > 1 || record[0] !== '') records.push(record)
    record = []
  }
  while (i < text.length) {
    const ch = text[i]
    if (ch === '"' && field === '') {
      const close = readQuoted(text, i + 1)
      field = close.value
      i = close.next
      continue
    }
    if (ch === ',') endField()
    else if (ch === '\n') endRecord()
    else if (ch !== '\r') field += ch
    i++
  }
  if (field !== '' || record.length > 0) endRecord()
  return records
}

// Read a quoted field whose opening quote is just before `start`.
function readQuoted (text, start) {
  let value = ''
  let i = start
  while (i < text.length) {
    if (text[i] === '"') {
      if (text[i + 1] === '"') { value += '"'; i += 2; continue }
      return { value, next: i + 1 }
    }
    value += text[i++]
  }
  return { value, next: i } // unterminated: keep what we have rather than lose the row
}

const NUMBER = /^-?\d+(?:\.\d+)?$/

// Numbers become numbers, empty fields null, anything else stays a string.
function toValue (field) {
  if (field === '') return null
  return NUMBER.test(field) ? Number(field) : field
}

// `show stat` output → one object per row keyed by the header's names (pxname, svname, qcur,
// scur, status, ...). The header is the record starting with '# '.
function parseStat (text) {
  const records = parseCsv(text)
  const headerAt = records.findIndex((r) => r[0].startsWith('# '))
  if (headerAt < 0) return []
  const names = records[headerAt].map((n, i) => (i === 0 ? n.slice(2) : n))
  return records.slice(headerAt + 1).map((fields) => {
    const row = {}
    names.forEach((name, i) => {
      if (name === '' || name === '-') return // trailing comma and HAProxy's placeholder column
      row[name] = toValue(fields[i] ?? '')
    })
    return row
  })
}

// A server's `status` column → the state the pool reasons about. A ready server reads
// `no check` without health checks and `UP` (or `UP 1/3` while its check warms up) with them.
function serverState (status) {
  const s = String(status ?? '')
  if (s.startsWith('MAINT')) return 'maint' // also "MAINT (via be/srv)", "MAINT (resolution)"
  if (s.startsWith('DRAIN') || s === 'NOLB') return 'drain'
  if (s === 'no check' || s.startsWith('UP')) return 'ready'
  if (s.startsWith('DOWN')) return 'down'
  return 'unknown'
}

module.exports = { parseCsv, parseStat, serverState }
