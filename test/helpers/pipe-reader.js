'use strict'

// A real pipe whose reader a test stops and starts again, as `| (sleep 600)`, a stuck log
// shipper or a slow `tee` would.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { tempDir } = require('../helpers')

const PIPE_BYTES = 65536 // Linux's default pipe capacity

// A FIFO whose reading end the test holds: `fd` is the writing end for whoever writes (opened
// non-blocking for an in-process writer, or handed to a child as its stdout and stderr).
// read() takes what the pipe holds now; start() keeps reading every 20 ms until stop().
function pipeReader (t, { nonBlockingWriter = false } = {}) {
  const dir = tempDir(t, 'pool-log-reader-')
  const fifo = path.join(dir, 'out')
  const made = spawnSync('mkfifo', [fifo])
  if (made.status !== 0) throw new Error(`mkfifo failed: ${made.stderr}`)
  const readFd = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  const fd = fs.openSync(fifo, fs.constants.O_WRONLY | (nonBlockingWriter ? fs.constants.O_NONBLOCK : 0))
  const chunk = Buffer.alloc(PIPE_BYTES)
  let timer = null
  let readerOpen = true
  const r = {
    fd,
    text: '',
    read () {
      while (readerOpen) {
        let n
        try { n = fs.readSync(readFd, chunk, 0, chunk.length, null) } catch (err) {
          if (err.code === 'EAGAIN') return
          throw err
        }
        if (n === 0) return
        r.text += chunk.toString('utf8', 0, n)
      }
    },
    start () { if (!timer) timer = setInterval(() => r.read(), 20) },
    stop () { clearInterval(timer); timer = null },
    // Every whole line so far, parsed where it is JSON.
    records () {
      return r.text.split('\n').slice(0, -1).map((line) => {
        try { return JSON.parse(line) } catch { return { unparsed: line } }
      })
    },
    closeWriter () { try { fs.closeSync(fd) } catch {} },
    // The reader goes away for good (`| head -1`): writes to the pipe fail with EPIPE.
    closeReader () {
      r.stop()
      if (readerOpen) fs.closeSync(readFd)
      readerOpen = false
    }
  }
  t.teardown(() => {
    r.closeReader()
    r.closeWriter()
  })
  return r
}

module.exports = { pipeReader, PIPE_BYTES }
