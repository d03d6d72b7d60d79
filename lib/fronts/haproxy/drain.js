'use strict'

// Waiting for HAProxy to let go of a server set DRAIN: `show stat` every DRAIN_POLL_INTERVAL ms
// until the server holds no session (scur) and no queued request (qcur).

const DRAIN_POLL_INTERVAL = 50 // ms

// Resolves true once drained; false when the wait ends otherwise: the plan for the server moved
// on (`current()` false: its worker exited, MAINT; the front stopped), or HAProxy could not be
// asked (`onError(err)` is told). `reader`: a HaproxyClient.
async function untilDrained ({ reader, backend, name, current, onError }) {
  while (current()) {
    let row
    try {
      row = (await reader.servers(backend))[name]
    } catch (err) {
      onError(err)
      return false
    }
    // The plan may have changed while `show stat` was on its way (the worker exited, MAINT; and
    // its replacement may already be READY): this answer is no longer about this drain.
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
