'use strict'

// Polls `show stat` until a DRAIN server holds no session (scur) nor queued request (qcur).

const DRAIN_POLL_INTERVAL = 50 // ms

// → true once drained; false when `current()` turns false (MAINT, the front stopped) or HAProxy cannot be
// asked (`onError(err)`). `reader`: a HaproxyClient.
async function untilDrained ({ reader, backend, name, current, onError }) {
  while (current()) {
    let row
    try {
      row = (await reader.servers(backend))[name]
    } catch (err) {
      onError(err)
      return false
    }
    // The plan changed while `show stat` was on its way: the answer may be about a replacement.
    if (!current()) return false
    if (!row || (row.scur === 0 && !row.qcur)) return true
    await sleep(DRAIN_POLL_INTERVAL)
  }
  return false
}

function sleep (ms) {
  return new Promise((resolve) => setTimeout(resolve, ms).unref())
}

module.exports = { untilDrained, DRAIN_POLL_INTERVAL, sleep }
